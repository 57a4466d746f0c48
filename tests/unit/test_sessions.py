"""The one Sessions interface: both protocol versions start a session and end a turn
the same way."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from acp_nvim.client.app import App
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

pytestmark = pytest.mark.anyio

# An agent that announces a tool call on a file, writes the file to disk itself (as
# Claude's and Codex's agents do) and ends the turn at once, in either version.
WRITER = textwrap.dedent(
    """
    import json, sys
    VERSION = int(sys.argv[1])
    def send(message):
        sys.stdout.write(json.dumps(message) + "\\n"); sys.stdout.flush()
    def update(body):
        send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": "s1", "update": body}})
    for line in sys.stdin:
        msg = json.loads(line)
        method, params = msg.get("method"), msg.get("params") or {}
        if method == "initialize":
            info = {"name": "writer", "version": "0"}
            result = ({"protocolVersion": 2, "info": info, "capabilities": {}} if VERSION == 2
                      else {"protocolVersion": 1, "agentInfo": info})
        elif method == "session/new":
            path = params["cwd"] + "/made.txt"
            # The answer and the session's commands in one write, as fast agents do.
            commands = {"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": "s1", "update": {"sessionUpdate": "available_commands_update",
                "availableCommands": [{"name": "go", "description": "Go"}]}}}
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "s1"}}
            sys.stdout.write(json.dumps(answer) + "\\n" + json.dumps(commands) + "\\n")
            sys.stdout.flush()
            continue
        elif method == "session/prompt":
            kind = "tool_call_update" if VERSION == 2 else "tool_call"
            update({"sessionUpdate": kind, "toolCallId": "w", "title": "Write made.txt",
                    "kind": "edit", "status": "pending", "locations": [{"path": path}]})
            with open(path, "w") as f:
                f.write("made by the agent\\n")
            if VERSION == 2:
                send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
                update({"sessionUpdate": "state_update", "state": "idle",
                        "stopReason": "end_turn"})
                continue
            result = {"stopReason": "end_turn"}
        elif "id" in msg and method is not None:
            result = {}
        else:
            continue
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    """
)


class TurnEndEditor(RecordingEditor):
    """Records the review as it stood when each ``AcpTurnEnd`` fired."""

    def __init__(self) -> None:
        super().__init__()
        self.review_at_turn_end: list[list[str]] = []

    def emit(self, event: str, data: dict[str, Any]) -> None:
        if event == "AcpTurnEnd":
            files = self.reviews.get(data["chat"], {}).get("files", [])
            self.review_at_turn_end.append([Path(f["path"]).name for f in files])
        super().emit(event, data)


@pytest.mark.parametrize("version", [1, 2])
async def test_changes_are_complete_when_the_turn_ends(tmp_path: Path, version: int) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    project = tmp_path / "project"
    project.mkdir()
    editor = TurnEndEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        assert app.setup(
            {
                "protocol_version": version,
                "agents": {"writer": {"cmd": [sys.executable, str(script), str(version)]}},
                "default_agent": "writer",
            }
        )
        await app.open(1, None, str(project))
        assert app.chats[1].protocol_version == version
        # Sent before the chat knew its session id, kept for it.
        assert [c["name"] for c in app.chats[1].session.commands] == ["go"]
        await app.send(1, "write it")
        assert editor.events[-1] == ("AcpTurnEnd", {"chat": 1, "stop_reason": "end_turn"})
        assert editor.review_at_turn_end == [["made.txt"]]
        await app.shutdown()
        tasks.cancel_scope.cancel()


class HoldEditor(RecordingEditor):
    """Records how many holds were unreleased at each event and render op."""

    def __init__(self) -> None:
        super().__init__()
        self.held_at: list[tuple[str, int]] = []

    def emit(self, event: str, data: dict[str, Any]) -> None:
        self.held_at.append((event, self.held))
        super().emit(event, data)

    def render(self, chat: int, ops: list[Any]) -> None:
        self.held_at += [(op.get("kind") or op["op"], self.held) for op in ops]
        super().render(chat, ops)


def stops_reading(tmp_path: Path, then: str) -> list[str]:
    """The command of a v1 WRITER that runs ``then`` instead of reading on, once it
    answered ``session/new``."""
    answered = "sys.stdout.flush()\n        continue"
    assert answered in WRITER
    script = tmp_path / "stops.py"
    script.write_text(
        WRITER.replace("import json, sys", "import json, os, sys, time").replace(
            answered, f"sys.stdout.flush()\n        {then}"
        )
    )
    return [sys.executable, str(script), "1"]


async def writer_chat(
    tmp_path: Path, version: int, editor: RecordingEditor, tasks: anyio.abc.TaskGroup
) -> App:
    """An app with chat 1 open on a WRITER agent speaking ``version``."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    app = App(editor, tasks)
    app.setup(
        {
            "protocol_version": version,
            "agents": {"writer": {"cmd": [sys.executable, str(script), str(version)]}},
            "default_agent": "writer",
        }
    )
    await app.open(1, None, str(tmp_path))
    return app


