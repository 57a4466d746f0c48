"""Transcript render ops: what markdown the user's messages become."""

from __future__ import annotations

import pytest

from acp_nvim.client.session.model import Message
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
