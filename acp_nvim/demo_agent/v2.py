"""The demo agent's ACP v2 surface, chosen when the client's ``initialize`` asks for v2.

The prompt response only accepts; the turn runs as notifications: the
``user_message`` acknowledgment, ``state_update`` running, streamed thoughts
and reply with message ids, and ``idle`` with the stop reason (``cancelled``
after ``session/cancel``). Words in the prompt add v2 features (``help``).
Sessions keep their history so ``session/resume`` can replay it.
"""

from __future__ import annotations

__all__ = ["HELP_V2", "DemoAgentV2", "initialize_result"]

import base64
import itertools
import os
from typing import Any

import anyio
import anyio.abc
import msgspec

from acp_nvim import __version__
from acp_nvim.demo_agent._mcp import EDITOR_WORDS, ask_editor
from acp_nvim.demo_agent._text import (
    COMMANDS,
    COMPACTED_NOTICE,
    FORK_AT_MESSAGE,
    MODELS,
    MODES,
    STEERING,
    compaction_updates,
    fork_point,
    help_text,
    prompt_words,
    reply,
    steered_reply,
    thought,
    typed,
    until_steered,
    usage_update,
)
from acp_nvim.protocol import Connection, RequestError

Params = dict[str, Any]

HELP_V2 = help_text("""- `tool`: a tool call created by an update, its content streamed in chunks
- `diff`: structured file changes (modify, add, delete, move, a binary file) with a git patch
- `terminal`: an agent-owned display terminal streaming output, then its exit
- `plan`: two plans, updated by id
- `fix`: a reply corrected in place (a whole-message update), then continued
- `permission`: a permission request for a command (the turn waits for you)

Settings: `:AcpConfig` (mode, model, thinking). Sessions: `:AcpSessions`.
""")

_THOUGHT = [("low", "Low"), ("high", "High")]

_PATCH = """diff --git {d}/src/config.json {d}/src/config.json
--- {d}/src/config.json
+++ {d}/src/config.json
@@ -1,3 +1,3 @@
 {{
-  "debug": false
+  "debug": true
 }}
diff --git {d}/NEWS.md {d}/NEWS.md
new file mode 100644
--- /dev/null
+++ {d}/NEWS.md
@@ -0,0 +1 @@
+Debug mode is on.
"""


def initialize_result() -> Params:
    return {
        "protocolVersion": 2,
        "info": {"name": "demo", "title": "Demo agent", "version": __version__},
        "capabilities": {
            "session": {"delete": {}, "fork": {}, "mcp": {"stdio": {}}},
            "_meta": FORK_AT_MESSAGE,
        },
        "authMethods": [
            {"type": "agent", "methodId": "demo-login", "name": "Demo login"},
        ],
        "_meta": STEERING,
    }


class _Session(msgspec.Struct):
    id: str
    cwd: str
    history: list[Params] = msgspec.field(default_factory=list)
    mcp_servers: list[Params] = msgspec.field(default_factory=list)
    config: dict[str, str] = msgspec.field(
        default_factory=lambda: {"mode": "ask", "model": "demo-small", "thought": "low"}
    )
    suggestions: bool = True
    turn: anyio.CancelScope | None = None
    steering: list[str] = msgspec.field(default_factory=list)  # joined the running turn
    title: str | None = None
    used: int = 0  # context tokens, for usage_update
    billed: int = 0  # tokens so far, for its cost


