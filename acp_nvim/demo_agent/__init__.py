"""The offline demo agent: real ACP over stdio, no account, no network.

``python -m acp_nvim.demo_agent`` answers every prompt with streamed thoughts
and a markdown reply holding a code block. Words in the prompt pick what it
shows (``help`` lists them). Pacing: ``ACP_DEMO_DELAY`` seconds between
chunks (default 0.02; 0 for tests).
"""

from __future__ import annotations

__all__ = ["DemoAgent", "main"]

import os
import sys
from datetime import datetime, timezone
from typing import Any

import anyio
import anyio.abc

from acp_nvim import __version__
from acp_nvim.demo_agent._mcp import EDITOR_WORDS
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
    named_file,
    prompt_words,
    reply,
    steered_reply,
    thought,
    typed,
    until_steered,
    usage_update,
)
from acp_nvim.demo_agent._tool_calls import ToolCalls
from acp_nvim.demo_agent.v2 import DemoAgentV2
from acp_nvim.demo_agent.v2 import initialize_result as v2_initialize_result
from acp_nvim.protocol import Connection, RequestError
from acp_nvim.protocol.stdio import stdio_streams

Params = dict[str, Any]


class DemoAgent:
    """The agent side of one connection: the protocol (sessions, turns, the stream and
    its history); the tool calls a prompt's words ask for are its :class:`ToolCalls`."""

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
        self.tool_calls = ToolCalls(connection, self._send_update, self._stream)
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
        offered = params.get("clientCapabilities") or {}
        self.tool_calls.client_fs = offered.get("fs") or {}
        self.tool_calls.client_terminal = bool(offered.get("terminal"))
        client_session = offered.get("session") or {}
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
            await self.tool_calls.pretend_command(session_id)
            return
        if "unknown" in words:  # an update of a kind no client knows: never an error
            await self._send_update(session_id, {"sessionUpdate": "_demo_sparkle"})
        if words & set(EDITOR_WORDS):
            servers = self.mcp_servers.get(session_id, [])
            await self.tool_calls.call_editor_tools(session_id, servers, words)
            return
        if "run" in words:
            await self.tool_calls.run_command(session_id)
            return
        if "edit" in words or "disk" in words:
            cwd = self.cwds[session_id]
            path = named_file(text, cwd)
            if "edit" in words:
                await self.tool_calls.edit_through_editor(session_id, path, cwd)
            if "disk" in words:
                await self.tool_calls.edit_on_disk(session_id, path, cwd)
            return
        await self._stream(session_id, "agent_message_chunk", reply(text, words))

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
