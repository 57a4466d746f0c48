"""Transcript render ops: what markdown the user's messages become."""

from __future__ import annotations

import pytest

from acp_nvim.client.session import prose
from acp_nvim.client.session.model import Message
from acp_nvim.client.session.prose import ROW_MAX, Prose, nested, reflow
from acp_nvim.client.session.view import message_op


def user(text: str) -> list[str]:
    message = Message("m1", "user")
    message.text = text
    lines: list[str] = message_op(message)["lines"]
    assert lines[0] == "## You"
    return lines[1:]


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("a\n```py\nx", ["a", "```py", "x", "```"]),
        ("~~~~\nx\n~~~", ["~~~~", "x", "~~~", "~~~~"]),  # too short to close
        ("```\nx\n~~~", ["```", "x", "~~~", "```"]),  # another character
        ("```\nx\n``` not a close", ["```", "x", "``` not a close", "```"]),
        ("```\nx\n````", ["```", "x", "````"]),  # longer closes
        ("   ```\nx\n```\nafter", ["   ```", "x", "```", "after"]),
        ("    ```\nindented code", ["    ```", "indented code"]),  # not a fence
        ("inline ``` is text", ["inline ``` is text"]),
    ],
)
def test_a_fence_the_user_leaves_open_is_closed_after_the_message(
    text: str, lines: list[str]
) -> None:
    assert user(text) == lines


def test_agent_messages_stream_as_they_are() -> None:
    message = Message("m2", "agent")
    message.text = "```py\nx"
    assert message_op(message)["lines"] == ["## Agent", "```py", "x"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Run `git\nstatus` now.\nAnd on.", "Run `git status` now. And on."),
        ("a\n   indented on", "a indented on"),  # a soft break's indent goes
        ("a\n\nb", "a\n\nb"),
        (
            "Steps:\n1. one\n2) two\n  still two\n2024 was",
            "Steps:\n1. one\n2) two still two 2024 was",
        ),
        ("# Head\ntext\n- x\n* y\n+ z\n> q", "# Head\ntext\n- x\n* y\n+ z\n> q"),
        ("a\n**bold** b\n-not a bullet", "a **bold** b -not a bullet"),
        ("```py\nx = 1\ny = 2\n```\nafter\nthat", "```py\nx = 1\ny = 2\n```\nafter that"),
        ("~~~~\nx\n~~~\ny\n~~~~\nz", "~~~~\nx\n~~~\ny\n~~~~\nz"),  # a short ~~~ closes nothing
        ("hard  \nbreak\\\nnext", "hard  \nbreak\\\nnext"),
        ("| a |\n| - |\ntext", "| a |\n| - |\ntext"),
        ("Title\n===\nbody", "Title\n===\nbody"),
        ("text\n---\n<div>\nx", "text\n---\n<div>\nx"),
        ("\n    code\n    more", "    code\n    more"),  # indented code
        ("\n\r\nYou added", "You added"),  # no blank lines before a message's text
        ("x\n", "x"),  # line breaks at the end: no blank row above the next block
        ("x\n\n\n", "x"),
        ("```\nx\n```\n", "```\nx\n```"),
        ("x\n1", "x\n1"),  # undecided at the end: hard
    ],
)
def test_soft_breaks_join_and_hard_ones_stay(text: str, shown: str) -> None:
    assert reflow(text) == shown
    agent = Message("m3", "agent")
    agent.text = text
    assert message_op(agent)["lines"][1:] == shown.split("\n")


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_a_reply_streamed_in_any_pieces_shows_as_the_whole(size: int) -> None:
    text = "Run `git\nstatus`:\n\n1. one\n   more\n10) ten\n```\nx\ny\n```\n- a\n  b\nend\n7"
    prose = Prose()
    pieces = [prose.feed(text[i : i + size]) for i in range(0, len(text), size)]
    assert "".join(pieces) + prose.flush() == reflow(text)


def test_line_breaks_at_the_end_are_drawn_once_text_follows_them() -> None:
    prose = Prose()
    drawn = [prose.feed(piece) for piece in ("One.\n", "\n", "Two", ".\n")]
    assert drawn == ["One.", "", "\n\nTwo", "."]
    assert prose.flush() == ""  # the message ended: its last line break is never drawn
    assert prose.feed("```\nx\n") == "\n```\nx"  # a reply going on after a tool call
    assert prose.closing() == "```"
    assert prose.feed(prose.closing()) == "\n```"


def test_blank_lines_before_a_messages_first_text_never_open_its_block() -> None:
    """A reply that goes on from one the user's steered message cut in two begins
    with the line breaks that separated them: its block began with blank rows."""
    prose = Prose()
    assert [prose.feed(piece) for piece in ("\n", "\n", "You added", "\n\nmore")] == [
        "",
        "",
        "You added",
        "\n\nmore",
    ]


class _Everything:
    def __contains__(self, _: object) -> bool:
        return True


def test_prose_decided_at_a_glance_reads_as_the_full_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every first character of a line, and of a line after a break, in and out of
    # a fence: the shortcut for plain text draws what the full checks draw.
    starts = [chr(c) for c in range(1, 128)] + ["\u00a0", "\u2003", "\u3000", "é"]
    text = "".join(
        f"text {c}x\n{c}\nplain\n{c}{c}{c} y  \n    code\n{c}\n\n```\n{c}z\n```\n" for c in starts
    )
    quick = reflow(text)
    monkeypatch.setattr(prose, "_MAY_START_BLOCK", _Everything())
    assert quick == reflow(text)


def test_rows_stop_growing_at_their_bound() -> None:
    rows = reflow("word\n" * ROW_MAX).split("\n")
    assert len(rows) > 1 and max(map(len, rows)) <= ROW_MAX + len("word")


def test_the_users_text_is_drawn_as_typed() -> None:
    assert user("a\nb") == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("# a\n## b\n### c\n###### d", "#### a\n##### b\n###### c\n###### d"),
        ("  ## indented\n#not one\n####### nor this", "  ##### indented\n#not one\n####### nor this"),
        ("two lines\nof a title\n===\nafter", "#### two lines of a title\nafter"),
        ("text\n\n---\nrule, not a title", "text\n\n---\nrule, not a title"),
        ("- an item\n---", "- an item\n---"),  # a rule after a list
        ("> quoted\nlazy\n---", "> quoted\nlazy\n---"),
        ("    code\n---", "    code\n---"),
        ("~~~\n# code\ntext\n---\n~~~\n# after", "~~~\n# code\ntext\n---\n~~~\n#### after"),
    ],
)
def test_a_messages_headings_go_below_the_documents(text: str, shown: str) -> None:
    """The export's headings are levels 1-3: a message's (a `#` line, a paragraph
    underlined) go three below them; lists, quotes and code keep their lines."""
    assert "\n".join(nested(text.split("\n"), 3)) == shown
