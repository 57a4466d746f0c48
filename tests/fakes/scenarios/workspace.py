"""The "workspace" agents: each session works where the client says (issue 25).

Not the shared handshake (one session ``fake-1``): a session per session/new
(``ws-1``, ``ws-2``, ...), each keeping the ``cwd`` and ``additionalDirectories``
of its session/new, load or resume, so several chats share the process. Over v1,
and v2 when the client offers it. ``workspace`` advertises
``additionalDirectories``, ``workspace+untold`` does not. A prompt is one command
(its first text block, after the conversation a seeded session starts with):

- ``where``: says ``RESULT {"cwd", "roots"}`` of the session;
- ``calls``: says ``RESULT`` with the session requests received, ``[session id,
  params]`` each (``list`` for a session/list);
- ``pwd``: runs ``pwd`` in a client terminal named no directory (v1) and says
  ``RESULT`` with its output;
- ``write NAME TEXT``: writes TEXT and a newline to NAME (relative: in the session's
  cwd) on disk itself, reported by an edit tool call with its diff (as the Claude
  and Codex adapters do);
- ``run NAME TEXT``: writes TEXT to NAME as a shell command would, no tool call
  naming it (the review finds it by its scan); ``bytes NAME HEX`` the same, of bytes;
- ``read PATH``: reads PATH through the client (v1 ``fs/read_text_file``, PATH in
  the session's cwd; v2 the editor MCP server's ``read_buffer``, PATH as given) and
  says ``RESULT`` with the answer;
- ``wait FIFO``: ends its turn once the test opens the named pipe FIFO for writing
  and closes it.

session/list lists the sessions of the ``cwd`` asked for, closed ones too (with their
roots); a session/fork is a new session (``ws-N``) in the ``cwd`` it is given.
"""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import itertools
import json
import os
from typing import Any

import anyio
import anyio.abc

from acp_nvim.demo_agent._mcp import editor_server, mcp_session
from acp_nvim.protocol import Connection, RequestError
from tests.fakes.handshake import Params, Scenario


