"""The client core against real agent processes, with the in-memory Editor."""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

from acp_nvim.client import malloc
from acp_nvim.client.app import App
from acp_nvim.client.app._start_task import start_task
from acp_nvim.client.history import StoreError
from acp_nvim.client.session.chat import Chat
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

pytestmark = pytest.mark.anyio
FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "agent.py")


async def test_demo_turn_and_close_kills_the_process_group(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        assert app.chats[1].state == "ready"
        await app.send(1, "hello")
        assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"})
        reply = next(lines for lines in editor.transcript(1).values() if lines[0] == "## Agent")
        assert reply[1] == "You said: *hello*"
        pid = app.agents["demo"].process.pid
        assert pid is not None
        await app.close(1)
        assert app.agents == {}
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
        tasks.cancel_scope.cancel()


async def test_cancel_while_streaming(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"endless": {"cmd": [sys.executable, FAKE, "endless"]}}})
        await app.open(1, "endless", str(tmp_path))
        tasks.start_soon(app.send, 1, "go")
        await wait_for(
            lambda: any("tick2" in "".join(lines) for lines in editor.transcript(1).values())
        )
        await app.cancel(1)
        await wait_for(lambda: editor.events[-1][0] == "AcpTurnEnd")
        assert editor.events[-1][1]["stop_reason"] == "cancelled"
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_agent_exit_between_turns_is_reported(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        pid = app.agents["demo"].process.pid
        assert pid is not None
        os.kill(pid, 9)
        await wait_for(lambda: editor.events[-1][0] == "AcpError")
        assert "agent 'demo' exited (exit code -9)" in editor.events[-1][1]["message"]
        assert app.chats[1].state == "error"
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_two_chats_opened_at_once_share_one_agent_process(tmp_path: Path) -> None:
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        async with anyio.create_task_group() as opening:
            opening.start_soon(app.open, 1, None, str(tmp_path))
            opening.start_soon(app.open, 2, None, str(tmp_path))
        assert [app.chats[n].state for n in (1, 2)] == ["ready", "ready"]
        assert list(app.agents) == ["demo"]
        assert app.pool.agent_of[1] is app.pool.agent_of[2]
        # A later chat on a dead agent starts it again.
        first = app.agents["demo"]
        await first.aclose()
        await wait_for(lambda: "demo" not in app.agents)
        await app.open(3, None, str(tmp_path))
        assert app.chats[3].state == "ready" and app.agents["demo"] is not first
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def holding_a_turn(editor: RecordingEditor, tasks: TaskGroup, cwd: Path) -> App:
    """An app whose chat 1 runs a turn the ``hold`` fake agent keeps open."""
    app = App(editor, tasks)
    app.setup({"agents": {"hold": {"cmd": [sys.executable, FAKE, "hold"]}}})
    await app.open(1, "hold", str(cwd))
    tasks.start_soon(app.send, 1, "hold")
    await wait_for(lambda: app.chats[1].state == "running")
    return app


async def test_a_queued_prompt_is_dequeued_by_what_the_user_picked(tmp_path: Path) -> None:
    """The picker showed the queue as it was: a prompt sent meanwhile shifts the
    indexes, and the one picked (by its text) goes, never its neighbour."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = await holding_a_turn(editor, tasks, tmp_path)
        for text in ("a", "b", "c"):
            await app.send(1, text)
        app.dequeue(1, 0, "a")  # as if "a" had gone: "c" is now at index 1, not 2
        app.dequeue(1, 2, "c", edit=True)
        assert [p.text for p in app.queue.prompts[1]] == ["b"]
        given = editor.ops[1][-1]
        assert (given["op"], given["text"]) == ("input", "c")
        assert given["queued"] > app.queue.prompts[1][0].rank  # "c" came after "b"
        app.dequeue(1, 0, "c")
        assert editor.notices[-1] == ("warn", "that prompt is no longer queued")
        assert [p.text for p in app.queue.prompts[1]] == ["b"]
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_prompt_sent_at_once_draws_no_queue(tmp_path: Path) -> None:
    """A prompt to a ready chat goes at once: the queue it never joined is not drawn
    (a batch less for Neovim at every turn start) and AcpQueued does not fire. A
    prompt that waits is drawn, with its event."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = await holding_a_turn(editor, tasks, tmp_path)
        assert [op for op in editor.ops[1] if "queue" in op] == []
        assert [e for e in editor.events if e[0] == "AcpQueued"] == []
        await app.send(1, "next")
        assert [op["queue"] for op in editor.ops[1] if "queue" in op] == [["next"]]
        assert [e[1]["count"] for e in editor.events if e[0] == "AcpQueued"] == [1]
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_closed_chat_is_freed_with_the_history_on(tmp_path: Path) -> None:
    """The history's writer keeps what it wrote for a chat past its close; it held the
    whole chat (its model, its transcript's text) for as long as the Neovim ran. And a
    closed chat's cycles wait for no later collection (with the host's start-up objects
    frozen, 18 MB of a closed 100k-chunk chat were still held after a second chat)."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"history": {"path": str(tmp_path / "h.sqlite3")}})
        project = tmp_path / "project"  # not the history's: its writes are no agent's change
        project.mkdir()
        chats = []
        for chat_id in (1, 2):
            await app.open(chat_id, None, str(project))
            await app.send(chat_id, "hello")
            chats.append(weakref.ref(app.chats[chat_id]))
            await app.close(chat_id)
        written = threading.Event()  # queued after the chats' last writes
        app.ctx.history._writer.call(lambda store: written.set())  # type: ignore[union-attr]
        assert await anyio.to_thread.run_sync(written.wait, 10)
        # No collection here: closing collects the cycles a chat is held in.
        assert [chat() for chat in chats] == [None, None]
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_closed_chat_whose_hunks_wait_is_freed_with_its_review_kept(
    tmp_path: Path,
) -> None:
    """Decision 0081 keeps a closed chat's review while its hunks wait in the user's
    files; the review held the whole chat (its file access, its error line) until the
    last hunk was decided, so each chat closed with hunks waiting stayed in memory."""
    editor = RecordingEditor()
    agent = {"cmd": [sys.executable, FAKE, "files"]}
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"files": agent}})
        path = tmp_path / "a.txt"
        path.write_text("1\n")
        await app.open(1, "files", str(tmp_path))
        await app.send(1, json.dumps([{"shell": {"path": str(path), "content": "one\n"}}]))
        chat = weakref.ref(app.chats[1])
        await app.close(1)
        assert ("info", "1 hunk waits in your files from closed chat #1 (:AcpReview)") in editor.notices
        assert chat() is None  # no collection here either: closing collects
        await app.review(1, "reject")  # the kept review still takes the user's decision
        assert path.read_text() == "1\n" and 1 not in app.reviews.by_chat
        await app.shutdown()
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("version", [1, 2])
async def test_a_chat_closed_while_its_cancelled_turn_runs_on_is_freed(
    tmp_path: Path, version: int
) -> None:
    """A rewind left a cancelled turn to the agent (it did not end it within
    timeouts.cancel), and the chat, gone on in another session, was closed meanwhile;
    the agent, kept by another chat, then ended that turn: the chat was held as one to
    tell of that end when it shows that session again, which a closed chat never
    does, for as long as the Neovim ran."""
    editor = RecordingEditor()
    agent = {"cmd": [sys.executable, FAKE, "rewind+deaf+late"],
             "env": {"FAKE_CALLS": str(tmp_path / "calls.jsonl")}}  # fmt: skip
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"fake": agent}, "protocol_version": version,
                   "timeouts": {"cancel": 0.2}})  # fmt: skip
        project = tmp_path / "project"  # not where the agent writes its calls
        project.mkdir()
        for chat_id in (1, 2):
            await app.open(chat_id, "fake", str(project))
        await app.send(1, "alpha")
        tasks.start_soon(app.send, 1, "hold")
        await wait_for(lambda: "holding" in str(editor.transcript(1)))
        await app.rewind(1, 2)  # cancels the held turn, left to the agent; on in s3
        assert app.chats[1].session.session_id == "s3"
        chat = weakref.ref(app.chats[1])
        await app.close(1)
        await app.send(2, "after")  # the agent first ends the held turn of chat 1's session

        def freed() -> bool:
            gc.collect()
            return chat() is None

        try:
            await wait_for(freed)
        finally:
            await app.shutdown()
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("version", [1, 2])
async def test_a_message_whose_steering_fails_is_shown_queued_before_the_chat_says_it_is(
    tmp_path: Path, version: int
) -> None:
    """The agent failed the steering request of a message sent now: the chat said the
    message waits in the queue before it showed it queued, and a batch sent to Neovim
    in between (under load) showed a queue without it."""
    editor = RecordingEditor()
    agent = {"cmd": [sys.executable, FAKE, "rewind+steer+release+broken"],
             "env": {"FAKE_CALLS": str(tmp_path / "calls.jsonl")}}  # fmt: skip
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"fake": agent}, "protocol_version": version})
        project = tmp_path / "project"
        project.mkdir()
        os.mkfifo(project / "release")
        await app.open(1, "fake", str(project))
        tasks.start_soon(app.send, 1, "hold")
        await wait_for(lambda: "holding" in str(editor.transcript(1)))
        try:
            await app.send(1, "turn left", now=True)
            ops = editor.ops[1]
            said = next(i for i, op in enumerate(ops) if "waits in the queue" in str(op))
            shown = [op["queued"] for op in ops[:said] if op["op"] == "status" and "queued" in op]
            assert shown[-1:] == [1]  # the queue as shown when the chat says it waits there
            with open(project / "release", "wb"):
                pass
            await wait_for(lambda: app.chats[1].state == "ready" and not app.queue.prompts[1])
        finally:
            await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_message_whose_steering_fails_once_its_chat_closed_waits_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chat closed while the agent was asked to take a message into its turn, and
    the request then failed: nothing is queued for the chat that is gone."""
    from acp_nvim.client.app import _conversation
    from acp_nvim.client.errors import AgentFailed

    editor = RecordingEditor()
    agent = {"cmd": [sys.executable, FAKE, "rewind+steer+release+broken"],
             "env": {"FAKE_CALLS": str(tmp_path / "calls.jsonl")}}  # fmt: skip
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"fake": agent}})
        project = tmp_path / "project"
        project.mkdir()
        os.mkfifo(project / "release")
        await app.open(1, "fake", str(project))

        async def closed_then_failed(*args: object) -> None:
            await app.close(1)
            raise AgentFailed("steering broke")

        monkeypatch.setattr(_conversation, "_steered_before_turn_end", closed_then_failed)
        tasks.start_soon(app.send, 1, "hold")
        await wait_for(lambda: "holding" in str(editor.transcript(1)))
        try:
            await app.send(1, "turn left", now=True)
            assert 1 not in app.chats and 1 not in app.queue.prompts
        finally:
            await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_stored_chat_that_cannot_be_read_is_refused_in_one_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history file unreadable since the list was read: opening a chat of it said
    the store's error, then "history: no chat 1" too, which was not so."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"history": {"path": str(tmp_path / "h.sqlite3")}})
        await app.open(1, None, str(tmp_path))
        await app.send(1, "hello")
        await app.close(1)

        def unreadable(history_id: int) -> None:
            raise StoreError("database disk image is malformed")

        monkeypatch.setattr(app.ctx.history.reader, "read", unreadable)
        await app.open(2, None, str(tmp_path), history=1)
        assert [m for _, m in editor.notices if "history" in m] == []
        why = "history: database disk image is malformed"
        assert editor.ops[2][-1] == {"op": "refused", "error": why}
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_freed_memory_goes_back_before_the_turn_is_said_ended_and_at_a_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """glibc keeps freed memory in the arena of the thread that used it: 15-20 MB after a
    100k-chunk turn (decision 0059). A turn's end and a chat's close give it back;
    whoever reads the RSS at ``AcpTurnEnd`` sees it given back."""
    editor = RecordingEditor()
    trims: list[list[str]] = []  # the events so far at each trim
    monkeypatch.setattr(malloc, "_trim", lambda pad: trims.append([e for e, _ in editor.events]))
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        await app.send(1, "hello")
        [at_turn_end] = trims
        assert "AcpTurnStart" in at_turn_end and "AcpTurnEnd" not in at_turn_end
        await app.close(1)
        assert len(trims) == 2 and "AcpTurnEnd" in trims[1]
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("where", ["settings", "configure", "chat"])
async def test_a_start_that_fails_unexpectedly_ends_said_and_leaves_no_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, where: str
) -> None:
    """A defect of ours while a chat starts (once connected, before the agent's
    connection is made, or before the chat is) ends the start: the chat says so, and
    no agent is left; a chat opened next starts."""
    editor = RecordingEditor()

    def broken(*args: object, **kwargs: object) -> None:
        monkeypatch.undo()  # once
        raise RuntimeError("a defect")

    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"protocol_version": version})
        if where == "settings":
            monkeypatch.setattr(app.lifecycle.settings, "apply", broken)
        elif where == "configure":
            monkeypatch.setattr(app.pool, "configure", broken)
        else:
            monkeypatch.setattr(app.lifecycle, "_new_chat", broken)
        await app.open(1, None, str(tmp_path))
        assert app.chats[1].state == "error"
        [error] = [data for name, data in editor.events if name == "AcpError"]
        assert "internal error while starting the chat: RuntimeError('a defect')" in error["message"]
        assert app.agents == {} and app.pool.agent_of == {}
        [process] = app.pool._launched.values()
        assert process.pid is not None
        await wait_for(lambda: not _alive(process.pid))
        await app.open(2, None, str(tmp_path))
        assert app.chats[2].state == "ready"
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_chat_that_fails_unexpectedly_to_go_on_with_a_restarted_agent_ends_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat 1's :AcpRestart restarts the agent chat 2 shares: a defect of ours while
    chat 2 goes on with it ends chat 2's start as it does chat 1's, said in chat 2 and
    not holding the agent (which ends with chat 1)."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        await app.open(2, None, str(tmp_path))
        [old] = app.agents.values()
        attach = app.reviews.attach

        def broken(chat: Chat, *args: Any) -> None:
            if chat.id == 2:
                raise RuntimeError("a defect")
            attach(chat, *args)

        monkeypatch.setattr(app.reviews, "attach", broken)
        await app.restart(1)
        await wait_for(lambda: app.chats[2].state != "starting")
        assert (app.chats[1].state, app.chats[2].state) == ("ready", "error")
        [error] = [data for name, data in editor.events if name == "AcpError"]
        assert error["chat"] == 2
        assert "internal error while starting the chat: RuntimeError('a defect')" in error["message"]
        [new] = app.agents.values()
        assert new is not old and not old.alive and [c.id for c in new.chats.values()] == [1]
        assert new.process.pid is not None
        await app.close(1)
        assert app.agents == {} and app.pool.agent_of == {}
        await wait_for(lambda: not _alive(new.process.pid))
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_a_chat_that_fails_unexpectedly_to_start_again_for_a_prompt_ends_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt sent to a failed chat starts its agent again: a defect of ours on the
    way ends that start as :AcpRestart's does, said in the chat, the prompt back in
    its input and no agent left, not a chat 'starting' for good."""
    editor = RecordingEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await app.open(1, None, str(tmp_path))
        app.chats[1].fail("the agent went")

        def broken(*args: object) -> None:
            raise RuntimeError("a defect")

        monkeypatch.setattr(app.reviews, "attach", broken)
        await app.send(1, "hello")
        assert app.chats[1].state == "error"
        [error] = [data for name, data in editor.events if name == "AcpError"][1:]
        assert "internal error while starting the chat: RuntimeError('a defect')" in error["message"]
        assert [op["text"] for op in editor.ops[1] if op["op"] == "input"] == ["hello"]
        assert app.agents == {} and app.pool.agent_of == {}
        await app.shutdown()
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize("asked", [("x",), ("x", "y")])
async def test_a_start_that_fails_unexpectedly_for_no_chat_and_no_opening_makes_none(
    tmp_path: Path, asked: tuple[str, ...]
) -> None:
    """A start other than an opening (called as it takes, or not) that breaks for a
    chat not there (closed meanwhile) ends with no chat made for it and nothing said."""
    editor = RecordingEditor()

    async def broken(chat_id: int, method: str) -> None:
        raise RuntimeError("a defect")

    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        await start_task(app.lifecycle.end_start, broken)(5, *asked)
        assert app.chats == {} and editor.events == [] and editor.notices == []
        await app.shutdown()
        tasks.cancel_scope.cancel()


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True
