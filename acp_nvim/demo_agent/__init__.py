"""The offline demo agent: real ACP over stdio, no account, no network.

``python -m acp_nvim.demo_agent`` answers every prompt with streamed thoughts
and a markdown reply holding a code block. Words in the prompt pick what it
shows (``help`` lists them). Pacing: ``ACP_DEMO_DELAY`` seconds between
chunks (default 0.02; 0 for tests).
"""

from __future__ import annotations

__all__ = ["DemoAgent", "main"]

import itertools
import os
import sys
from datetime import datetime, timezone
from typing import Any

import anyio
import anyio.abc

from acp_nvim import __version__
from acp_nvim.demo_agent._mcp import EDITOR_WORDS, ask_editor
from acp_nvim.demo_agent._text import (
    COMMANDS,
    COMPACTED_NOTICE,
    FORK_AT_MESSAGE,
    HELP,
    MODELS,
    MODES,
    STEERING,
    compaction_updates,
    fork_point,
    prompt_words,
    reply,
    steered_reply,
    thought,
    typed,
    until_steered,
    usage_update,
)
from acp_nvim.demo_agent.v2 import DemoAgentV2
from acp_nvim.demo_agent.v2 import initialize_result as v2_initialize_result
from acp_nvim.protocol import Connection, RequestError
from acp_nvim.protocol.stdio import stdio_streams

Params = dict[str, Any]


# Comment leaders for the line `edit` adds, by file extension.
_COMMENT = {".lua": "--", ".sql": "--", ".hs": "--", ".vim": '"', ".c": "//", ".h": "//",
            ".cpp": "//", ".go": "//", ".rs": "//", ".js": "//", ".ts": "//"}  # fmt: skip


def _named(path: str, cwd: str) -> str:
    """``path`` as a reply names it: relative to the session's directory ``cwd``, as
    the agents people use name the files they changed."""
    return os.path.relpath(path, cwd) if os.path.commonpath([path, cwd]) == cwd else path


_CALL_IDS = itertools.count(1)
_PERMISSION_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