class Workspace:
    """The "workspace" agents (see the module's docstring)."""

    def __init__(
        self,
        connection: Connection,
        send: anyio.abc.ByteSendStream,
        scenario: Scenario,
        tasks: anyio.abc.TaskGroup,
    ) -> None:
        self.c = connection
        self.tasks = tasks
        self.told = "untold" not in scenario.name
        self.version = 1
        self.sessions: dict[str, Params] = {}  # by id: cwd, roots, mcpServers
        self.calls: list[list[Any]] = []
        self.ids = itertools.count(1)
        self.turns = itertools.count(1)
        on = connection.on_request
        on("initialize", dict, self.initialize)
        on("session/new", dict, self.new_session)
        on("session/load", dict, self.reopen)
        on("session/resume", dict, self.reopen)
        on("session/fork", dict, self.new_session)
        on("session/close", dict, self.close)
        on("session/list", dict, self.list_sessions)
        on("session/prompt", dict, self.prompt)

    async def initialize(self, params: Params) -> Params:
        roots: Params = {"additionalDirectories": {}} if self.told else {}
        if params.get("protocolVersion") == 2:
            self.version = 2
            session = {"mcp": {"stdio": {}}, "fork": {}, **roots}
            return {"protocolVersion": 2, "info": {"name": "workspace", "version": "0"},
                    "capabilities": {"session": session}}  # fmt: skip
        return {
            "protocolVersion": 1,
            "agentInfo": {"name": "workspace", "version": "0"},
            "agentCapabilities": {
                "loadSession": True,
                "sessionCapabilities": {
                    "resume": {}, "close": {}, "list": {}, "fork": {}, **roots
                },
            },
        }

    def open(self, session_id: str, params: Params) -> None:
        self.calls.append([session_id, params])
        self.sessions[session_id] = {
            "cwd": params["cwd"],
            "roots": params.get("additionalDirectories"),
            "mcp": params.get("mcpServers") or [],
        }

    async def new_session(self, params: Params) -> Params:
        session_id = f"ws-{next(self.ids)}"
        self.open(session_id, params)
        return {"sessionId": session_id}

    async def reopen(self, params: Params) -> Params:
        self.open(params["sessionId"], params)
        return {}

    async def list_sessions(self, params: Params) -> Params:
        self.calls.append(["list", params])
        listed = [
            {"sessionId": sid, "cwd": session["cwd"], "additionalDirectories": session["roots"] or []}
            for sid, session in self.sessions.items()
            if session["cwd"] == params.get("cwd")
        ]
        return {"sessions": listed}

    async def close(self, params: Params) -> Params:
        # Closed, not gone: listed still, and resumed as it was.
        self.calls.append(["close", params])
        return {}

    async def update(self, session_id: str, update: Params) -> None:
        await self.c.notify("session/update", {"sessionId": session_id, "update": update})

    async def say(self, session_id: str, text: str, turn: int) -> None:
        chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        if self.version == 2:
            chunk["messageId"] = f"m{turn}"
        await self.update(session_id, chunk)

    async def prompt(self, params: Params) -> Params:
        if self.version == 1:
            await self.turn(params)
            return {"stopReason": "end_turn"}
        self.tasks.start_soon(self.v2_turn, params)
        return {}

    async def v2_turn(self, params: Params) -> None:
        await self.turn(params)
        idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
        await self.update(params["sessionId"], idle)

    async def turn(self, params: Params) -> None:
        session_id, turn = params["sessionId"], next(self.turns)
        session = self.sessions[session_id]
        # A seeded session's first prompt has the conversation before the command.
        said = [b["text"] for b in params["prompt"] if b["type"] == "text"]
        command, _, rest = next(t for t in said if "<conversation>" not in t).partition(" ")
        if command == "where":
            result: Any = {"cwd": session["cwd"], "roots": session["roots"]}
        elif command == "calls":
            result = self.calls
        elif command in ("write", "run"):
            name, _, text = rest.partition(" ")
            path = os.path.join(session["cwd"], name)
            if command == "write":
                result = await self.write(session_id, path, text + "\n")
            else:
                with open(path, "w") as f:
                    f.write(text + "\n")
                result = {"ran": path}
        elif command == "bytes":
            name, _, data = rest.partition(" ")
            path = os.path.join(session["cwd"], name)
            with open(path, "wb") as f:
                f.write(bytes.fromhex(data))
            result = {"ran": path}
        elif command == "read":
            result = await self.read(session_id, rest)
        elif command == "pwd":
            result = await self.pwd(session_id)
        elif command == "wait":
            await anyio.to_thread.run_sync(lambda: open(rest, "rb").read())  # noqa: SIM115
            result = {"waited": rest}
        else:
            result = {"error": f"unknown command {command!r}"}
        await self.say(session_id, "RESULT " + json.dumps(result) + "\n\n", turn)

    async def write(self, session_id: str, path: str, text: str) -> Params:
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        call = {"toolCallId": f"write-{path}", "title": f"Write {path}", "kind": "edit"}
        first = "tool_call" if self.version == 1 else "tool_call_update"
        where = {"locations": [{"path": path}]}
        await self.update(
            session_id, {"sessionUpdate": first, **call, "status": "pending", **where}
        )
        with open(path, "w") as f:
            f.write(text)
        diff = {"type": "diff", "path": path, "oldText": old, "newText": text}
        done = {"sessionUpdate": "tool_call_update", **call, "status": "completed"}
        await self.update(session_id, {**done, "content": [diff], **where})
        return {"wrote": path}

    async def pwd(self, session_id: str) -> Any:
        sid = {"sessionId": session_id}
        created = await self.c.request("terminal/create", {**sid, "command": "pwd"}, dict)
        term = {**sid, "terminalId": created["terminalId"]}
        await self.c.request("terminal/wait_for_exit", term, dict)
        output = await self.c.request("terminal/output", term, dict)
        await self.c.request("terminal/release", term, dict)
        return output["output"].strip()

    async def read(self, session_id: str, path: str) -> Any:
        try:
            if self.version == 1:
                path = os.path.join(self.sessions[session_id]["cwd"], path)
                params = {"sessionId": session_id, "path": path}
                return await self.c.request("fs/read_text_file", params, dict)
            server = editor_server(self.sessions[session_id]["mcp"])
            if server is None:
                return {"error": "no editor server"}
            async with mcp_session(server) as mcp:
                call = {"name": "read_buffer", "arguments": {"path": path}}
                return await mcp.request("tools/call", call, dict)
        except RequestError as err:
            return {"error": err.code, "message": err.message}


SCENARIOS = tuple(Scenario(name, agent=Workspace) for name in ("workspace", "workspace+untold"))
