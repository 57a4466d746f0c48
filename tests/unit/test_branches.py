"""Turns and branches of a chat (session/branches.py, ShownBranch.leave and ShownBranch.pick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_nvim.client.session.branches import Branches, Turn
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.model import MessagePatch, Prompt, ToolCallPatch
from tests.fakes.editor import RecordingEditor


def turn(name: str) -> Turn:
    return Turn(name, 0, "s", Prompt(name))


def test_a_rewind_keeps_the_turns_left_as_a_branch_and_a_pick_swaps_what_differs() -> None:
    branches = Branches()
    one, two, three = turn("one"), turn("two"), turn("three")
    for t in (one, two, three):
        branches.begin(t)
    assert branches.leave(2) == [two, three]
    assert branches.path == [one]
    # A rewind's branch that never got a turn of its own is not kept: another holds it.
    assert branches.leave(1) == [one]
    assert [b.turns for b in branches.others] == [[one, two, three]]
    branches.begin(new := turn("new"))
    assert [b.turns for b in branches.all] == [[new], [one, two, three]]
    listed = branches.listed()
    assert [(b["current"], b["turns"], b["leaves_at"], b["prompt"]) for b in listed] == [
        (True, 1, None, "new"),
        (False, 3, 1, "one"),
    ]
    assert [b["last_prompt"] for b in listed] == ["new", "three"]
    other = listed[1]["id"]
    out, into = branches.pick(other)
    assert (out, into) == ([new], [one, two, three])
    assert [b.turns for b in branches.others] == [[new]]
    with pytest.raises(KeyError):
        branches.pick(other)  # shown now
    with pytest.raises(ValueError):
        branches.leave(4)


def test_a_place_is_marked_once_and_unmarked_when_no_branch_leaves_there() -> None:
    branches = Branches()
    branches.begin(one := turn("one"))
    branches.begin(turn("two"))
    assert not branches.mark(1)  # no branch leaves there
    branches.leave(2)
    assert branches.mark(1, "mark") and not branches.mark(1, "again")
    assert branches.dropped() == []
    # Back before a turn was sent in the rewind's branch: it goes, and so does its mark.
    branches.pick(1)
    assert branches.others == [] and branches.dropped() == ["mark"]
    assert not branches.mark(1)
    # Left with another branch still leaving there, the mark stays.
    branches.leave(2)
    assert branches.mark(1, "mark 2")
    branches.begin(turn("two again"))
    branches.leave(2)
    assert not branches.mark(1, "mark 3")  # marked
    branches.pick(1)
    assert len(branches.others) == 1 and branches.dropped() == []
    # Before the first turn: a place too.
    branches.leave(1)
    assert branches.path == [] and branches.mark(0, "top")
    branches.pick(1)
    assert branches.dropped() == ["top"] and branches.path[0] is one


def said(chat: Chat, role: str, text: str, message_id: str) -> None:
    chat.on_message(MessagePatch(message_id, role, text))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_hidden_turns_leave_the_model_and_come_back_as_they_were() -> None:
    editor = RecordingEditor()
    chat = Chat(1, "fake", editor)
    chat.ready("s1", 2, None)
    for n in (1, 2, 3):
        await chat.start_turn(f"prompt {n}")
        said(chat, "user", f"prompt {n}", f"u{n}")  # v2: the agent acknowledges it
        chat.on_tool_call(ToolCallPatch(f"t{n}", title=f"tool {n}", status="completed"))
        said(chat, "agent", f"reply {n}", f"m{n}")
        chat.end_turn("end_turn")
    assert chat.branches.last_reply(chat.session, 1) == "m1" and chat.branches.last_reply(chat.session, 3) == "m3"
    before = (list(chat.session.items), dict(chat.session.messages), dict(chat.session.aliases))

    left = chat.shown.leave(2)
    assert [t.prompt.text for t in left] == ["prompt 2", "prompt 3"]
    session = chat.session
    assert set(session.tool_calls) == {"t1"} and "m2" not in session.messages
    assert set(session.aliases) == {"u1"}
    cut = next(op for op in editor.ops[1] if op["op"] == "cut")
    assert [t["key"] for t in cut["turns"]] == [t.message for t in left]
    assert cut["turns"][0]["block"] == "#message:" + left[0].message
    # A new session's ids may repeat the hidden ones: they make new items.
    chat.ready("s2", 2, None)
    await chat.start_turn("prompt 2b")
    said(chat, "user", "prompt 2b", "u2")
    said(chat, "agent", "reply 2b", "m2")
    chat.end_turn("end_turn")
    assert session.messages["m2"].text == "reply 2b"
    assert [t.session_id for t in chat.branches.path] == ["s1", "s2"]

    # Back to the first branch: the model is as it was, the other turn hidden.
    other = next(b["id"] for b in chat.branches.listed() if not b["current"])
    assert chat.shown.pick(other).session_id == "s1"
    assert (session.items, session.messages, session.aliases) == before
    assert chat.branches.last_reply(chat.session, 2) == "m2" and session.messages["m2"].text == "reply 2"
    assert editor.ops[1][-2] == {"op": "uncut", "turns": [t.message for t in left]}
    status = editor.last_status(1)
    assert status["turns"] == ["prompt 1", "prompt 2", "prompt 3"]
    assert [b["current"] for b in status["branches"]] == [True, False]


@pytest.mark.anyio
async def test_a_turn_with_no_agent_message_id_has_no_fork_point() -> None:
    chat = Chat(1, "fake", RecordingEditor())
    chat.ready("s1", 1, None)
    await chat.start_turn("hello")
    chat.on_message(MessagePatch(None, "agent", "v1, no id"))
    chat.end_turn("end_turn")
    assert chat.branches.last_reply(chat.session, 1) is None


@pytest.mark.anyio
@pytest.mark.parametrize("version", [1, 2])
async def test_a_steered_turns_fork_point_is_the_agents_message_it_parted(version: int) -> None:
    """A message steered in parts the agent's message it came into: the rest, shown
    below the user's, is still the agent's message of that id (the fork keeps it
    all). A rewind to the next turn forked nowhere: it went on in a new session told
    the conversation, though the agent forks at messages."""
    chat = Chat(1, "fake", RecordingEditor())
    chat.ready("s1", version, None)
    await chat.start_turn("hold")
    said(chat, "agent", "holding\n", "m1")
    chat.on_steered("turn left")
    said(chat, "agent", "steered", "m1")
    chat.end_turn("end_turn")
    texts = [chat.session.messages[key].text for _, key in chat.session.items]
    assert texts[-3:] == ["holding\n", "turn left", "steered"]  # parted: shown below
    assert chat.branches.last_reply(chat.session, 1) == "m1"


@pytest.mark.anyio
async def test_a_turns_usage_is_the_difference_of_the_reports_around_it() -> None:
    editor = RecordingEditor()
    chat = Chat(1, "fake", editor)
    chat.ready("s1", 1, None)
    await chat.start_turn("one")
    chat.end_turn("end_turn")
    assert list(editor.transcript(1).values())[-1] == ["*— end_turn —*"]  # no report
    chat.on_usage(1500, 200_000, (0.25, "USD"))
    await chat.start_turn("two")
    chat.on_usage(4000, 200_000, (0.75, "USD"))
    chat.end_turn("end_turn")
    [line] = list(editor.transcript(1).values())[-1]
    assert line == "*— end_turn · 2.5k tokens · $0.50 —*"
    usage = editor.last_status(1)["usage"]
    assert usage["turn"] == {"tokens": 2500, "cost": {"amount": 0.5, "currency": "USD"}}
    assert usage["session"] == usage["turn"]
    await chat.start_turn("fails")
    chat.end_turn("error")  # nothing used: its line says no "0 tokens · $0.00"
    assert list(editor.transcript(1).values())[-1] == ["*— error —*"]
    assert editor.last_status(1)["usage"]["turn"]["tokens"] == 0
    # Another session (a rewind's, a seed's): counted from its own reports, from zero.
    chat.ready("s2", 1, None)
    assert "used" not in editor.last_status(1)["usage"]  # the meter was the first's
    await chat.start_turn("three")
    chat.on_usage(100, 200_000, None)
    chat.end_turn("end_turn")
    assert list(editor.transcript(1).values())[-1] == ["*— end_turn · 100 tokens —*"]
    assert editor.last_status(1)["usage"]["session"] == {"tokens": 100}
    # Back in the first (a branch picked back): from its last report, its sum goes on.
    chat.ready("s1", 1, None)
    await chat.start_turn("four")
    chat.on_usage(4500, 200_000, (0.80, "USD"))
    chat.end_turn("end_turn")
    usage = editor.last_status(1)["usage"]
    assert usage["turn"] == {"tokens": 500, "cost": {"amount": pytest.approx(0.05), "currency": "USD"}}
    assert usage["session"] == {"tokens": 3000, "cost": {"amount": pytest.approx(0.55), "currency": "USD"}}


@pytest.mark.anyio
async def test_a_turn_start_sends_no_earlier_prompt_and_the_status_stays_whole() -> None:
    """A send in a long chat cost Neovim more with every turn: each turn start sent
    every earlier prompt (status ``turns``) and every branch again. Now it sends the
    new turn and the shown branch's entry; the status Lua keeps from them (as the
    fake keeps it) is whole, before and after a rewind."""
    editor = RecordingEditor()
    chat = Chat(1, "fake", editor)
    chat.ready("s1", 2, None)

    async def turn(text: str) -> str:
        before = len(editor.ops[1])
        await chat.start_turn(text)
        said(chat, "agent", f"reply to {text}", f"m-{text}")
        chat.end_turn("end_turn")
        return json.dumps(editor.ops[1][before:])

    prompts = [f"prompt {n:02}\nits second line" for n in range(1, 61)]
    for text in prompts:
        sent = await turn(text)
    assert not any(text.split("\n")[0] in sent for text in prompts[:-1])
    chat.shown.leave(41)  # turns 41 to 60 stay as a branch
    sent = await turn("after the rewind")
    assert not any(text.split("\n")[0] in sent for text in prompts)

    status = editor.last_status(1)
    assert status["turns"] == [text.split("\n")[0] for text in prompts[:40]] + ["after the rewind"]
    assert status["branches"] == chat.branches.listed()
    assert [(b["current"], b["turns"], b["leaves_at"]) for b in status["branches"]] == [
        (True, 41, None),
        (False, 60, 41),
    ]


@pytest.mark.anyio
async def test_the_review_numbers_each_turn_as_the_branch_shown_does(tmp_path: Path) -> None:
    """Once a chat has another branch, the review numbers its turns as the shown
    branch does (``summary()["shown"]``): a turn left by a rewind is numbered in no
    view, the turns after it by their place there. A turn start adds its own number
    to the ones the review holds, not all of them again."""
    import anyio

    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.tasks import Tasks

    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        chat = Chat(1, "fake", editor)
        chat.ready("s1", 2, None)
        chat.changes = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))

        async def turn(text: str) -> list[int | None] | None:
            await chat.start_turn(text)
            said(chat, "agent", f"reply to {text}", f"m-{text}")
            chat.end_turn("end_turn")
            shown: list[int | None] | None = editor.reviews[1]["shown"]
            return shown

        try:
            for text in ("one", "two", "three"):
                assert await turn(text) is None  # one branch: its numbers are the chat's
            chat.shown.leave(2)  # "two" and "three" stay as a branch
            assert await turn("two again") == [1, None, None, 2]
            assert await turn("four") == [1, None, None, 2, 3]
            [other] = chat.branches.others
            chat.shown.pick(other.id)
            assert await turn("after three") == [1, 2, 3, None, None, 4]
        finally:
            chat.changes.close()
            tasks.cancel_scope.cancel()