class DemoAgent:
    """The agent side of one connection."""

    def __init__(
        self,
        connection: Connection,
        delay: float,
        tasks: anyio.abc.TaskGroup | None = None,
        *,
        offer_v2: bool = True,
    ) -> None:
        self.connection = connection
        self.delay = delay
        # v2 turns run as tasks (the prompt response only accepts); without a task
        # group, or with ``offer_v2`` False, the demo answers every client with v1.
        self.tasks = tasks
        self.offer_v2 = offer_v2
        self.sessions: dict[str, anyio.CancelScope | None] = {}
        self.cwds: dict[str, str] = {}
        # What session/list and session/load show: (role, text, message id) per
        # session, and titles.
        self.history: dict[str, list[tuple[str, str, str | None]]] = {}
        # Messages steered into a running turn, by session: answered at its next paragraph.
        self.steering: dict[str, list[str]] = {}
        self.client_compaction = False
        self.titles: dict[str, str] = {}
        self.updated: dict[str, str] = {}  # ISO 8601 time of each session's last prompt
        self.used = self.billed = 0  # context tokens, tokens so far: usage_update
        self.mcp_servers: dict[str, list[Params]] = {}  # offered with each session
        self.client_fs: Params = {}
        self.client_terminal = False
        connection.on_request("initialize", dict, self.initialize)
        connection.on_request("session/new", dict, self.new_session)
        connection.on_request("session/prompt", dict, self.prompt)
        connection.on_notification("session/cancel", dict, self.cancel)
        connection.on_request("session/set_mode", dict, self.set_mode)
        connection.on_request("session/set_model", dict, self.set_model)
        connection.on_request("session/list", dict, self.list_sessions)
        connection.on_request("session/load", dict, self.load_session)
        connection.on_request("session/close", dict, self.close_session)
        connection.on_request("session/fork", dict, self.fork_session)
        connection.on_request("authenticate", dict, self.authenticate)
        connection.on_request("_session/steering", dict, self.steer)

    async def initialize(self, params: Params) -> Params:
        self.client_fs = (params.get("clientCapabilities") or {}).get("fs") or {}
        self.client_terminal = bool((params.get("clientCapabilities") or {}).get("terminal"))
        client_session = (params.get("clientCapabilities") or {}).get("session") or {}
        self.client_compaction = "compaction" in client_session
        if params.get("protocolVersion") == 2 and self.offer_v2 and self.tasks is not None:
            DemoAgentV2(self.connection, self.delay, self.tasks)
            return v2_initialize_result()
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {},
                "sessionCapabilities": {"list": {}, "close": {}, "fork": {}},
                "_meta": FORK_AT_MESSAGE,
            },
            "agentInfo": {"name": "demo", "title": "Demo agent", "version": __version__},
            "authMethods": [{"id": "demo-login", "name": "Demo login"}],
            "_meta": STEERING,
        }

    async def new_session(self, params: Params) -> Params:
        if not os.path.isabs(params.get("cwd", "")):
            raise RequestError.invalid_params("cwd must be an absolute path")
        session_id = f"demo-{len(self.history) + 1}"
        self._open(session_id, params["cwd"], params.get("mcpServers") or [])
        return {"sessionId": session_id, **self._settings()}

    def _open(self, session_id: str, cwd: str, mcp_servers: list[Params]) -> None:
        self.sessions[session_id] = None
        self.cwds[session_id] = cwd
        self.mcp_servers[session_id] = mcp_servers
        self.history.setdefault(session_id, [])
        if self.tasks is not None:  # after the answer, as real agents send it
            self.tasks.start_soon(self._send_commands, session_id)

    def _settings(self) -> Params:
        """Modes and models (v1 style: no config options), current first."""
        return {
            "modes": {
                "currentModeId": MODES[0][0],
                "availableModes": [{"id": i, "name": n} for i, n in MODES],
            },
            "models": {
                "currentModelId": MODELS[0][0],
                "availableModels": [{"modelId": i, "name": n} for i, n in MODELS],
            },
        }

    async def _send_commands(self, session_id: str) -> None:
        commands = [
            {"name": name, "description": description} | ({"input": {"hint": hint}} if hint else {})
            for name, description, hint in COMMANDS
        ]
        update = {"sessionUpdate": "available_commands_update", "availableCommands": commands}
        await self._send_update(session_id, update)

    async def set_mode(self, params: Params) -> Params:
        mode = params.get("modeId")
        if mode not in dict(MODES):
            raise RequestError.invalid_params(f"no mode {mode!r}")
        update = {"sessionUpdate": "current_mode_update", "currentModeId": mode}
        await self._send_update(params["sessionId"], update)
        return {}

    async def set_model(self, params: Params) -> Params:
        if params.get("modelId") not in dict(MODELS):
            raise RequestError.invalid_params(f"no model {params.get('modelId')!r}")
        return {}

    async def list_sessions(self, params: Params) -> Params:
        cwd = params.get("cwd")
        sessions = [
            {
                "sessionId": sid,
                "cwd": self.cwds[sid],
                "title": self.titles.get(sid),
                "updatedAt": self.updated.get(sid),
            }
            for sid in self.history
            if cwd is None or self.cwds.get(sid) == cwd
        ]
        return {"sessions": sessions}

    async def load_session(self, params: Params) -> Params:
        session_id = params.get("sessionId", "")
        if session_id not in self.history:
            raise RequestError.resource_not_found(f"session {session_id}")
        cwd = params.get("cwd") or self.cwds[session_id]
        self._open(session_id, cwd, params.get("mcpServers") or [])
        for role, text, message_id in self.history[session_id]:
            await self._say(session_id, f"{role}_message_chunk", text, message_id)
        return self._settings()

    async def fork_session(self, params: Params) -> Params:
        """A new session holding the history of ``sessionId`` (the unstable session/fork),
        up to and with the message its ``_meta`` names (a fork at a message)."""
        parent = params.get("sessionId", "")
        if parent not in self.history:
            raise RequestError.resource_not_found(f"session {parent}")
        if not os.path.isabs(params.get("cwd", "")):
            raise RequestError.invalid_params("cwd must be an absolute path")
        session_id = f"demo-{len(self.history) + 1}"
        self._open(session_id, params["cwd"], params.get("mcpServers") or [])
        history = self.history[parent]
        point = fork_point(params)
        ids = [message_id for _, _, message_id in history]
        if point is not None and point not in ids:
            raise RequestError.invalid_params(f"no message {point!r} in session {parent}")
        self.history[session_id] = history[: ids.index(point) + 1] if point else list(history)
        return {"sessionId": session_id, **self._settings()}

    async def steer(self, params: Params) -> Params:
        """``_session/steering``: the message joins the running turn (answered at the
        reply's next paragraph), else the client is to send it as a prompt."""
        session_id = params.get("sessionId", "")
        if self.sessions.get(session_id) is None:
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        self.steering.setdefault(session_id, []).append(typed(params.get("prompt") or []))
        return {"outcome": "injected"}

    async def close_session(self, params: Params) -> Params:
        self.sessions.pop(params.get("sessionId", ""), None)
        return {}

    async def authenticate(self, params: Params) -> Params:
        if params.get("methodId") != "demo-login":
            raise RequestError.invalid_params(f"no login method {params.get('methodId')!r}")
        return {}

    async def cancel(self, params: Params) -> None:
        scope = self.sessions.get(params.get("sessionId", ""))
        if scope is not None:
            scope.cancel()

    async def prompt(self, params: Params) -> Params:
        session_id = params["sessionId"]
        if session_id not in self.sessions:
            raise RequestError.resource_not_found(f"session {session_id}")
        text = typed(params.get("prompt", []))
        words = prompt_words(text)
        if "fail" in words:
            raise RequestError.internal("the demo agent was asked to fail")
        self.history[session_id].append(("user", text, None))
        self.updated[session_id] = datetime.now(timezone.utc).isoformat()
        with anyio.CancelScope() as scope:
            self.sessions[session_id] = scope
            await self._reply(session_id, text, words)
            while steering := self.steering.get(session_id):  # one joining meanwhile too
                steered = steering.pop(0)
                self.history[session_id].append(("user", steered, None))
                await self._stream(session_id, "agent_message_chunk", steered_reply(steered))
        self.sessions[session_id] = None
        self.steering.pop(session_id, None)
        await self._account(session_id, text)
        return {"stopReason": "cancelled" if scope.cancel_called else "end_turn"}

    async def _account(self, session_id: str, text: str) -> None:
        """After a turn: its title (from the first prompt) and the context meter."""
        if session_id not in self.titles:
            self.titles[session_id] = " ".join(text.split()[:6])[:60] or "Untitled"
            update = {"sessionUpdate": "session_info_update", "title": self.titles[session_id]}
            await self._send_update(session_id, update)
        self.used += 1000 + 4 * len(text)
        self.billed += 1000 + 4 * len(text)
        await self._send_update(session_id, usage_update(self.used, self.billed))

    async def _reply(self, session_id: str, text: str, words: set[str]) -> None:
        await self._stream(session_id, "agent_thought_chunk", thought(text))
        if "crash" in words:
            await self._stream(session_id, "agent_message_chunk", "Crashing now, as asked…")
            os._exit(3)
        if "help" in words:
            await self._stream(session_id, "agent_message_chunk", HELP)
            return
        if "compact" in words:
            await self._compact(session_id)
        if "permission" in words:
            await self._pretend_command(session_id)
            return
        if "unknown" in words:  # an update of a kind no client knows: never an error
            await self._send_update(session_id, {"sessionUpdate": "_demo_sparkle"})
        if words & set(EDITOR_WORDS):
            await self._ask_editor(session_id, words)
            return
        if "run" in words:
            await self._run_command(session_id)
            return
        if "edit" in words or "disk" in words:
            path = self._target(session_id, text)
            if "edit" in words:
                await self._edit_through_editor(session_id, path)
            if "disk" in words:
                await self._edit_on_disk(session_id, path)
            return
        await self._stream(session_id, "agent_message_chunk", reply(text, words))

    async def _ask_permission(self, session_id: str, tool_call: Params) -> str | None:
        """Ask before a tool call runs: the kind of the chosen option, None if cancelled.

        ``tool_call`` is the request's ``toolCall`` (at least ``toolCallId``); the
        option ids are Claude's, so the client has to go by kind.
        """
        params = {"sessionId": session_id, "toolCall": tool_call, "options": _PERMISSION_OPTIONS}
        answer = await self.connection.request("session/request_permission", params, dict)
        outcome = answer.get("outcome") or {}
        if outcome.get("outcome") != "selected":
            return None
        kinds = {option["optionId"]: option["kind"] for option in _PERMISSION_OPTIONS}
        return kinds.get(outcome.get("optionId", ""))  # an id we never offered: no approval

    async def _pretend_command(self, session_id: str) -> None:
        """A command that needs permission; like gemini, the call exists first in the request."""
        call = {
            "toolCallId": f"demo-run-{next(_CALL_IDS)}",
            "title": "Run `make clean`",
            "kind": "execute",
            "rawInput": {"command": "make clean"},
        }
        kind = await self._ask_permission(session_id, call)
        if kind is None:
            return
        allowed = kind.startswith("allow")
        result = "removed build/ (pretend)" if allowed else "Rejected by the user."
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call["toolCallId"],
            "status": "completed" if allowed else "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": result}}],
        }
        await self._send_update(session_id, update)
        reply = "Done: `make clean` ran." if allowed else "Understood, I left it alone."
        await self._stream(session_id, "agent_message_chunk", reply)

    def _target(self, session_id: str, text: str) -> str:
        """The first word of the prompt naming an existing file, else demo.txt."""
        cwd = self.cwds[session_id]
        for word in text.split():
            path = os.path.join(cwd, os.path.expanduser(word.strip("`'\",;")))
            if os.path.isfile(path):
                return os.path.normpath(path)
        return os.path.join(cwd, "demo.txt")

    async def _edit_through_editor(self, session_id: str, path: str) -> None:
        """Read with fs/read_text_file, ask, add a comment line, fs/write_text_file."""
        if not (self.client_fs.get("readTextFile") and self.client_fs.get("writeTextFile")):
            await self._stream(session_id, "agent_message_chunk", "This client offers no fs/*.")
            return
        try:
            read = await self.connection.request(
                "fs/read_text_file", {"sessionId": session_id, "path": path}, dict
            )
            old: str | None = read["content"]
        except RequestError as err:
            if err.code != RequestError.RESOURCE_NOT_FOUND:
                await self._stream(session_id, "agent_message_chunk", f"Cannot read it: {err}")
                return
            old = None  # a new file
        leader = _COMMENT.get(os.path.splitext(path)[1], "#")
        new = f"{leader} Edited by the acp.nvim demo agent (review: :AcpReview)\n" + (old or "")
        call_id = f"demo-edit-{next(_CALL_IDS)}"
        call = {
            "toolCallId": call_id,
            "title": f"Edit {os.path.basename(path)}",
            "kind": "edit",
            "locations": [{"path": path, "line": 1}],
            "content": [{"type": "diff", "path": path, "oldText": old, "newText": new}],
        }
        await self._send_update(
            session_id, {"sessionUpdate": "tool_call", **call, "status": "pending"}
        )
        kind = await self._ask_permission(session_id, call)
        allowed = kind is not None and kind.startswith("allow")
        if allowed:
            params = {"sessionId": session_id, "path": path, "content": new}
            await self.connection.request("fs/write_text_file", params)
        status = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
        await self._send_update(
            session_id, {**status, "status": "completed" if allowed else "failed"}
        )
        name = _named(path, self.cwds[session_id])
        reply = f"I added a comment line at the top of `{name}`." if allowed else "I left it alone."
        await self._stream(session_id, "agent_message_chunk", reply)

    async def _edit_on_disk(self, session_id: str, path: str) -> None:
        """Write the file directly; the client learns of it only from the tool call."""
        call_id = f"demo-disk-{next(_CALL_IDS)}"
        locations = [{"path": path}]
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call", "toolCallId": call_id, "status": "pending",
             "title": f"Write {os.path.basename(path)}", "kind": "edit", "locations": locations},
        )  # fmt: skip
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        new = (old or "") + "Written to disk directly by the acp.nvim demo agent.\n"
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
        diff = {"type": "diff", "path": path, "oldText": old, "newText": new}
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
             "content": [diff], "locations": locations},
        )  # fmt: skip
        name = _named(path, self.cwds[session_id])
        await self._stream(session_id, "agent_message_chunk", f"I appended a line to `{name}`.")

    async def _run_command(self, session_id: str) -> None:
        """Run a short shell line in a client terminal shown in a tool call, the way
        Claude's older adapter does (whole line in ``command``, no args, no cwd)."""
        if not self.client_terminal:
            await self._stream(session_id, "agent_message_chunk", "This client has no terminals.")
            return
        command = (
            "echo hi; printf 'counting:'; for i in 1 2 3; do printf ' %s' $i; sleep 0.3; done;"
            " printf '\\n\\033[32mdone\\033[0m\\n'"
        )
        sid = {"sessionId": session_id}
        params = {**sid, "command": command, "args": [], "outputByteLimit": 32000}
        created = await self.connection.request("terminal/create", params, dict)
        term = {**sid, "terminalId": created["terminalId"]}
        call_id = f"run{next(_CALL_IDS)}"
        content = [{"type": "terminal", "terminalId": created["terminalId"]}]
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Run a command",
             "kind": "execute", "status": "in_progress", "content": content,
             "rawInput": {"command": command}},
        )  # fmt: skip
        try:
            exit_status = await self.connection.request("terminal/wait_for_exit", term, dict)
            output = await self.connection.request("terminal/output", term, dict)
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled turn releases it too
                await self.connection.request("terminal/release", term, dict)
        code = exit_status.get("exitCode")
        await self._send_update(
            session_id,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
             "status": "completed" if code == 0 else "failed"},
        )  # fmt: skip
        reply = f"The command exited with code {code} and printed:\n\n```\n{output['output']}```"
        await self._stream(session_id, "agent_message_chunk", reply)

    async def _ask_editor(self, session_id: str, words: set[str]) -> None:
        """Call the editor's MCP tools the words name, each shown as a tool call."""
        call_id = f"demo-mcp-{next(_CALL_IDS)}"
        update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "kind": "read",
                  "title": "Ask the editor (MCP)", "status": "in_progress"}  # fmt: skip
        await self._send_update(session_id, update)
        try:
            answers = await ask_editor(self.mcp_servers.get(session_id, []), words)
        except (LookupError, OSError, RequestError) as err:
            answers, failed = [], str(err)
        else:
            failed = ""
        status = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
        await self._send_update(
            session_id, {**status, "status": "failed" if failed else "completed"}
        )
        reply = failed or "\n\n".join(text for _, text in answers)
        await self._stream(session_id, "agent_message_chunk", reply)

    async def _compact(self, session_id: str) -> None:
        """Compact the context: a compaction (where the client advertised it) and a
        notice; the context meter drops."""
        if self.client_compaction:
            for update in compaction_updates("compact-1"):
                await self._send_update(session_id, update)
                await anyio.sleep(self.delay)
        self.used //= 4
        await self._send_update(session_id, COMPACTED_NOTICE)

    async def _send_update(self, session_id: str, update: Params) -> None:
        await self.connection.notify("session/update", {"sessionId": session_id, "update": update})

    async def _say(
        self, session_id: str, kind: str, text: str, message_id: str | None = None
    ) -> None:
        """One whole message chunk (a replayed one)."""
        update: Params = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if message_id is not None:
            update["messageId"] = message_id
        await self._send_update(session_id, update)

    async def _stream(self, session_id: str, kind: str, text: str) -> None:
        update: Params = {"sessionUpdate": kind}
        history, sent = self.history[session_id], ""
        said = len(history)
        if kind == "agent_message_chunk":  # ids of its own: where a fork at a message ends
            update["messageId"] = f"{session_id}-m{said}"
            history.append(("agent", text, update["messageId"]))
        for piece in until_steered(text, lambda: bool(self.steering.get(session_id))):
            chunk = {**update, "content": {"type": "text", "text": piece}}
            params = {"sessionId": session_id, "update": chunk}
            await self.connection.notify("session/update", params)
            sent += piece
            await anyio.sleep(self.delay)  # a checkpoint even without delay: a cancel lands
        if "messageId" in update and sent != text:  # a steered message cut it short
            history[said] = ("agent", sent, update["messageId"])


async def _serve(offer_v2: bool) -> None:
    receive, send = stdio_streams()
    connection = Connection(receive, send, name="demo")
    delay = float(os.environ.get("ACP_DEMO_DELAY", "0.02"))
    async with anyio.create_task_group() as tasks:
        DemoAgent(connection, delay, tasks, offer_v2=offer_v2)
        await connection.serve()
        tasks.cancel_scope.cancel()


def main() -> None:
    """``python -m acp_nvim.demo_agent [--v1]``; ``--v1`` (or ``ACP_DEMO_PROTOCOL=1``)
    answers a v2 ``initialize`` with version 1, to try the client's fallback."""
    force_v1 = "--v1" in sys.argv[1:] or os.environ.get("ACP_DEMO_PROTOCOL") == "1"
    anyio.run(_serve, not force_v1)