@pytest.mark.parametrize("version", [1, 2])
async def test_a_turn_starts_drawing_waits_for_its_prompt_to_be_written(
    tmp_path: Path, version: int
) -> None:
    """What the turn start draws (its event, the user's message, the status) is held
    until the prompt is written to the agent; what the agent sends is not."""
    editor = HoldEditor()
    async with anyio.create_task_group() as tasks:
        app = await writer_chat(tmp_path, version, editor, tasks)
        editor.held_at.clear()
        await app.send(1, "write it")
        await app.shutdown()
        tasks.cancel_scope.cancel()
    start = editor.held_at.index(("AcpTurnStart", 1))
    tool = next(i for i, (what, _) in enumerate(editor.held_at) if what == "tool")
    assert start < tool
    assert ("user", 1) in editor.held_at[start:tool]  # the prompt's block, held
    assert editor.held_at[tool:] == [(what, 0) for what, _ in editor.held_at[tool:]]
    assert editor.held == 0


class BusyEditor(RecordingEditor):
    """Has no room to draw more while ``busy``, until ``caught_up`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.busy = False
        self.waiting = anyio.Event()
        self.caught_up = anyio.Event()
        self.turn_ended = anyio.Event()

    def emit(self, event: str, data: dict[str, Any]) -> None:
        if event == "AcpTurnEnd":
            self.turn_ended.set()
        super().emit(event, data)

    async def room(self) -> None:
        if self.busy:
            self.waiting.set()
            await self.caught_up.wait()


@pytest.mark.parametrize("version", [1, 2])
async def test_the_stream_is_read_no_faster_than_it_is_drawn(tmp_path: Path, version: int) -> None:
    """While Neovim has more to draw than one batch, nothing after the updates laid
    out is read: here, the turn's end the agent wrote after its tool call."""
    editor = BusyEditor()
    async with anyio.create_task_group() as tasks:
        app = await writer_chat(tmp_path, version, editor, tasks)
        editor.busy = True
        tasks.start_soon(app.send, 1, "write it")
        with anyio.fail_after(10):
            await editor.waiting.wait()
        assert any(op.get("kind") == "tool" for op in editor.ops[1])  # laid out
        assert not editor.turn_ended.is_set()
        editor.caught_up.set()
        with anyio.fail_after(10):
            await editor.turn_ended.wait()
        await app.shutdown()
        tasks.cancel_scope.cancel()


async def test_the_hold_ends_when_the_prompt_cannot_be_written(tmp_path: Path) -> None:
    """The agent stops reading after its session is made: the prompt's write fails,
    the chat fails, and what the turn start drew still goes to Neovim."""
    cmd = stops_reading(tmp_path, "os.close(0); time.sleep(0.3); sys.exit(3)")
    editor = HoldEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"deaf": {"cmd": cmd}}})
        await app.open(1, "deaf", str(tmp_path))
        await app.send(1, "go")
        assert app.chats[1].state == "error"
        await app.shutdown()
        tasks.cancel_scope.cancel()
    assert ("AcpTurnStart", 1) in editor.held_at
    assert editor.held == 0


async def test_the_hold_ends_soon_while_the_prompt_cannot_be_written(tmp_path: Path) -> None:
    """An agent that stops reading: a prompt bigger than the pipe cannot be written,
    and what the turn start drew goes to Neovim all the same, within milliseconds."""
    cmd = stops_reading(tmp_path, "time.sleep(30)")
    editor = HoldEditor()
    async with anyio.create_task_group() as tasks:
        app = App(editor, tasks)
        app.setup({"agents": {"busy": {"cmd": cmd}}})
        await app.open(1, "busy", str(tmp_path))
        tasks.start_soon(app.send, 1, "x" * 1_000_000)
        await wait_for(lambda: ("AcpTurnStart", 1) in editor.held_at and not editor.held, 5)
        assert app.chats[1].state == "running"  # the prompt is still on its way
        await app.shutdown()
        tasks.cancel_scope.cancel()
