"""The handshake every fake agent shares, and the record that makes a scenario.

`Agent` answers what any agent answers (initialize, session/new, prompt and
cancel over v1 and v2, login, fork, the session methods) the same way for
every scenario; a `Scenario` holds what differs: its capabilities, hooks that
run before a method is answered (a hang, a refusal) and its turn. Nothing here
asks which scenario runs.
"""

from __future__ import annotations

__all__ = [
    "SESSION", "Agent", "Params", "Prompt", "Scenario", "config_options", "echo", "mode_option",
    "v2_diff",
]  # fmt: skip

import difflib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from acp_nvim.protocol import Connection

Params = dict[str, Any]
SESSION = "fake-1"  # the id of the first session/new; the next are fake-2, fake-3, ...


@dataclass(frozen=True)
class Prompt:
    """A session/prompt as a turn sees it."""

    text: str  # the first block's text
    blocks: list[Params]
    session: str


Turn = Callable[["Agent", Prompt], Awaitable["str | None"]]
Hook = Callable[["Agent", Params], Awaitable[None]]
# An agent on a connection: (connection, send stream, its scenario, task group).
AgentType = Callable[
    [Connection, anyio.abc.ByteSendStream, "Scenario", anyio.abc.TaskGroup], object
]


async def echo(agent: Agent, prompt: Prompt) -> None:
    """Says ``echo: TEXT``: the turn of a scenario that has nothing else to say."""
    await agent.say(f"echo: {prompt.text}")


def no_fields(agent: Agent) -> Params:
    return {}


@dataclass(frozen=True)
class Scenario:
    """One fake agent: the shared handshake plus these differences.

    ``turn`` runs each prompt and returns its stop reason (None: ``end_turn``).
    ``capabilities`` are the v1 ``agentCapabilities``; ``v2`` the v2 session
    capabilities, None for an agent that answers a v2 offer with v1. ``session``
    gives the extra fields of session/new and session/resume answers. ``before``
    maps a method to a hook run before the handshake answers it: it may hang,
    raise a RequestError, or record. ``stays``: the process outlives its stdin.
    ``agent``: another agent than this handshake's `Agent` (the rewind agents,
    whose sessions are their own), given the same arguments.
    """

    name: str
    turn: Turn = echo
    capabilities: Params = field(default_factory=dict)
    v2: Params | None = None
    protocol_version: int = 1
    auth_methods: tuple[Params, ...] = ()
    session: Callable[[Agent], Params] = no_fields
    before: Mapping[str, Hook] = field(default_factory=dict)
    stays: bool = False
    agent: AgentType | None = None


def config_options(approval: str) -> list[Params]:
    """An approval setting as a config option (v1 shape), set to ``approval``."""
    return [
        {
            "type": "select",
            "id": "approval",
            "name": "Approval",
            "category": "mode",
            "currentValue": approval,
            "options": [{"value": "auto", "name": "Auto"}, {"value": "ask", "name": "Ask"}],
        }
    ]


def mode_option(version: int, mode: str) -> list[Params]:
    """A mode setting as a config option, its id named as ``version`` names it."""
    key = "configId" if version == 2 else "id"
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


# Session methods every fake answers; each call is recorded in `Agent.calls`.
RECORDED = (
    "session/set_mode",
    "session/set_model",
    "session/set_config_option",
    "session/list",
    "session/load",
    "session/resume",
    "session/close",
    "session/delete",
    "session/fork",
)


