"""The "rewind" agents: sessions of their own, forks at a message, steering, compaction.

Not the shared handshake (one session ``fake-1``): this agent opens a session per
session/new or fork (``s1``, ``s2``, ...), as going back (issue 23) needs. Its
scenarios differ by the flags in their names.
"""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from acp_nvim.demo_agent._mcp import editor_server, mcp_session
from acp_nvim.protocol import Connection, RequestError
from tests.fakes.handshake import Params, Scenario, v2_diff

Handler = Callable[[Params], Awaitable[Params]]


class Rewind:
    """The "rewind" scenarios, over v1 and v2: sessions of their own, each turn's
    messages with ids, usage reports, and every request recorded as a JSON line in
    the file $FAKE_CALLS (a prompt carries a whole conversation: too long to say).

    A prompt ``write NAME TEXT`` writes TEXT to NAME in the session's directory (on
    disk, reported as a tool call); ``hold`` waits for a cancel or a steering
    message (``hold code`` in an open code block); ``ask`` asks a permission (v1, see
    :meth:`ask`); ``compact`` compacts the context and sends a notice, ``uncompact``
    then clears that compaction's summary and fails another whose error it clears
    (``null`` patches); anything else is echoed. Usage is reported as 1234 tokens and $0.05 a turn the session holds (a
    fork at a message holds the parent's turns up to it). Flags after ``+``: ``plain``
    forks only whole sessions (no fork at a
    message), ``steer`` advertises ``_session/steering`` (with ``late`` a held turn
    ends as a steering message comes, answered ``promptRequired``; with ``broken`` every
    steering request fails), ``embed`` takes embedded
    context, ``resume`` resumes any session it is named (``session/resume``), ``nofork`` answers
    every fork with an error, ``exclusive`` advertises forks at a message that drop
    the message named (``inclusive: false``), ``echo`` echoes each prompt whole (every
    block, as v2 agents acknowledge it, and v1 ones may), ``deaf`` records a cancel and
    never acts on it, ``release`` ends a held turn (`` done``) once the test opens the
    named pipe ``release`` in the session's directory for writing and closes it, ``mcp``
    has a held turn that goes on (``late``, ``release``) first run ``true`` with the
    editor's MCP tool ``run_command``, over the stdio server offered with that session,
    and record the result as ``mcp``, ``write`` has it write ``late.txt`` then, ``busy``
    (v2) has a held turn report itself ``running``, then ``requires_action`` with a
    permission request (its answer recorded as ``answered``), once cancelled, ``load``
    loads (v1 ``session/load``; v2 resumes with ``replayFrom``) a session it never ran
    by replaying two turns (``one``, ``two``) with message ids (with ``attach``, v2
    only: ``one`` a whole ``user_message`` carrying a link to ``a.py``; with ``after``,
    v2 only, once it has answered the resume, as the schema allows). $FAKE_FAULT
    makes it crash or hang at a request (:func:`fault`).
    """

    def __init__(
        self,
        connection: Connection,
        send: anyio.abc.ByteSendStream,
        scenario: Scenario,
        tasks: anyio.abc.TaskGroup,
    ) -> None:
        self.c = connection
        self.flags = set(scenario.name.split("+")[1:])
        self.tasks = tasks
        self.version = 1
        self.cwd: dict[str, str] = {}  # by session
        self.turns: dict[str, int] = {}  # turns run, by session
        self.steered: dict[str, anyio.Event] = {}  # sessions whose turn holds
        self.steering: dict[str, str] = {}
        self.asking: set[str] = set()  # sessions whose turn asks (see ask)
        self.cancelled: dict[str, anyio.Event] = {}
        self.held_ended: dict[str, anyio.Event] = {}  # "deaf+late": set once that turn ended
        self.sessions = 0
        self.servers: dict[str, list[Params]] = {}  # the MCP servers offered, by session
        self.client: Params = {}
        connection.on_request("initialize", dict, self.initialize)
        for method, handler in (("session/new", self.new_session), ("session/fork", self.fork),
                                ("session/prompt", self.prompt), ("_session/steering", self.steer),
                                ("session/resume", self.resume), ("session/load", self.load)):
            connection.on_request(method, dict, self.recorded(method, handler))
        connection.on_notification("session/cancel", dict, self.cancel)

    def recorded(self, method: str, handler: Handler) -> Handler:
        async def record(params: Params) -> Params:
            with open(os.environ["FAKE_CALLS"], "a") as f:
                f.write(json.dumps([method, params]) + "\n")
            await fault(method)
            return await handler(params)

        return record

    async def initialize(self, params: Params) -> Params:
        self.version = 2 if params.get("protocolVersion") == 2 else 1
        self.client = params.get("capabilities" if self.version == 2 else "clientCapabilities", {})
        inclusive = "exclusive" not in self.flags
        meta = {} if "plain" in self.flags else {"jetbrains": {"air": {"fork": {"version": 1, "inclusive": inclusive}}}}
        prompt: Params = {"embeddedContext": True} if "embed" in self.flags else {}
        result: Params = {"_meta": {"steering": {"supported": True}}} if "steer" in self.flags else {}
        sessions: Params = {"fork": {}, **({"resume": {}} if "resume" in self.flags else {})}
        if self.version == 2:
            prompt = {k: {} for k in prompt}
            mcp: Params = {"mcp": {"stdio": {}}} if "mcp" in self.flags else {}
            caps: Params = {"session": {**sessions, "prompt": prompt, **mcp}, "_meta": meta}
            return {**result, "protocolVersion": 2, "info": {"name": "fake", "version": "0"},
                    "capabilities": caps}
        v1_caps: Params = {"sessionCapabilities": sessions, "promptCapabilities": prompt,
                           "_meta": meta, "loadSession": "load" in self.flags}
        return {**result, "protocolVersion": 1, "agentInfo": {"name": "fake", "version": "0"},
                "agentCapabilities": v1_caps}  # fmt: skip

    def open(self, cwd: str) -> str:
        self.sessions += 1
        session = f"s{self.sessions}"
        self.cwd[session], self.turns[session] = cwd, 0
        return session

    async def new_session(self, params: Params) -> Params:
        session = self.open(params["cwd"])
        self.servers[session] = params.get("mcpServers") or []
        return {"sessionId": session}

    async def resume(self, params: Params) -> Params:
        session = params["sessionId"]
        self.sessions = max(self.sessions, int(session[1:]))  # its next ones: new ids
        stored = json.loads(self.store.read_text()) if self.store and self.store.exists() else {}
        self.cwd[session] = params["cwd"]
        if "replayFrom" in params and "after" in self.flags:  # once the answer is written
            self.tasks.start_soon(self.replay_after, session, session not in self.turns)
        elif "replayFrom" in params:
            await self.replay(session)
        self.turns[session] = self.turns.get(session, stored.get(session, 0))
        return {}

    async def load(self, params: Params) -> Params:
        self.cwd[params["sessionId"]] = params["cwd"]
        await self.replay(params["sessionId"])
        return await self.resume(params)

    @property
    def said(self) -> Path:
        """``load``: the messages of each session it ran, as it would replay them (the
        steered ones as the user's), kept across its processes."""
        return Path(os.environ["FAKE_CALLS"] + ".said")

    def keep(self, session: str, update: Params) -> None:
        if "load" in self.flags:
            said = json.loads(self.said.read_text()) if self.said.exists() else {}
            said.setdefault(session, []).append(update)
            self.said.write_text(json.dumps(said))

    async def replay(self, session: str, fresh: bool | None = None) -> None:
        """``load``: the history of a session it ran, else of one it never ran
        (``fresh``), two turns."""
        said = json.loads(self.said.read_text()) if self.said.exists() else {}
        if "load" in self.flags and session in said:
            for update in said[session]:
                await self.update(session, update)
        elif "load" in self.flags and (session not in self.turns if fresh is None else fresh):
            replayed = []  # kept once replayed whole: a crash in it keeps none
            for n, text in enumerate(("one", "two"), 1):
                self.turns[session] = n
                if "attach" in self.flags and n == 1:  # a v2 user_message with a file
                    link = {"type": "resource_link", "name": "a.py",
                            "uri": "file://" + os.path.join(self.cwd[session], "a.py")}
                    content = [{"type": "text", "text": text}, link]
                    await self.update(session, {"sessionUpdate": "user_message",
                                                "messageId": f"{session}-u{n}", "content": content})  # fmt: skip
                else:
                    replayed.append(await self.say(session, text, "user_message_chunk"))
                replayed.append(await self.say(session, f"{session}: {text}", keep=False))
                await fault("replay")  # after the first turn replayed
            for update in replayed:
                self.keep(session, update)

    async def replay_after(self, session: str, fresh: bool) -> None:
        await anyio.wait_all_tasks_blocked()  # the resume's answer is on its way
        await self.replay(session, fresh)

    @property
    def store(self) -> Path | None:
        """Where ``store`` keeps the turns each session ran (None without it)."""
        return Path(os.environ["FAKE_CALLS"] + ".sessions") if "store" in self.flags else None

    async def fork(self, params: Params) -> Params:
        if "nofork" in self.flags:
            raise RequestError(-32603, "Internal error: fork failed")
        session = self.open(params["cwd"])
        self.servers[session] = params.get("mcpServers") or []
        self.turns[session] = self.turns.get(params["sessionId"], 0)
        point = params.get("_meta", {}).get("jetbrains", {}).get("air", {}).get("fork")
        if point is not None and "plain" not in self.flags:  # up to message ``sN-mK`` / ``sN-uK``
            # Turns 1 to K kept; "exclusive" drops the message named too (K - 1 whole ones).
            kept = int(point["messageId"].rsplit("-", 1)[1][1:])
            self.turns[session] = kept - ("exclusive" in self.flags)
        return {"sessionId": session}

    async def update(self, session: str, update: Params) -> None:
        await self.c.notify("session/update", {"sessionId": session, "update": update})

    async def say(
        self, session: str, text: str, kind: str = "agent_message_chunk", keep: bool = True
    ) -> Params:
        n = self.turns[session]
        prefix = "u" if kind == "user_message_chunk" else "m"
        content = {"type": "text", "text": text}
        update = {"sessionUpdate": kind, "messageId": f"{session}-{prefix}{n}", "content": content}
        await self.update(session, update)
        if kind == "agent_message_chunk" and keep:
            self.keep(session, update)
        return update

    def kept_user(self, session: str, text: str, message_id: str) -> None:
        self.keep(session, {"sessionUpdate": "user_message_chunk", "messageId": message_id,
                            "content": {"type": "text", "text": text}})  # fmt: skip

    async def prompt(self, params: Params) -> Params:
        if self.version == 2:
            self.tasks.start_soon(self.turn, params)
            return {}
        return {"stopReason": await self.turn(params)}

    async def turn(self, params: Params) -> str:
        session = params["sessionId"]
        self.turns[session] += 1
        if self.store is not None:
            self.store.write_text(json.dumps(self.turns))
        # The words said last (a v2 prompt's attachments come after them).
        text = [block["text"] for block in params["prompt"] if block["type"] == "text"][-1]
        self.kept_user(session, text, f"{session}-u{self.turns[session]}")
        stop = "end_turn"
        if {"deaf", "late"} <= self.flags:  # the turn it never cancelled goes on, and ends
            for held in [s for s in self.steered if s != session]:
                ended = self.held_ended[held] = anyio.Event()
                self.steered[held].set()
                await ended.wait()
        if "echo" in self.flags:  # the prompt as it went into the history, every block
            for block in params["prompt"]:
                await self.update(session, {"sessionUpdate": "user_message_chunk", "content": block,
                                            "messageId": f"{session}-u{self.turns[session]}"})  # fmt: skip
        elif self.version == 2:
            await self.say(session, text, "user_message_chunk")
        if text.startswith("write "):
            _, name, content = text.split(" ", 2)
            await self.write(session, name, content)
        elif text.startswith("bytes "):  # bytes written, the tool call's v2 patch naming them
            _, name, data = text.split(" ", 2)
            path = os.path.join(self.cwd[session], name)
            operation = "modify" if os.path.exists(path) else "add"
            with open(path, "wb") as f:
                f.write(bytes.fromhex(data))
            call = {"toolCallId": f"{session}-b{self.turns[session]}", "title": f"Write {name}"}
            said = f"diff --git a/{name} b/{name}\nBinary files a/{name} and b/{name} differ\n"
            diff = {"type": "diff", "changes": [{"operation": operation, "path": path}],
                    "patch": {"format": "git_patch", "text": said}}
            await self.update(session, {"sessionUpdate": "tool_call_update", **call, "kind": "edit",
                                        "status": "completed", "content": [diff]})  # fmt: skip
            await self.say(session, f"wrote {name}")
        elif text in ("hold", "hold code"):
            # "hold code": the message waits in an open code block.
            # Waiting before it says so: a cancel read while "holding" is written is kept.
            self.steered[session], self.cancelled[session] = anyio.Event(), anyio.Event()
            await self.say(session, "```py\nx = 1\n" if text == "hold code" else "holding")
            async with anyio.create_task_group() as waits:
                for event in (self.steered[session], self.cancelled[session]):
                    waits.start_soon(self.until, event, waits)
                if "release" in self.flags:
                    waits.start_soon(self.released, session, waits)
            del self.steered[session]
            if self.cancelled.pop(session).is_set():
                stop = "cancelled"
                if "busy" in self.flags:  # a tool still running as the cancel came
                    await self.busy(session)
            elif session not in self.steering:  # "late": the turn ended first
                if "mcp" in self.flags:
                    await self.run_true(session)
                if "write" in self.flags:  # a tool that goes on after the cancel
                    await self.write(session, "late.txt", "late")
                await self.say(session, " done")
            elif text == "hold code":
                await self.say(session, f"y = 2\n```\nsteered: {self.steering.pop(session)}")
            else:
                await self.say(session, f" steered: {self.steering.pop(session)}")
        elif text.startswith("title "):  # the session titled by its first words
            await self.update(session, {"sessionUpdate": "session_info_update", "title": text[6:]})
            await self.say(session, f"{session}: {text}")
        elif text == "ask":
            await self.ask(session)
        elif text == "compact":
            await self.compact(session)
        elif text == "uncompact":
            await self.uncompact(session)
        else:
            await self.say(session, f"{session}: {text}")
        n = self.turns[session]
        await self.update(session, {"sessionUpdate": "usage_update", "used": 1234 * n, "size": 200000,
                                    "cost": {"amount": 0.05 * n, "currency": "USD"}})  # fmt: skip
        if self.version == 2:
            await self.update(session, {"sessionUpdate": "state_update", "state": "idle",
                                        "stopReason": stop})  # fmt: skip
        if session in self.held_ended:
            self.held_ended.pop(session).set()
        return stop

    async def write(self, session: str, name: str, content: str) -> None:
        """Write ``content`` to ``name`` in the session's directory, as a tool call."""
        path = os.path.join(self.cwd[session], name)
        old = Path(path).read_text() if os.path.exists(path) else None
        call = {"toolCallId": f"{session}-w{self.turns[session]}", "title": f"Write {name}"}
        kind = "tool_call_update" if self.version == 2 else "tool_call"
        await self.update(session, {"sessionUpdate": kind, **call, "kind": "edit", "name": "Write",
                                    "status": "in_progress", "locations": [{"path": path}]})
        with open(path, "w") as f:
            f.write(content + "\n")
        diff: dict[str, Any] = {"type": "diff", "path": path, "oldText": old,
                                "newText": content + "\n"}
        if self.version == 2:
            diff = v2_diff(path, old, content + "\n")
        await self.update(session, {"sessionUpdate": "tool_call_update", **call,
                                    "status": "completed", "content": [diff]})  # fmt: skip
        await self.say(session, f"wrote {name}")

    @staticmethod
    async def until(event: anyio.Event, group: anyio.abc.TaskGroup) -> None:
        await event.wait()
        group.cancel_scope.cancel()

    async def released(self, session: str, group: anyio.abc.TaskGroup) -> None:
        pipe = os.path.join(self.cwd[session], "release")
        await anyio.to_thread.run_sync(lambda: open(pipe, "rb").read(), abandon_on_cancel=True)  # noqa: SIM115
        group.cancel_scope.cancel()

    async def run_true(self, session: str) -> None:
        """``mcp``: run ``true`` with the editor's ``run_command`` over the server offered
        with ``session``; the result goes to $FAKE_CALLS as ``["mcp", result]``."""
        server = editor_server(self.servers[session])
        assert server is not None, "no editor MCP server offered"
        async with mcp_session(server) as mcp:
            call = {"name": "run_command", "arguments": {"command": "true"}}
            result = await mcp.request("tools/call", call, dict)
        with open(os.environ["FAKE_CALLS"], "a") as f:
            f.write(json.dumps(["mcp", result]) + "\n")

    async def ask(self, session: str) -> None:
        """Ask to delete notes; say the answer at once (a fast agent), then what was
        steered in by then or within 5 s. A steer takes 0.2 s meanwhile: what the
        agent says once answered comes before its ``injected``."""
        self.steered[session] = anyio.Event()
        self.asking.add(session)
        call = {"toolCallId": f"{session}-d{self.turns[session]}", "title": "Delete notes",
                "kind": "delete"}
        options = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}]
        answer = await self.c.request("session/request_permission", {"sessionId": session,
                                      "toolCall": call, "options": options}, dict)  # fmt: skip
        await self.say(session, f"answered {answer['outcome'].get('optionId')}\n")
        with anyio.move_on_after(5):
            await self.steered[session].wait()
        del self.steered[session]
        self.asking.discard(session)
        if session in self.steering:
            await self.say(session, f"steered: {self.steering.pop(session)}")

    async def busy(self, session: str) -> None:
        for state in ("running", "requires_action"):
            await self.update(session, {"sessionUpdate": "state_update", "state": state})
        options = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]
        answer = await self.c.request("session/request_permission", {"sessionId": session, "title": "Run it",
                                      "options": options}, dict)  # fmt: skip
        with open(os.environ["FAKE_CALLS"], "a") as f:
            f.write(json.dumps(["answered", answer]) + "\n")
        await self.update(session, {"sessionUpdate": "state_update", "state": "running"})

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

    async def uncompact(self, session: str) -> None:
        """Patches with ``null`` (the contract: null clears, omission leaves): c1's
        summary is cleared; c2 fails with an error that a later patch clears."""
        update = {"sessionUpdate": "compaction_update"}
        await self.update(session, {**update, "compactionId": "c1", "status": "completed",
                                    "summary": None})  # fmt: skip
        await self.update(session, {**update, "compactionId": "c2", "status": "failed",
                                    "error": "summariser busy"})  # fmt: skip
        await self.update(session, {**update, "compactionId": "c2", "status": "failed",
                                    "error": None})  # fmt: skip
        await self.say(session, "uncompacted")

    async def steer(self, params: Params) -> Params:
        session = params["sessionId"]
        if session not in self.steered:
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        if "broken" in self.flags:
            raise RequestError(-32603, "Internal error: steering broke")
        if "late" in self.flags:  # the turn ends as the message comes: too late for it
            self.steered[session].set()
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        if session in self.asking:
            await anyio.sleep(0.2)
        self.steering[session] = params["prompt"][-1]["text"]
        self.kept_user(session, self.steering[session], f"{session}-s{self.turns[session]}")
        self.steered[session].set()
        return {"outcome": "injected"}

    async def cancel(self, params: Params) -> None:
        with open(os.environ["FAKE_CALLS"], "a") as f:
            f.write(json.dumps(["session/cancel", params]) + "\n")
        event = self.cancelled.get(params["sessionId"])
        if event is not None and "deaf" not in self.flags:
            event.set()


