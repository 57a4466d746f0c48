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