class DemoAgentV2:
    """The v2 handlers; installed on the connection by the v1 demo's ``initialize``."""

    def __init__(
        self,
        connection: Connection,
        delay: float,
        tasks: anyio.abc.TaskGroup,
    ) -> None:
        self.c = connection
        self.delay = delay
        self.tasks = tasks
        self.sessions: dict[str, _Session] = {}
        self._ids = itertools.count(1)
        self._permission: anyio.Event | None = None
        for method, handler in {
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/list": self.list_sessions,
            "session/resume": self.resume,
            "session/fork": self.fork,
            "session/close": self.close,
            "session/delete": self.delete,
            "session/set_config_option": self.set_config_option,
            "auth/login": self.login,
            "auth/logout": self.login,
            "_session/steering": self.steer,
        }.items():
            connection.on_request(method, dict, handler)
        connection.on_notification("session/cancel", dict, self.cancel)

    def __repr__(self) -> str:
        return f"<DemoAgentV2 {len(self.sessions)} sessions>"

    # -- sessions

    def _session(self, params: Params) -> _Session:
        session = self.sessions.get(params.get("sessionId", ""))
        if session is None:
            raise RequestError.resource_not_found(f"session {params.get('sessionId')}")
        return session

    async def new_session(self, params: Params) -> Params:
        cwd = params.get("cwd", "")
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params("cwd must be an absolute path")
        session = _Session(f"demo-{len(self.sessions) + 1}", cwd)
        session.mcp_servers = params.get("mcpServers") or []
        self.sessions[session.id] = session
        self.tasks.start_soon(self._send_commands, session)  # after the answer
        return {"sessionId": session.id, "configOptions": self._config(session)}

    async def _send_commands(self, session: _Session) -> None:
        commands = [
            {"name": name, "description": description}
            | ({"input": {"type": "text", "hint": hint}} if hint else {})
            for name, description, hint in COMMANDS
        ]
        update = {"sessionUpdate": "available_commands_update", "availableCommands": commands}
        await self._notify(session, update, record=False)

    async def list_sessions(self, params: Params) -> Params:
        cwd = params.get("cwd")
        listed = [s for s in self.sessions.values() if cwd is None or s.cwd == cwd]
        return {
            "sessions": [
                {"sessionId": s.id, "cwd": s.cwd, "title": s.title or f"Demo session {s.id}"}
                for s in listed
            ]
        }

    async def resume(self, params: Params) -> Params:
        session = self._session(params)
        replay = params.get("replayFrom") or {}
        if replay.get("type") == "start":
            for update in session.history:
                await self._notify(session, update, record=False)
        return {"configOptions": self._config(session)}

    async def fork(self, params: Params) -> Params:
        """A new session with the history and settings of ``sessionId``, up to and
        with the message its ``_meta`` names (a fork at a message)."""
        parent = self._session(params)
        cwd = params.get("cwd", "")
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params("cwd must be an absolute path")
        history = list(parent.history)
        point = fork_point(params)
        if point is not None:
            ends = [i for i, u in enumerate(history) if u.get("messageId") == point]
            if not ends:
                raise RequestError.invalid_params(f"no message {point!r} in {parent.id}")
            history = history[: ends[-1] + 1]
        session = _Session(f"demo-{len(self.sessions) + 1}", cwd, history)
        session.mcp_servers = params.get("mcpServers") or []
        session.config, session.suggestions = dict(parent.config), parent.suggestions
        self.sessions[session.id] = session
        self.tasks.start_soon(self._send_commands, session)
        return {"sessionId": session.id, "configOptions": self._config(session)}

    async def steer(self, params: Params) -> Params:
        """``_session/steering``: the message joins the running turn (the reply stops
        at its next paragraph and answers it), else the client is to send it as a
        prompt."""
        session = self._session(params)
        if session.turn is None:
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        session.steering.append(typed(params.get("prompt") or []))
        return {"outcome": "injected"}

    async def close(self, params: Params) -> Params:
        session = self._session(params)
        if session.turn is not None:
            session.turn.cancel()
        return {}

    async def delete(self, params: Params) -> Params:
        session = self._session(params)
        del self.sessions[session.id]
        return {}

    async def set_config_option(self, params: Params) -> Params:
        session = self._session(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id == "suggest":
            if not isinstance(value, bool):
                raise RequestError.invalid_params("suggest takes a boolean")
            session.suggestions = value
            return {"configOptions": self._config(session)}
        allowed = {"mode": MODES, "model": MODELS, "thought": _THOUGHT}.get(str(config_id))
        if allowed is None or value not in {v for v, _ in allowed}:
            raise RequestError.invalid_params(f"no value {value!r} for {config_id!r}")
        session.config[str(config_id)] = str(value)
        return {"configOptions": self._config(session)}

    async def login(self, params: Params) -> Params:
        return {}

    def _config(self, session: _Session) -> list[Params]:
        def select(
            config_id: str, name: str, category: str, values: list[tuple[str, str]]
        ) -> Params:
            return {
                "type": "select",
                "configId": config_id,
                "name": name,
                "category": category,
                "currentValue": session.config[config_id],
                "options": [{"value": v, "name": n} for v, n in values],
            }

        return [
            select("mode", "Mode", "mode", MODES),
            select("model", "Model", "model", MODELS),
            select("thought", "Thinking", "thought_level", _THOUGHT),
            {
                "type": "boolean",
                "configId": "suggest",
                "name": "Suggest follow-ups",
                "currentValue": session.suggestions,
            },
        ]

    # -- turns

    async def cancel(self, params: Params) -> None:
        session = self.sessions.get(params.get("sessionId", ""))
        if session is not None and session.turn is not None:
            session.turn.cancel()

    async def prompt(self, params: Params) -> Params:
        session = self._session(params)
        if session.turn is not None:
            raise RequestError.invalid_request("a turn is already running")
        text = typed(params.get("prompt", []))
        words = prompt_words(text)
        if "fail" in words:
            raise RequestError.internal("the demo agent was asked to fail")
        session.turn = anyio.CancelScope()
        self.tasks.start_soon(self._turn, session, text, words)
        return {}  # accepted; the turn reports itself through session/update

    async def _turn(self, session: _Session, text: str, words: set[str]) -> None:
        assert session.turn is not None
        with session.turn:
            n = next(self._ids)
            await self._notify(
                session,
                {
                    "sessionUpdate": "user_message",
                    "messageId": f"user-{n}",
                    "content": [{"type": "text", "text": text}],
                },
            )
            await self._state(session, "running")
            if session.title is None:
                session.title = text[:40]
                info = {"sessionUpdate": "session_info_update", "title": session.title}
                await self._notify(session, info, record=False)
            await self._stream(session, "agent_thought_chunk", f"thought-{n}", thought(text))
            if "crash" in words:
                await self._stream(session, "agent_message_chunk", f"reply-{n}", "Crashing now…")
                os._exit(3)
            for word, feature in (
                ("tool", self._tool),
                ("diff", self._diff),
                ("terminal", self._terminal),
                ("plan", self._plans),
                ("fix", self._fix),
                ("permission", self._ask),
                ("unknown", self._unknown),
            ):
                if word in words:
                    await feature(session, n)
            if words & set(EDITOR_WORDS):
                await self._ask_editor(session, n, words)
            if "compact" in words:
                await self._compact(session, n)
            await self._stream(
                session, "agent_message_chunk", f"reply-{n}", self._reply(text, words)
            )
            answered = 0
            while session.steering:  # taken as it answers: one joining meanwhile too
                steered = steered_reply(session.steering.pop(0))
                key = f"steered-{n}-{answered}"
                await self._stream(session, "agent_message_chunk", key, steered)
                answered += 1
        stop = "cancelled" if session.turn.cancel_called else "end_turn"
        session.turn = None
        session.steering.clear()
        with anyio.CancelScope(shield=True):
            session.used += 1000 + 4 * len(text)
            session.billed += 1000 + 4 * len(text)
            await self._notify(session, usage_update(session.used, session.billed), record=False)
            await self._state(session, "idle", stop)

    async def _compact(self, session: _Session, n: int) -> None:
        """Compact the context: a compaction and a notice; the context meter drops."""
        for update in compaction_updates(f"compact-{n}"):
            await self._notify(session, update)
            await anyio.sleep(self.delay)
        session.used //= 4
        await self._notify(session, COMPACTED_NOTICE, record=False)

    def _reply(self, text: str, words: set[str]) -> str:
        return HELP_V2 if "help" in words else reply(text, words)

    async def _tool(self, session: _Session, n: int) -> None:
        call = f"read-{n}"
        await self._update(
            session,
            {"toolCallId": call, "title": "Read notes.txt", "kind": "read", "status": "pending"},
        )
        await self._update(session, {"toolCallId": call, "status": "in_progress"})
        for piece in ("first line of notes", "second line of notes"):
            await self._notify(
                session,
                {
                    "sessionUpdate": "tool_call_content_chunk",
                    "toolCallId": call,
                    "content": {"type": "content", "content": {"type": "text", "text": piece}},
                },
            )
        await self._update(session, {"toolCallId": call, "status": "completed"})

    async def _diff(self, session: _Session, n: int) -> None:
        d = session.cwd
        changes = [
            {"operation": "modify", "path": f"{d}/src/config.json", "fileType": "text"},
            {"operation": "add", "path": f"{d}/NEWS.md", "fileType": "text"},
            {"operation": "delete", "path": f"{d}/old.txt", "fileType": "text"},
            {"operation": "move", "oldPath": f"{d}/a.md", "path": f"{d}/b.md"},
            {"operation": "modify", "path": f"{d}/logo.png", "fileType": "binary"},
        ]
        await self._update(
            session,
            {
                "toolCallId": f"edit-{n}",
                "title": "Turn on debug mode",
                "kind": "edit",
                "status": "completed",
                "content": [
                    {
                        "type": "diff",
                        "changes": changes,
                        "patch": {"format": "git_patch", "text": _PATCH.format(d=d)},
                    }
                ],
            },
        )

    async def _terminal(self, session: _Session, n: int) -> None:
        call, term = f"run-{n}", f"term-{n}"
        await self._update(
            session,
            {
                "toolCallId": call,
                "title": "Run the tests",
                "kind": "execute",
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": term}],
            },
        )
        await self._notify(
            session,
            {
                "sessionUpdate": "terminal_update",
                "terminalId": term,
                "command": "make test",
                "cwd": session.cwd,
            },
        )
        # Split inside "é" and inside a colour escape: the client must keep state.
        data = "running 3 tests\n\x1b[32mpassed\x1b[0m: café ✓\n".encode()
        cut1, cut2 = data.index(b"\x1b[32m") + 2, data.index("é".encode()) + 1
        for piece in (data[:cut1], data[cut1:cut2], data[cut2:]):
            await self._notify(
                session,
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": term,
                    "data": base64.b64encode(piece).decode(),
                },
            )
        await self._notify(
            session,
            {"sessionUpdate": "terminal_update", "terminalId": term, "exitStatus": {"exitCode": 0}},
        )
        await self._update(session, {"toolCallId": call, "status": "completed"})

    async def _plans(self, session: _Session, n: int) -> None:
        for plan_id, status in ((f"plan-{n}", "in_progress"), (f"checks-{n}", "pending")):
            entries = [
                {"content": "Read the code", "priority": "high", "status": "completed"},
                {"content": "Write the fix", "priority": "medium", "status": status},
            ]
            plan = {"type": "items", "planId": plan_id, "entries": entries}
            await self._notify(session, {"sessionUpdate": "plan_update", "plan": plan})

    async def _fix(self, session: _Session, n: int) -> None:
        mid = f"draft-{n}"
        await self._stream(session, "agent_message_chunk", mid, "The answer is 41.")
        await self._notify(
            session,
            {
                "sessionUpdate": "agent_message",
                "messageId": mid,
                "content": [{"type": "text", "text": "The answer is 42."}],
            },
        )
        await self._stream(session, "agent_message_chunk", mid, " (corrected)")

    async def _ask(self, session: _Session, n: int) -> None:
        await self._state(session, "requires_action")
        options = [
            {"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "no", "name": "Deny", "kind": "reject_once"},
        ]
        params = {
            "sessionId": session.id,
            "title": "Run `rm -rf build`?",
            "description": "The demo agent wants to clean the build directory.",
            "subject": {"type": "command", "command": "rm -rf build", "cwd": session.cwd},
            "options": options,
        }
        try:
            answer = msgspec.json.decode(await self.c.request("session/request_permission", params))
            outcome = answer.get("outcome", {}) if isinstance(answer, dict) else {}
        except RequestError:
            outcome = {}
        # Anything but a selected "yes" is a refusal (unknown outcomes included).
        allowed = outcome.get("outcome") == "selected" and outcome.get("optionId") == "yes"
        await self._state(session, "running")
        verdict = "You allowed it: build cleaned." if allowed else "Not allowed: nothing was run."
        await self._stream(session, "agent_message_chunk", f"verdict-{n}", verdict)

    async def _ask_editor(self, session: _Session, n: int, words: set[str]) -> None:
        call = f"mcp-{n}"
        await self._update(
            session,
            {"toolCallId": call, "title": "Ask the editor (MCP)", "kind": "read",
             "status": "in_progress"},
        )  # fmt: skip
        try:
            answers = await ask_editor(session.mcp_servers, words)
        except (LookupError, OSError, RequestError) as err:
            await self._update(session, {"toolCallId": call, "status": "failed"})
            await self._stream(session, "agent_message_chunk", f"mcp-{n}", str(err))
            return
        await self._update(session, {"toolCallId": call, "status": "completed"})
        text = "\n\n".join(answer for _, answer in answers)
        await self._stream(session, "agent_message_chunk", f"mcp-{n}", text)

    async def _unknown(self, session: _Session, n: int) -> None:
        await self._notify(session, {"sessionUpdate": "_demo_sparkle", "sparkles": n})

    # -- sending

    async def _state(self, session: _Session, state: str, stop: str | None = None) -> None:
        update: Params = {"sessionUpdate": "state_update", "state": state}
        if stop is not None:
            update["stopReason"] = stop
        await self._notify(session, update, record=False)

    async def _update(self, session: _Session, fields: Params) -> None:
        await self._notify(session, {"sessionUpdate": "tool_call_update", **fields})

    async def _stream(self, session: _Session, kind: str, message_id: str, text: str) -> None:
        for piece in until_steered(text, lambda: bool(session.steering)):
            update = {
                "sessionUpdate": kind,
                "messageId": message_id,
                "content": {"type": "text", "text": piece},
            }
            await self._notify(session, update)
            # A checkpoint even without delay, so a cancel can land mid-stream.
            await anyio.sleep(self.delay)

    async def _notify(self, session: _Session, update: Params, *, record: bool = True) -> None:
        if record:
            session.history.append(update)
        await self.c.notify("session/update", {"sessionId": session.id, "update": update})