async def fault(at: str) -> None:
    """$FAKE_FAULT ``crash:AT`` exits the agent at ``at`` (a method, before it is
    answered, or ``replay``: one turn into a replay), ``hang:AT`` never goes on,
    ``refuse:AT`` answers method ``at`` "Resource not found"."""
    match os.environ.get("FAKE_FAULT", "").split(":", 1):
        case ["crash", where] if where == at:
            os._exit(2)
        case ["refuse", where] if where == at:
            raise RequestError(-32002, "Resource not found")
        case ["hang", where] if where == at:
            await anyio.sleep_forever()


SCENARIOS = tuple(
    Scenario(name, agent=Rewind)
    for name in ("rewind", "rewind+plain", "rewind+plain+embed", "rewind+steer", "rewind+steer+late", "rewind+resume",
                 "rewind+resume+store", "rewind+nofork", "rewind+exclusive",
                 "rewind+plain+echo", "rewind+plain+embed+echo", "rewind+deaf", "rewind+deaf+late",
                 "rewind+deaf+release", "rewind+deaf+late+mcp", "rewind+deaf+late+write", "rewind+busy", "rewind+steer+release+broken",
                 "rewind+resume+load", "rewind+resume+load+attach", "rewind+resume+load+after",
                 "rewind+steer+resume+load", "rewind+deaf+steer", "rewind+deaf+resume")
)
