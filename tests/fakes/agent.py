"""Scripted ACP agents for the tests: ``python tests/fakes/agent.py SCENARIO``.

Each scenario is a small misbehaviour or a fixed script on a shared
handshake. The fake exits with code 97 if nobody talks to it for 60 s, so a
broken test never leaves it behind.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from acp_nvim.demo_agent._mcp import editor_server, mcp_session
from acp_nvim.protocol import Connection, RequestError
from acp_nvim.protocol.stdio import stdio_streams

Params = dict[str, Any]
IDLE_EXIT = 97
# Scenarios that answer v2 when the client offers it ("blocks+embed" counts as "blocks").
V2_SCENARIOS = ("mcp_v2", "mcp_v2_acp", "fork", "blocks", "elicit", "ignore_cancel", "auth")


class AcpMcp:
    """The agent's side of one MCP-over-ACP connection: MCP requests in mcp/message."""

    def __init__(self, connection: Connection, connection_id: str) -> None:
        self.c = connection
        self.connection_id = connection_id

    async def request(self, method: str, params: Params, result_type: Any) -> Any:
        message = {"connectionId": self.connection_id, "method": method, "params": params}
        return await self.c.request("mcp/message", message, result_type)


class Fake:
    def __init__(
        self, connection: Connection, send: Any, scenario: str, tasks: anyio.abc.TaskGroup
    ) -> None:
        self.c = connection
        self.send = send  # for writing bytes no Connection would write
        self.scenario = scenario
        self.tasks = tasks
        self.init_params: Params = {}
        self.mcp_servers: list[Params] = []
        self.cancelled = anyio.Event()
        self.prompted = anyio.Event()  # a prompt came
        connection.on_request("initialize", dict, self.initialize)
        connection.on_request("session/new", dict, self.new_session)
        connection.on_request("session/prompt", dict, self.prompt)
        connection.on_notification("session/cancel", dict, self.cancel)
        connection.on_request("authenticate", dict, self.authenticate)
        connection.on_request("logout", dict, self.logout)
        connection.on_request("auth/login", dict, self.authenticate)  # v2's names
        connection.on_request("auth/logout", dict, self.logout)
        connection.on_request("session/fork", dict, self.fork)
        self.authenticated = False
        self.version = 1  # 2 where the client offers it and the scenario speaks it
        self.turns = 0
        # Settings and history ("settings", "configs", "history"): recorded, said on "calls".
        self.calls: list[list[Any]] = []
        for method in (
            "session/set_mode",
            "session/set_model",
            "session/set_config_option",
            "session/list",
            "session/load",
            "session/resume",
            "session/close",
            "session/delete",
        ):
            connection.on_request(method, dict, self.recorder(method))

    async def initialize(self, params: Params) -> Params:
        self.init_params = params
        if self.scenario == "silent_init":
            await anyio.sleep_forever()
        if params.get("protocolVersion") == 2 and self.scenario.split("+")[0] in V2_SCENARIOS:
            self.version = 2
            answer: Params = {
                "protocolVersion": 2,
                "info": {"name": "fake", "version": "0"},
                "capabilities": {"session": self.session_capabilities_v2()},
            }
            if self.scenario == "auth":
                answer["authMethods"] = [
                    {"type": "agent", "methodId": "browser", "name": "Browser login"},
                    {"type": "terminal", "methodId": "tui", "name": "Terminal login",
                     "args": ["login-tui"], "env": [{"name": "FAKE_TUI", "value": "1"}]},
                    {"type": "env_var", "methodId": "key", "name": "API key",
                     "vars": [{"name": "FAKE_KEY"}]},
                ]  # fmt: skip
            return answer
        version = 7 if self.scenario == "bad_version" else 1
        result: Params = {"protocolVersion": version, "agentInfo": {"name": "fake", "version": "0"}}
        if self.scenario.startswith("blocks"):  # "blocks", "blocks+embed", "blocks+embed+image"
            result["agentCapabilities"] = {
                "promptCapabilities": {
                    "embeddedContext": "+embed" in self.scenario,
                    "image": "+image" in self.scenario,
                }
            }
        if self.scenario == "auth":
            result["authMethods"] = [
                {"id": "browser", "name": "Browser login"},
                {"id": "tui", "name": "Terminal login", "type": "terminal",
                 "args": ["login-tui"], "env": {"FAKE_TUI": "1"}},
                {"id": "key", "name": "API key", "type": "env_var", "vars": [{"name": "FAKE_KEY"}]},
            ]  # fmt: skip
            result["agentCapabilities"] = {"auth": {"logout": {}}}
        if self.scenario == "fork":
            result["agentCapabilities"] = {"sessionCapabilities": {"fork": {}}}
        if self.scenario == "mcp":
            result["agentCapabilities"] = {"mcpCapabilities": {"http": True}}
        if self.scenario == "history":
            result["agentCapabilities"] = {
                "loadSession": True,
                "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "delete": {}},
            }
        if self.scenario == "settings":
            result["agentCapabilities"] = {"sessionCapabilities": {"resume": {}}}
        if self.scenario == "kept":  # load only: a reopened chat goes on with session/load
            result["agentCapabilities"] = {"loadSession": True}
        return result

    def session_capabilities_v2(self) -> Params:
        match self.scenario.split("+"):
            case ["mcp_v2"]:
                return {"mcp": {"stdio": {}, "http": {}}}
            case ["mcp_v2_acp"]:  # MCP-over-ACP too (the unstable session.mcp.acp)
                return {"mcp": {"stdio": {}, "acp": {}}}
            case ["fork"]:
                return {"fork": {}}
            case ["blocks", *takes]:
                return {"prompt": {"embeddedContext" if t == "embed" else t: {} for t in takes}}
        return {}

    async def new_session(self, params: Params) -> Params:
        if self.scenario == "silent_new":
            await anyio.sleep_forever()
        self.mcp_servers = params.get("mcpServers") or []
        if os.environ.get("FAKE_MCP_SERVERS"):  # for a test that calls the tools itself
            with open(os.environ["FAKE_MCP_SERVERS"], "w") as f:
                json.dump(self.mcp_servers, f)
        if self.scenario == "auth" and not self.logged_in():
            raise RequestError(-32000, "Authentication required")
        result: Params = {"sessionId": "fake-1", **self.settings()}
        if self.scenario == "fork":
            result["configOptions"] = self.mode_option("ask")
        return result

    def settings(self) -> Params:
        """The settings a session starts with (new or resumed: this agent does not keep
        a session's mode)."""
        result: Params = {}
        if self.scenario in ("settings", "configs"):
            # qwen starts in "auto": its own classifier approves edits and commands.
            result["modes"] = {
                "currentModeId": "auto",
                "availableModes": [
                    {"id": "auto", "name": "Auto"},
                    {"id": "default", "name": "Default"},
                    {"id": "plan", "name": "Plan"},
                ],
            }
            result["models"] = {
                "currentModelId": "small",
                "availableModels": [
                    {"modelId": "small", "name": "Small"},
                    {"modelId": "large", "name": "Large"},
                ],
            }
        if self.scenario == "configs":  # config options win over modes and models
            result["configOptions"] = self.config_options("auto")
        return result

    async def fork(self, params: Params) -> Params:
        """session/fork ("fork"): recorded (said on "calls"); the fork is in mode "plan"."""
        self.calls.append(["session/fork", params])
        forks = sum(1 for method, _ in self.calls if method == "session/fork")
        return {"sessionId": f"fork-{forks}", "configOptions": self.mode_option("plan")}

    def mode_option(self, mode: str) -> list[Params]:
        """A mode setting, as the version spoken names its id."""
        key = "configId" if self.version == 2 else "id"
        return [
            {
                "type": "select",
                key: "mode",
                "name": "Mode",
                "category": "mode",
                "currentValue": mode,
                "options": [{"value": "ask", "name": "Ask"}, {"value": "plan", "name": "Plan"}],
            }
        ]

    def logged_in(self) -> bool:
        marker = os.environ.get("FAKE_AUTH_MARKER", "")
        return (
            self.authenticated
            or os.environ.get("FAKE_KEY") == "sekret"
            or bool(marker and os.path.exists(marker))
        )

    async def authenticate(self, params: Params) -> Params:
        self.authenticated = params.get("methodId") == "browser"
        return {}

    async def logout(self, params: Params) -> Params:
        self.authenticated = False
        return {}

    @staticmethod
    def config_options(mode: str) -> list[Params]:
        return [
            {
                "type": "select",
                "id": "approval",
                "name": "Approval",
                "category": "mode",
                "currentValue": mode,
                "options": [{"value": "auto", "name": "Auto"}, {"value": "ask", "name": "Ask"}],
            }
        ]

    async def switch_settings(self) -> None:
        """Change settings as agents do on their own (a plan mode left by a tool,
        the mode the user picked in the agent's own UI): "settings" to mode "plan" and
        a new thought level setting, "configs" its approval option to "ask"."""
        if self.scenario == "configs":
            options = self.config_options("ask")
            await self.tool_update({"sessionUpdate": "config_option_update", "configOptions": options})
            return
        await self.tool_update({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
        thought = {
            "type": "select",
            "id": "thought",
            "name": "Thinking",
            "category": "thought_level",
            "currentValue": "high",
            "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
        }
        await self.tool_update({"sessionUpdate": "config_option_update", "configOptions": [thought]})

    def recorder(self, method: str) -> Any:
        async def record(params: Params) -> Params:
            self.calls.append([method, params])
            if method == "session/set_mode" and os.environ.get("FAKE_SLOW_SETTINGS"):
                await self.prompted.wait()  # answered only once a prompt came
            match method:
                case "session/set_config_option":
                    return {"configOptions": self.config_options(params["value"])}
                case "session/list":
                    return self.session_page(params.get("cursor"))
                case "session/load":
                    session = params["sessionId"]
                    await self.say("an old question", "user_message_chunk", session)
                    await self.say("an old answer", session=session)
                case "session/resume":
                    if self.scenario.startswith("blocks"):  # a new process knows no session
                        raise RequestError(-32002, f"Resource not found: {params['sessionId']}")
                    return self.settings()
            return {}

        return record

    @staticmethod
    def session_page(cursor: str | None) -> Params:
        if cursor is None:
            return {"sessions": [{"sessionId": "old-1", "cwd": "/p", "title": "First"}],
                    "nextCursor": "page2"}  # fmt: skip
        return {"sessions": [{"sessionId": "old-2", "cwd": "/p", "title": "Second"}]}

    async def cancel(self, params: Params) -> None:
        self.cancelled.set()

    async def say(
        self, text: str, kind: str = "agent_message_chunk", session: str = "fake-1"
    ) -> None:
        await self.c.notify(
            "session/update",
            {
                "sessionId": session,
                "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}},
            },
        )

    async def prompt(self, params: Params) -> Params:
        self.prompted.set()
        if self.version == 2 and self.scenario != "fork":
            # v2: the prompt is only accepted; the turn reports itself and ends idle.
            self.tasks.start_soon(self.v2_turn, params)
            return {}
        return await self.turn(params)

    async def v2_turn(self, params: Params) -> None:
        """The scenario's turn with v2 messages, ended by an idle update."""
        self.turns += 1
        self.say = self.say_v2  # type: ignore[method-assign]
        try:
            answer = await self.turn(params)
        finally:
            del self.say
        update = {"sessionUpdate": "state_update", "state": "idle", **answer}
        await self.c.notify("session/update", {"sessionId": "fake-1", "update": update})

    async def turn(self, params: Params) -> Params:
        text = params["prompt"][0]["text"]
        if self.scenario.startswith("blocks"):
            # The prompt's blocks as received; a text too long for one transcript
            # line is said as its length.
            def short(value: Any) -> Any:
                if isinstance(value, dict):
                    return {k: short(v) for k, v in value.items()}
                return f"<{len(value)} chars>" if isinstance(value, str) and len(value) > 1000 else value

            await self.say(json.dumps([short(block) for block in params["prompt"]]))
            return {"stopReason": "end_turn"}
        match self.scenario:
            case "fork":
                return await self.fork_turn(params["sessionId"], text)
            case "mcp" | "mcp_v2" | "mcp_v2_acp":
                await self.call_editor_tools(json.loads(text))
            case "endless":
                # Stream until cancelled; then answer the way every real agent does.
                i = 0
                while not self.cancelled.is_set():
                    await self.say(f"tick{i} ")
                    i += 1
                    with anyio.move_on_after(0.005):
                        await self.cancelled.wait()
                return {"stopReason": "cancelled"}
            case "ignore_cancel" if text != "after":
                # Goes on after a cancel: 100 more lines (2 s), then ends the turn.
                with anyio.move_on_after(30):
                    left = 100
                    for i in range(100_000):
                        await self.say(f"still working {i}\n")
                        await anyio.sleep(0.02)
                        left -= self.cancelled.is_set()
                        if not left:
                            self.cancelled = anyio.Event()
                            return {"stopReason": "cancelled"}
            case "hold" | "hold_then_crash" if text == "hold":
                await self.say("holding")
                await self.cancelled.wait()
                if self.scenario == "hold_then_crash":
                    os._exit(2)  # dies instead of ending the turn
                self.cancelled = anyio.Event()
                return {"stopReason": "cancelled"}
            case "settings" | "configs" | "history" | "kept" if text == "calls":
                await self.say(json.dumps(self.calls))
                if os.environ.get("FAKE_SLOW_SETTINGS"):  # the turn goes on until a cancel
                    await self.cancelled.wait()
                    self.cancelled = anyio.Event()
                    return {"stopReason": "cancelled"}
            case "kept" if text.startswith("edit "):  # edit PATH: "two" becomes "2" on disk
                path = text.removeprefix("edit ")
                await self.file_steps([{"disk": {"path": path, "content": "one\n2\n"}}])
                await self.say(f"edited {path}")
            case "settings" | "configs" if text == "switch":
                await self.switch_settings()
            case "stubborn":
                # Deaf to hang-ups, a grandchild in its group, reports both pids.
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                child = subprocess.Popen(["sleep", "300"])
                await self.say(f"pids {os.getpid()} {child.pid}")
            case "huge_line":
                await self.say("x" * 2_000_000 + "\nafter the long line")
            case "stderr_flood":
                # 8 MB of stderr without a newline, then a crash.
                for _ in range(8):
                    sys.stderr.write("e" * 1_000_000)
                sys.stderr.flush()
                os._exit(3)
            case "crash_mid_turn":
                await self.say("about to crash")
                sys.stderr.write("fatal: the fake agent broke on purpose\n")
                sys.stderr.flush()
                os._exit(2)
            case "capabilities":
                await self.say(json.dumps(self.init_params, sort_keys=True))
            case "vendor":
                try:
                    await self.c.request("craft/drainMidTurnQueue", {})
                except RequestError as err:
                    await self.say(f"vendor request answered {err.code}. ")
                await self.c.notify("qwen/notify/session/mode-update", {"mode": "x"})
                await self.tool_update({"sessionUpdate": "_sparkle", "glitter": True})
                await self.say("still here")
            case "garbage":
                await self.send.send(b"{not json\n")
                await self.send.send(
                    b'{"jsonrpc": "2.0", "method": "x", "params": ' + b"1" * 70_000_000 + b"}\n"
                )
                await self.say("after garbage")
            case "permission":
                return await self.ask_permission(text)
            case "tool_calls":
                await self.tool_call_with_location(text)
            case "terminal":
                await self.run_terminal(json.loads(text))
            case "files":
                await self.file_steps(json.loads(text))
            case "elicit":
                await self.elicit_steps(json.loads(text))
            case _:
                await self.say(f"echo: {text}")
        return {"stopReason": "end_turn"}

    async def fork_turn(self, session: str, text: str) -> Params:
        """A turn of the "fork" scenario, over v1 or v2: says ``SESSION: echo TEXT``
        into the prompt's session; "calls" says the recorded calls; "hold" waits
        for a cancel."""
        self.turns += 1
        reply = json.dumps(self.calls) if text == "calls" else f"{session}: echo {text}"
        if self.version == 1:
            await self.say(reply, session=session)
            if text == "hold":
                await self.cancelled.wait()
                self.cancelled = anyio.Event()
                return {"stopReason": "cancelled"}
            return {"stopReason": "end_turn"}

        async def turn() -> None:
            update = {"sessionUpdate": "agent_message_chunk", "messageId": f"m{self.turns}",
                      "content": {"type": "text", "text": reply}}  # fmt: skip
            await self.c.notify("session/update", {"sessionId": session, "update": update})
            stop = "end_turn"
            if text == "hold":
                await self.cancelled.wait()
                self.cancelled, stop = anyio.Event(), "cancelled"
            update = {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop}
            await self.c.notify("session/update", {"sessionId": session, "update": update})

        self.tasks.start_soon(turn)  # v2: the prompt is only accepted
        return {}

    async def elicit_steps(self, steps: list[Params]) -> None:
        """Prompt: a JSON list of ``{"create": params}`` (an ``elicitation/create`` of
        this session, the answer said as ``RESULT <json>``), ``{"complete": id}`` (an
        ``elicitation/complete``) and ``{"caps": null}`` (says ``CAPS <json>``, the
        client's elicitation capability)."""
        for step in steps:
            [(kind, args)] = step.items()
            if kind == "caps":
                key = "capabilities" if self.version == 2 else "clientCapabilities"
                caps = self.init_params.get(key, {}).get("elicitation")
                await self.say(f"CAPS {json.dumps(caps)}\n")
            elif kind == "complete":
                await self.c.notify("elicitation/complete", {"elicitationId": args})
            else:
                try:
                    result = await self.c.request(
                        "elicitation/create", {"sessionId": "fake-1", **args}, dict
                    )
                except RequestError as err:
                    result = {"error": err.code}
                await self.say(f"RESULT {json.dumps(result, sort_keys=True)}\n")

    async def call_editor_tools(self, calls: list[Params]) -> None:
        """Prompt: a JSON list of ``{"tool", "arguments"}``, or ``"servers"`` for the
        mcpServers of session/new. Each tool is called on the editor's MCP server (the
        stdio shim from mcpServers, or over this ACP connection where the client
        offered an ``acp`` server); each answer is said as a ``RESULT <json>`` line."""
        if calls == "servers":
            await self.say("RESULT " + json.dumps(self.mcp_servers) + "\n")
            return
        over_acp = [s for s in self.mcp_servers if s.get("type") == "acp" and s["name"] == "nvim"]
        server = editor_server(self.mcp_servers)
        if server is None and not over_acp:
            await self.say("RESULT " + json.dumps({"error": "no editor server"}) + "\n")
            return
        session = self.mcp_over_acp(over_acp[0]) if over_acp else mcp_session(server or {})
        async with session as mcp:
            for call in calls:
                try:
                    result: Any = await mcp.request(
                        "tools/call",
                        {"name": call["tool"], "arguments": call.get("arguments", {})},
                        dict,
                    )
                except RequestError as err:
                    result = {"error": err.code, "message": err.message}
                await self.say("RESULT " + json.dumps(result) + "\n")

    @asynccontextmanager
    async def mcp_over_acp(self, server: Params) -> AsyncIterator[AcpMcp]:
        """An MCP session with an ``acp`` server: mcp/connect, the MCP handshake in
        mcp/message, and mcp/disconnect at the end."""
        connected = await self.c.request("mcp/connect", {"serverId": server["serverId"]}, dict)
        mcp = AcpMcp(self.c, connected["connectionId"])
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fake"}}
        await mcp.request("initialize", hello, dict)
        await self.c.notify(
            "mcp/message",
            {"connectionId": mcp.connection_id, "method": "notifications/initialized"},
        )
        try:
            yield mcp
        finally:
            await self.c.request("mcp/disconnect", {"connectionId": mcp.connection_id}, dict)

    async def say_v2(
        self, text: str, kind: str = "agent_message_chunk", session: str = "fake-1"
    ) -> None:
        update = {
            "sessionUpdate": kind,
            "messageId": f"m{self.turns}",
            "content": {"type": "text", "text": text},
        }
        await self.c.notify("session/update", {"sessionId": session, "update": update})

    async def file_steps(self, steps: list[Params]) -> None:
        """Prompt: a JSON list of ``{"read": params}``, ``{"write": params}`` (fs/*
        requests, answers said as ``RESULT <json>`` lines), ``{"disk": {path,
        content}}`` (an edit made on disk, reported only as a tool call, like
        Claude's and Codex's adapters), ``{"opencode": {path, content}}`` (see
        :meth:`opencode_write`) and ``{"ask": {path, oldText, newText, write?}}``
        (a permission request for an edit with that diff; the outcome said as a
        RESULT; once allowed, ``write`` goes to ``fs/write_text_file``)."""
        for n, step in enumerate(steps):
            [(kind, args)] = step.items()
            if kind == "ask":
                await self.ask_edit(f"ask{n}", args)
                continue
            if kind == "opencode":
                await self.opencode_write(f"write{n}", args["path"], args["content"])
                continue
            if kind == "disk":
                path = args["path"]
                old = None
                if os.path.exists(path):
                    with open(path) as f:
                        old = f.read()
                call = {"toolCallId": f"edit{n}", "title": f"Edit {path}", "kind": "edit"}
                await self.tool_update(
                    {
                        "sessionUpdate": "tool_call",
                        **call,
                        "status": "pending",
                        "locations": [{"path": path}],
                    }
                )
                with open(path, "w") as f:
                    f.write(args["content"])
                diff = {"type": "diff", "path": path, "oldText": old, "newText": args["content"]}
                await self.tool_update(
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": f"edit{n}",
                        "status": "completed",
                        "content": [diff],
                    }
                )
                continue
            try:
                result: Any = await self.c.request(
                    f"fs/{kind}_text_file", {"sessionId": "fake-1", **args}, dict
                )
            except RequestError as err:
                result = {"error": err.code, "message": err.message}
            await self.say("RESULT " + json.dumps(result) + "\n")

    async def ask_edit(self, call_id: str, args: Params) -> None:
        path = args["path"]
        diff = {
            "type": "diff",
            "path": path,
            "oldText": args["oldText"],
            "newText": args["newText"],
        }
        call = {"toolCallId": call_id, "title": f"Edit {os.path.basename(path)}", "kind": "edit"}
        options = [
            {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        answer = await self.c.request(
            "session/request_permission",
            {"sessionId": "fake-1", "toolCall": {**call, "content": [diff]}, "options": options},
            dict,
        )
        outcome = answer["outcome"]
        if outcome.get("optionId") == "once" and "write" in args:
            await self.c.request(
                "fs/write_text_file",
                {"sessionId": "fake-1", "path": path, "content": args["write"]},
                dict,
            )
        await self.say("RESULT " + json.dumps(outcome) + "\n")

    async def opencode_write(self, call_id: str, path: str, content: str) -> None:
        """Write a file as opencode 1.18 does: a call without locations, the location
        while in progress, a permission request carrying the diff (``oldText`` "" for
        a new file), once allowed the file written on disk and ``fs/write_text_file``,
        then a completion with text content only."""
        call = {"toolCallId": call_id, "title": "write", "kind": "edit"}
        await self.tool_update({"sessionUpdate": "tool_call", **call, "status": "pending"})
        location = {"locations": [{"path": path}]}
        await self.tool_update(
            {"sessionUpdate": "tool_call_update", **call, "status": "in_progress", **location}
        )
        diff = {"type": "diff", "path": path, "oldText": "", "newText": content}
        options = [
            {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        answer = await self.c.request(
            "session/request_permission",
            {
                "sessionId": "fake-1",
                "toolCall": {**call, "status": "in_progress", **location, "content": [diff]},
                "options": options,
            },
            dict,
        )
        if answer["outcome"].get("optionId") not in ("once", "always"):
            await self.say("RESULT " + json.dumps({"rejected": True}) + "\n")
            return
        # opencode does not await its fs/write_text_file: its own write tool then
        # writes the same file, usually before the client handled the request.
        with open(path, "w") as f:
            f.write(content)
        result = await self.c.request(
            "fs/write_text_file", {"sessionId": "fake-1", "path": path, "content": content}, dict
        )
        text = {"type": "content", "content": {"type": "text", "text": "Wrote file successfully."}}
        await self.tool_update(
            {"sessionUpdate": "tool_call_update", **call, "status": "completed", "content": [text]}
        )
        await self.say("RESULT " + json.dumps(result) + "\n")

    async def run_terminal(self, script: Params) -> None:
        """Prompt ``{"create": {...}, "kill"?, "wait"?, "release"?, "report_to"?}`` (JSON):
        run a terminal shown in a tool call, then report what came back as JSON (said,
        and written to the file ``report_to``). ``kill`` true kills it at once; a string
        kills it once its output holds that string (as an agent watching a server)."""
        sid = {"sessionId": "fake-1"}
        created = await self.c.request("terminal/create", {**sid, **script["create"]}, dict)
        term = {**sid, "terminalId": created["terminalId"]}
        await self.tool_update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "run",
                "title": "Run",
                "kind": "execute",
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": created["terminalId"]}],
            }
        )
        report: Params = {"terminalId": created["terminalId"]}
        if isinstance(script.get("kill"), str):
            with anyio.fail_after(10):
                while (
                    script["kill"]
                    not in (await self.c.request("terminal/output", term, dict))["output"]
                ):
                    await anyio.sleep(0.01)
        if script.get("kill"):
            await self.c.request("terminal/kill", term, dict)
        if script.get("wait", True):
            report["exit"] = await self.c.request("terminal/wait_for_exit", term, dict)
            report |= await self.c.request("terminal/output", term, dict)
        if script.get("release", True):
            await self.c.request("terminal/release", term, dict)
            try:
                await self.c.request("terminal/output", term, dict)
            except RequestError as err:
                report["after_release"] = err.code
        if "report_to" in script:  # whole, where a transcript line would be cut
            with open(script["report_to"], "w") as f:
                json.dump(report, f)
        await self.say(json.dumps(report))

    async def tool_update(self, update: Params) -> None:
        await self.c.notify("session/update", {"sessionId": "fake-1", "update": update})

    async def ask_permission(self, text: str) -> Params:
        """Prompt ``KIND [nokind] [at PATH:LINE]``: ask like gemini (the tool call exists
        only in the request), then report the outcome as a message."""
        words = text.split()
        call: Params = {
            "toolCallId": f"call-{words[0]}",
            "title": f"Fake {words[0]}",
            "kind": words[0],
        }
        if "at" in words:
            path, line = words[words.index("at") + 1].rsplit(":", 1)
            call["locations"] = [{"path": path, "line": int(line)}]
        if "nokind" in words:  # the older Claude adapter
            options = [{"optionId": "yes", "name": "Yes"}, {"optionId": "no", "name": "No"}]
        else:
            options = [
                {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "proceed_always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "cancel", "name": "Reject", "kind": "reject_once"},
                {"optionId": "never", "name": "Never", "kind": "reject_always"},
            ]
        params = {"sessionId": "fake-1", "toolCall": call, "options": options}
        answer = await self.c.request("session/request_permission", params, dict)
        outcome = answer["outcome"]
        await self.say(f"permission: {outcome['outcome']} {outcome.get('optionId', '')}".strip())
        return {"stopReason": "cancelled" if self.cancelled.is_set() else "end_turn"}

    async def tool_call_with_location(self, text: str) -> None:
        """Prompt ``PATH:LINE``: a tool call at that location, then its diff."""
        path, line = text.split()[0].rsplit(":", 1)
        location = {"path": path, "line": int(line)}
        await self.tool_update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Edit file",
                "kind": "edit",
                "status": "in_progress",
                "locations": [location],
            }
        )
        diff = {"type": "diff", "path": path, "oldText": "one\ntwo\n", "newText": "one\n2\n"}
        await self.tool_update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
                "content": [diff],
            }
        )


