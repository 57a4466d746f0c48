"""The demo agent's text as someone trying the plugin reads it."""

from acp_nvim.client.session.view import LINE_MAX
from acp_nvim.demo_agent._text import reply


def test_the_long_reply_comes_in_paragraphs_that_no_line_cut_reaches() -> None:
    """`long` streams 2,000 words: in one line they passed the transcript's line cut
    and the reply ended in "[line cut at 10,000 characters]"."""
    lines = reply("long", {"long"}).split("\n")
    words = [line for line in lines if line.startswith("word")]
    assert len(words) == 50 and words[-1].endswith("word1999")
    assert max(len(line) for line in lines) < LINE_MAX // 10


def test_every_variable_the_demo_agent_reads_is_in_the_help() -> None:
    """`ACP_DEMO_DELAY` paced the demo agent's replies, but :help acp never named it:
    a user who found the demo slow (or a screencast too fast) had no way to know."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    source = "".join(p.read_text() for p in (root / "acp_nvim" / "demo_agent").glob("*.py"))
    read = set(re.findall(r"environ\.get\(\"(ACP_[A-Z_]+)\"", source))
    assert "ACP_DEMO_DELAY" in read
    help_text = (root / "doc" / "acp.txt").read_text()
    assert [name for name in sorted(read) if name not in help_text] == []
