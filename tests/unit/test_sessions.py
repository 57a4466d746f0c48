"""The one Sessions interface: both protocol versions start a session and end a turn
the same way."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.client.app import App
from tests.fakes.editor import RecordingEditor

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
