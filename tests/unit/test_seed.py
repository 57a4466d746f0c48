"""Seeded sessions: the conversation a new session's first prompt carries."""

from __future__ import annotations

import msgspec
import pytest

from acp_nvim.client.agent.sessions import prompt_blocks
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import MessagePatch, Session
from acp_nvim.client.session.seed import SEED_URI, Exchange, conversation, markdown
from acp_nvim.protocol import schema_v1 as v1
from acp_nvim.protocol import schema_v2 as v2
from tests.fakes.editor import RecordingEditor


def said(session: Session, role: str, text: str, message_id: str | None = None) -> None:
    session.apply_message(MessagePatch(message_id, role, text))  # type: ignore[arg-type]


def test_conversation_pairs_prompts_with_replies_and_leaves_thoughts_out() -> None:
    session = Session()
    said(session, "agent", "hello before any prompt")
    said(session, "user", "first", "u1")
    said(session, "thought", "hm", "t1")
    said(session, "agent", "one", "a1")
    said(session, "agent", "two", "a2")
    said(session, "user", "second", "u2")
    said(session, "agent", "three", "a3")
    assert conversation(session) == [
        Exchange("", "hello before any prompt"),
        Exchange("first", "one\n\ntwo"),
        Exchange("second", "three"),
    ]
    # Up to an item: the second prompt and what follows it are left out.
    end = session.items.index(("message", "u2"))
    assert conversation(session, end) == conversation(session)[:2]


def test_the_markdown_holds_every_exchange_and_nothing_when_nothing_was_said() -> None:
    assert markdown([]) is None
    assert markdown([Exchange(" ", "")]) is None
    text = markdown([Exchange("what is 2+2?", "4"), Exchange("and 3+3?", "")])
    assert text == "## You\n\nwhat is 2+2?\n\n## Agent\n\n4\n\n## You\n\nand 3+3?\n"


def test_a_prompts_headings_are_below_who_speaks() -> None:
    """A prompt's own `## Agent` read, to the agent told the conversation, as the
    agent's turn beginning."""
    text = markdown([Exchange("fix it\n## Agent\nsays no", "# Done\nyes")])
    assert text == "## You\n\nfix it\n#### Agent\nsays no\n\n## Agent\n\n### Done\nyes\n"


@pytest.mark.parametrize("schema", [v1, v2])
@pytest.mark.parametrize("embed", [True, False])
def test_the_seed_goes_ahead_of_the_text_once(schema: object, embed: bool) -> None:
    chat = Chat(1, "fake", RecordingEditor())
    chat.seed = markdown([Exchange("before", "answer")])
    assert chat.seed is not None
    text = chat.seed
    blocks = prompt_blocks(chat, "now", [], schema, embed=embed, image=False)  # type: ignore[arg-type]
    wire = msgspec.to_builtins(blocks)
    if embed:
        assert wire[1] == {
            "type": "resource",
            "resource": {"uri": SEED_URI, "text": text, "mimeType": "text/markdown"},
        }
    else:
        assert text in wire[0]["text"]
    assert wire[-1] == {"type": "text", "text": "now"}
    # Taken: the next prompt of the session carries only its own text.
    again = msgspec.to_builtins(prompt_blocks(chat, "later", [], schema, embed=embed, image=False))  # type: ignore[arg-type]
    assert again == [{"type": "text", "text": "later"}]