class Rewind:
    """The "rewind" scenarios, over v1 and v2: sessions of their own, each turn's
    messages with ids, usage reports, and every request recorded as a JSON line in
    the file $FAKE_CALLS (a prompt carries a whole conversation: too long to say).

    A prompt ``write NAME TEXT`` writes TEXT to NAME in the session's directory (on
    disk, reported as a tool call); ``hold`` waits for a cancel or a steering
    message; ``compact`` compacts the context and sends a notice; anything else is
    echoed. Flags after ``+``: ``plain`` forks only whole sessions (no fork at a
    message), ``steer`` advertises ``_session/steering``, ``embed`` takes embedded
    context, ``resume`` resumes any session it is named (``session/resume``).
    """

    def __init__(self, connection: Connection, scenario: str, tasks: anyio.abc.TaskGroup) -> None:
        self.c = connection
        self.flags = set(scenario.split("+")[1:])
        self.tasks = tasks
        self.version = 1
        self.cwd: dict[str, str] = {}  # by session
        self.turns: dict[str, int] = {}  # turns run, by session
        self.steered: dict[str, anyio.Event] = {}  # sessions whose turn holds
        self.steering: dict[str, str] = {}
        self.cancelled: dict[str, anyio.Event] = {}
        self.sessions = 0
        self.client: Params = {}
        connection.on_request("initialize", dict, self.initialize)
        for method, handler in (("session/new", self.new_session), ("session/fork", self.fork),
                                ("session/prompt", self.prompt), ("_session/steering", self.steer),
                                ("session/resume", self.resume)):
            connection.on_request(method, dict, self.recorded(method, handler))
        connection.on_notification("session/cancel", dict, self.cancel)

    def recorded(self, method: str, handler: Any) -> Any:
        async def record(params: Params) -> Params:
            with open(os.environ["FAKE_CALLS"], "a") as f:
                f.write(json.dumps([method, params]) + "\n")
            return await handler(params)  # type: ignore[no-any-return]

        return record

    async def initialize(self, params: Params) -> Params:
        self.version = 2 if params.get("protocolVersion") == 2 else 1
        self.client = params.get("capabilities" if self.version == 2 else "clientCapabilities", {})
        meta = {} if "plain" in self.flags else {"jetbrains": {"air": {"fork": {"version": 1, "inclusive": True}}}}
        prompt = {"embeddedContext": True} if "embed" in self.flags else {}
        result: Params = {"_meta": {"steering": {"supported": True}}} if "steer" in self.flags else {}
        sessions: Params = {"fork": {}, **({"resume": {}} if "resume" in self.flags else {})}
        if self.version == 2:
            prompt = {k: {} for k in prompt}
            caps = {"session": {**sessions, "prompt": prompt}, "_meta": meta}
            return {**result, "protocolVersion": 2, "info": {"name": "fake", "version": "0"},
                    "capabilities": caps}
        caps = {"sessionCapabilities": sessions, "promptCapabilities": prompt, "_meta": meta}
        return {**result, "protocolVersion": 1, "agentInfo": {"name": "fake", "version": "0"},
                "agentCapabilities": caps}  # fmt: skip

    def open(self, cwd: str) -> str:
        self.sessions += 1
        session = f"s{self.sessions}"
        self.cwd[session], self.turns[session] = cwd, 0
        return session

    async def new_session(self, params: Params) -> Params:
        return {"sessionId": self.open(params["cwd"])}

    async def resume(self, params: Params) -> Params:
        session = params["sessionId"]
        self.cwd[session], self.turns[session] = params["cwd"], self.turns.get(session, 0)
        return {}

    async def fork(self, params: Params) -> Params:
        session = self.open(params["cwd"])
        self.turns[session] = self.turns.get(params["sessionId"], 0)
        return {"sessionId": session}

    async def update(self, session: str, update: Params) -> None:
        await self.c.notify("session/update", {"sessionId": session, "update": update})

    async def say(self, session: str, text: str, kind: str = "agent_message_chunk") -> None:
        n = self.turns[session]
        prefix = "u" if kind == "user_message_chunk" else "m"
        content = {"type": "text", "text": text}
        await self.update(session, {"sessionUpdate": kind, "messageId": f"{session}-{prefix}{n}",
                                    "content": content})  # fmt: skip

    async def prompt(self, params: Params) -> Params:
        if self.version == 2:
            self.tasks.start_soon(self.turn, params)
            return {}
        return {"stopReason": await self.turn(params)}

    async def turn(self, params: Params) -> str:
        session = params["sessionId"]
        self.turns[session] += 1
        text = params["prompt"][-1]["text"]
        stop = "end_turn"
        if self.version == 2:
            await self.say(session, text, "user_message_chunk")
        if text.startswith("write "):
            _, name, content = text.split(" ", 2)
            path = os.path.join(self.cwd[session], name)
            old = Path(path).read_text() if os.path.exists(path) else None
            call = {"toolCallId": f"{session}-w{self.turns[session]}", "title": f"Write {name}"}
            kind = "tool_call_update" if self.version == 2 else "tool_call"
            await self.update(session, {"sessionUpdate": kind, **call, "kind": "edit",
                                        "status": "in_progress", "locations": [{"path": path}]})
            with open(path, "w") as f:
                f.write(content + "\n")
            diff = {"type": "diff", "path": path, "oldText": old, "newText": content + "\n"}
            if self.version == 2:  # a v2 diff: the change and its git patch
                patch = difflib.unified_diff((old or "").splitlines(True), [content + "\n"],
                                             "/dev/null" if old is None else path, path)
                operation = "add" if old is None else "modify"
                diff = {"type": "diff", "changes": [{"operation": operation, "path": path}],
                        "patch": {"format": "git_patch",
                                  "text": f"diff --git {path} {path}\n" + "".join(patch)}}
            await self.update(session, {"sessionUpdate": "tool_call_update", **call,
                                        "status": "completed", "content": [diff]})  # fmt: skip
            await self.say(session, f"wrote {name}")
        elif text == "hold":
            await self.say(session, "holding")
            self.steered[session], self.cancelled[session] = anyio.Event(), anyio.Event()
            async with anyio.create_task_group() as waits:
                for event in (self.steered[session], self.cancelled[session]):
                    waits.start_soon(self.until, event, waits)
            del self.steered[session]
            if self.cancelled.pop(session).is_set():
                stop = "cancelled"
            else:
                await self.say(session, f" steered: {self.steering.pop(session)}")
        elif text == "compact":
            await self.compact(session)
        else:
            await self.say(session, f"{session}: {text}")
        n = self.turns[session]
        await self.update(session, {"sessionUpdate": "usage_update", "used": 1234 * n, "size": 200000,
                                    "cost": {"amount": 0.05 * n, "currency": "USD"}})  # fmt: skip
        if self.version == 2:
            await self.update(session, {"sessionUpdate": "state_update", "state": "idle",
                                        "stopReason": stop})  # fmt: skip
        return stop

    @staticmethod
    async def until(event: anyio.Event, group: anyio.abc.TaskGroup) -> None:
        await event.wait()
        group.cancel_scope.cancel()

    async def compact(self, session: str) -> None:
        """A compaction (only where the client takes them: v2, or v1 advertising it),
        then a notice."""
        if self.version == 2 or "compaction" in (self.client.get("session") or {}):
            update = {"sessionUpdate": "compaction_update", "compactionId": "c1"}
            await self.update(session, {**update, "status": "in_progress"})
            chunk = {"type": "text", "text": "Kept: the plan."}
            await self.update(session, {"sessionUpdate": "compaction_summary_chunk",
                                        "compactionId": "c1", "content": chunk})  # fmt: skip
            await self.update(session, {**update, "status": "completed"})
        await self.update(session, {"sessionUpdate": "notice", "severity": "warning",
                                    "title": "Context compacted", "description": "older turns summarised"})  # fmt: skip
        await self.say(session, "compacted")

    async def steer(self, params: Params) -> Params:
        session = params["sessionId"]
        if session not in self.steered:
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        self.steering[session] = params["prompt"][-1]["text"]
        self.steered[session].set()
        return {"outcome": "injected"}

    async def cancel(self, params: Params) -> None:
        with open(os.environ["FAKE_CALLS"], "a") as f:
            f.write(json.dumps(["session/cancel", params]) + "\n")
        event = self.cancelled.get(params["sessionId"])
        if event is not None:
            event.set()


async def main(scenario: str) -> None:
    receive, send = stdio_streams()
    connection = Connection(receive, send, name="fake")
    with anyio.move_on_after(60):
        async with anyio.create_task_group() as tasks:
            if scenario.startswith("rewind"):
                Rewind(connection, scenario, tasks)
            else:
                Fake(connection, send, scenario, tasks)
            await connection.serve()
            if scenario == "stubborn":
                await anyio.sleep(300)  # stdin closed: a stubborn agent stays anyway
            tasks.cancel_scope.cancel()
        return
    sys.exit(IDLE_EXIT)


def login_tui() -> None:
    """The interactive login of the "auth" scenario: a line typed in the terminal."""
    print("Press Enter to log in", flush=True)
    sys.stdin.readline()
    with open(os.environ["FAKE_AUTH_MARKER"], "w") as f:
        f.write("logged in\n")
    print("Logged in.", flush=True)


if __name__ == "__main__":
    if "login-tui" in sys.argv and os.environ.get("FAKE_TUI") == "1":
        login_tui()
    else:
        anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "echo")