class Agent:
    """A fake agent on one connection, running ``scenario``."""

    def __init__(
        self,
        connection: Connection,
        send: anyio.abc.ByteSendStream,
        scenario: Scenario,
        tasks: anyio.abc.TaskGroup,
    ) -> None:
        self.c = connection
        self.send = send  # for writing bytes no Connection would write
        self.scenario = scenario
        self.tasks = tasks
        self.init_params: Params = {}  # the client's initialize
        self.mcp_servers: list[Params] = []  # of the last session/new
        self.cancelled = anyio.Event()
        self.authenticated = False
        self.version = 1  # 2 where the client offers it and the scenario speaks it
        self.turns = 0  # prompts taken
        self.prompted = SESSION  # what a turn says goes to the session prompted
        self.sessions = 0  # session/new answered
        self.calls: list[list[Any]] = []  # [method, params] of the RECORDED methods
        handlers: dict[str, Callable[[Params], Awaitable[Params]]] = {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "authenticate": self.authenticate,
            "logout": self.logout,
            "auth/login": self.authenticate,  # v2's names
            "auth/logout": self.logout,
            **{method: self.recorder(method) for method in RECORDED},
        }
        for method, handler in handlers.items():
            connection.on_request(method, dict, self.hooked(method, handler))
        connection.on_notification("session/cancel", dict, self.cancel)

    def hooked(
        self, method: str, handler: Callable[[Params], Awaitable[Params]]
    ) -> Callable[[Params], Awaitable[Params]]:
        hook = self.scenario.before.get(method)
        if hook is None:
            return handler

        async def answer(params: Params) -> Params:
            await hook(self, params)
            return await handler(params)

        return answer

    async def initialize(self, params: Params) -> Params:
        self.init_params = params
        scenario = self.scenario
        if params.get("protocolVersion") == 2 and scenario.v2 is not None:
            self.version = 2
            answer: Params = {
                "protocolVersion": 2,
                "info": {"name": "fake", "version": "0"},
                "capabilities": {"session": scenario.v2},
            }
            if scenario.auth_methods:
                answer["authMethods"] = [v2_login(method) for method in scenario.auth_methods]
            return answer
        result: Params = {
            "protocolVersion": scenario.protocol_version,
            "agentInfo": {"name": "fake", "version": "0"},
        }
        if scenario.capabilities:
            result["agentCapabilities"] = scenario.capabilities
        if scenario.auth_methods:
            result["authMethods"] = list(scenario.auth_methods)
        return result

    async def new_session(self, params: Params) -> Params:
        self.mcp_servers = params.get("mcpServers") or []
        self.sessions += 1  # each its own id, as a real agent's (the client refuses a taken one)
        return {"sessionId": f"fake-{self.sessions}", **self.scenario.session(self)}

    async def authenticate(self, params: Params) -> Params:
        self.authenticated = params.get("methodId") == "browser"
        return {}

    async def logout(self, params: Params) -> Params:
        self.authenticated = False
        return {}

    def recorder(self, method: str) -> Callable[[Params], Awaitable[Params]]:
        async def record(params: Params) -> Params:
            self.calls.append([method, params])
            match method:
                case "session/set_config_option":
                    return {"configOptions": config_options(params["value"])}
                case "session/list":
                    return session_page(params.get("cursor"))
                case "session/load":
                    session = params["sessionId"]
                    await self.say("an old question", "user_message_chunk", session)
                    await self.say("an old answer", session=session)
                case "session/resume":  # this agent does not keep a session's mode
                    return self.scenario.session(self)
                case "session/fork":  # the fork is in mode "plan"
                    # Its id is fork-N, or $FAKE_FORK_ID (an agent that answers a taken one).
                    forks = sum(1 for called, _ in self.calls if called == method)
                    return {
                        "sessionId": os.environ.get("FAKE_FORK_ID") or f"fork-{forks}",
                        "configOptions": mode_option(self.version, "plan"),
                    }
            return {}

        return record

    async def cancel(self, params: Params) -> None:
        self.cancelled.set()

    async def until_cancelled(self) -> str:
        """Wait for session/cancel, ready for the next; returns the stop reason."""
        await self.cancelled.wait()
        self.cancelled = anyio.Event()
        return "cancelled"

    async def prompt(self, params: Params) -> Params:
        prompt = Prompt(params["prompt"][0]["text"], params["prompt"], params["sessionId"])
        self.prompted = prompt.session
        self.turns += 1
        if self.version == 1:
            return {"stopReason": await self.scenario.turn(self, prompt) or "end_turn"}
        # v2: the prompt is only accepted; the turn reports itself and ends idle.
        self.tasks.start_soon(self.v2_turn, prompt)
        return {}

    async def v2_turn(self, prompt: Prompt) -> None:
        stop = await self.scenario.turn(self, prompt) or "end_turn"
        await self.update(self.idle(prompt, stop), prompt.session)

    def idle(self, prompt: Prompt, stop: str) -> Params:
        """The v2 ``state_update`` that ends the turn ``prompt`` began."""
        return {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop}

    async def update(self, update: Params, session: str | None = None) -> None:
        """A session update to ``session`` (default: the one prompted last)."""
        params = {"sessionId": session or self.prompted, "update": update}
        await self.c.notify("session/update", params)

    async def say(
        self, text: str, kind: str = "agent_message_chunk", session: str | None = None
    ) -> None:
        """A text chunk (a message of this turn's id over v2), to ``session`` (default:
        the one prompted last)."""
        update: Params = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if self.version == 2:
            update["messageId"] = f"m{self.turns}"
        await self.update(update, session)

    async def result(self, value: Any) -> None:
        """Say ``RESULT <json>``, the line the scripted scenarios answer with."""
        await self.say("RESULT " + json.dumps(value) + "\n\n")  # a paragraph each


def v2_login(method: Params) -> Params:
    """A v1 login method as v2 names it: ``methodId``, a ``type`` tag, env as a list."""
    v2: Params = {"type": "agent", **method, "methodId": method["id"]}
    del v2["id"]
    if isinstance(method.get("env"), dict):
        v2["env"] = [{"name": name, "value": value} for name, value in method["env"].items()]
    return v2


def v2_diff(path: str, old: str | None, new: str) -> Params:
    """A v2 diff of ``path`` from ``old`` (None: a new file) to ``new``: the change
    and its git patch."""
    patch = difflib.unified_diff((old or "").splitlines(True), new.splitlines(True),
                                 "/dev/null" if old is None else path, path)  # fmt: skip
    operation = "add" if old is None else "modify"
    return {"type": "diff", "changes": [{"operation": operation, "path": path}],
            "patch": {"format": "git_patch", "text": f"diff --git {path} {path}\n" + "".join(patch)}}  # fmt: skip


def session_page(cursor: str | None) -> Params:
    """session/list: two pages of one old session each; the second titled
    $FAKE_SECOND_TITLE if set."""
    if cursor is None:
        return {"sessions": [{"sessionId": "old-1", "cwd": "/p", "title": "First"}],
                "nextCursor": "page2"}  # fmt: skip
    title = os.environ.get("FAKE_SECOND_TITLE", "Second")
    return {"sessions": [{"sessionId": "old-2", "cwd": "/p", "title": title}]}
