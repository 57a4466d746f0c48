"""A scripted agent in the test's own event loop, behind the real App.

``MemoryAgent`` plays an ACP agent (v1 or v2) over in-memory pipes: it answers
``initialize`` and ``session/new`` (or sends the raw lines a test gives instead),
sends each turn's raw lines before ending the turn, and answers a later turn with
a plain reply. ``app_with(agent)`` runs the real :class:`App` on it: the agent
process is swapped for the pipes, nothing else. ``watchdog()`` fails a test
whose event loop stops running (a blocking call on it); the test's own timeout
(``anyio.fail_after``) catches a loop that runs but never gets anywhere.

Request ids the client uses: ``initialize`` 0, ``session/new`` 1, then each
prompt 2, 3, ... (as the issue's repros name them).
"""

from __future__ import annotations

import json
import math
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from acp_nvim.client.agent import connection as connection_module
from acp_nvim.client.agent.process import AgentProcess
from acp_nvim.client.app import App
from acp_nvim.client.app import _pool as pool_module
from acp_nvim.protocol import ConnectionClosed
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import MemoryByteReceive, MemoryByteSend, Pipes, RawPeer

Line = bytes | str | dict[str, Any]


def line_bytes(line: Line) -> bytes:
    if isinstance(line, dict):
        return json.dumps(line).encode()
    return line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line


def update(body: dict[str, Any], session_id: str = "s1") -> dict[str, Any]:
    """A ``session/update`` notification of session ``s1``."""
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": body},
    }


class MemoryAgent:
    """An ACP agent scripted by raw lines.

    Args:
        version: the protocol version it answers ``initialize`` with.
        turns: raw lines sent in each turn, before the turn ends; turns past the
            list answer ``reply N`` (N counts from 1).
        initialize, new_session, fork: raw lines sent instead of the first proper
            answer (to ``initialize``, ``session/new``, ``session/fork``).
        end_turns: False: a scripted turn ends only through its own lines.
        results: the result of a method, by method (default ``{}``; ``session/new``
            hands out ``s1``, ``s2``, ... in each process).
    """

    def __init__(
        self,
        version: int = 1,
        turns: list[list[Line]] | None = None,
        *,
        initialize: list[Line] | None = None,
        new_session: list[Line] | None = None,
        fork: list[Line] | None = None,
        end_turns: bool = True,
        results: dict[str, Any] | None = None,
    ) -> None:
        self.version = version
        self.turns = turns or []
        self.overrides = {
            "initialize": initialize, "session/new": new_session, "session/fork": fork
        }
        self.end_turns = end_turns
        self.results = results or {}
        self.prompts = 0
        self.received: list[Any] = []  # every message from the client
        self.peer: RawPeer | None = None
        self.synced = 0  # turns whose every line the client has handled
        self.sessions = 0  # made by this process
        self._heard: anyio.Event | None = None  # set by the client's next message

    def answers(self) -> list[Any]:
        """The client's responses to the agent's requests, in order."""
        return [m for m in self.received if isinstance(m, dict) and "method" not in m]

    async def answered(self, *ids: Any) -> None:
        """Until the client has answered each of the requests ``ids``: it runs them at
        once, so its answers come in any order, some after the turn's end."""
        await self._until(lambda: set(ids) <= {answer.get("id") for answer in self.answers()})

    async def wait_synced(self, turns: int) -> None:
        """Until the client handled every line of the first ``turns`` turns: a turn
        may end (an error answer) before the agent has sent all of it."""
        await self._until(lambda: self.synced >= turns)

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Until ``condition()`` holds, checked as each message of the client's comes."""
        while not condition():
            if self._heard is None:
                self._heard = anyio.Event()
            await self._heard.wait()

    async def run(self, peer: RawPeer) -> None:
        self.peer = peer
        self.sessions = 0
        while True:
            try:
                message = await peer.receive_json()
            except ConnectionClosed:
                return
            self.received.append(message)
            if self._heard is not None:
                self._heard.set()
                self._heard = None
            method = message.get("method") if isinstance(message, dict) else None
            if method is not None and "id" in message:
                await self._answer(method, message["id"], message.get("params") or {})
            elif isinstance(message, dict) and str(message.get("id")).startswith("sync-"):
                self.synced = int(message["id"][5:])

    async def send(self, *lines: Line) -> None:
        assert self.peer is not None
        for line in lines:
            await self.peer.send_line(line_bytes(line))

    async def _answer(self, method: str, msg_id: Any, params: dict[str, Any]) -> None:
        override = self.overrides.pop(method, None)  # once: a later chat starts afresh
        if override is not None:
            await self.send(*override)
            return
        if method == "initialize":
            info = {"name": "memory", "version": "0"}
            if self.version == 2:
                capabilities = {"session": {}}  # the session surface: list, resume, close
                result: Any = {"protocolVersion": 2, "info": info, "capabilities": capabilities}
            else:
                result = {"protocolVersion": 1, "agentInfo": info}
        elif method in self.results:
            result = self.results[method]
        elif method == "session/new":
            self.sessions += 1
            result = {"sessionId": f"s{self.sessions}"}
        elif method == "session/prompt":
            await self._turn(msg_id, params.get("sessionId"))
            return
        else:
            result = {}
        await self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    async def _turn(self, msg_id: Any, session_id: Any) -> None:
        self.prompts += 1
        await self._lines(msg_id, session_id)
        # The client answers requests in the order it reads them: the answer to
        # this one means it has handled every line before it.
        sync = {"jsonrpc": "2.0", "id": f"sync-{self.prompts}", "method": "_sync"}
        await self.send(sync)

    async def _lines(self, msg_id: Any, session_id: Any) -> None:
        scripted = self.prompts <= len(self.turns)
        if scripted:
            await self.send(*self.turns[self.prompts - 1])
            if not self.end_turns:
                return
        else:
            chunk = {"type": "text", "text": f"reply {self.prompts}"}
            body: dict[str, Any] = {"sessionUpdate": "agent_message_chunk", "content": chunk}
            if self.version == 2:
                body["messageId"] = f"reply-{self.prompts}"
            await self.send(update(body, session_id))
        if self.version == 2:
            idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}
            await self.send(
                {"jsonrpc": "2.0", "id": msg_id, "result": {}}, update(idle, session_id)
            )
        else:
            await self.send({"jsonrpc": "2.0", "id": msg_id, "result": {"stopReason": "end_turn"}})


class MemoryProcess(AgentProcess):
    """The agent 'process': in-memory stdio to a :class:`MemoryAgent` task."""

    def __init__(self, agent: MemoryAgent, tasks: anyio.abc.TaskGroup, pipes: Pipes) -> None:
        super().__init__("memory", ["memory-agent"])
        self._agent = agent
        self._tasks = tasks
        self._pipes = pipes
        self._streams: tuple[MemoryByteSend, MemoryByteReceive] | None = None
        self._ended = anyio.Event()
        self._scope = anyio.CancelScope()

    @property
    def pid(self) -> int | None:
        return None if self._streams is None else 1

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        assert self._streams is not None
        return self._streams[0]

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        assert self._streams is not None
        return self._streams[1]

    async def start(self) -> None:
        to_agent, agent_reads = self._pipes()
        agent_writes, from_agent = self._pipes()
        self._streams = (to_agent, from_agent)
        peer = RawPeer(agent_writes, agent_reads)

        async def run() -> None:
            with self._scope:
                await self._agent.run(peer)
            await agent_writes.aclose()  # EOF: the agent is gone
            self.returncode = 0
            self._ended.set()

        self._tasks.start_soon(run)

    async def drain_stderr(self) -> None:
        pass

    async def wait(self) -> int:
        await self._ended.wait()
        return 0

    async def aclose(self, grace: float = 2.0) -> None:
        if self._streams is not None:
            self._scope.cancel()
            await self._streams[0].aclose()
            await self._ended.wait()


@asynccontextmanager
async def app_with(
    agent: MemoryAgent, cwd: str, **options: Any
) -> AsyncIterator[tuple[App, RecordingEditor]]:
    """The App with one chat (id 1) opened on ``agent``; shut down on exit."""
    pipes = Pipes()
    editor = RecordingEditor()
    with pytest.MonkeyPatch.context() as patch, _closing(pipes):
        async with anyio.create_task_group() as tasks:

            def spawn(*args: Any) -> MemoryProcess:
                return MemoryProcess(agent, tasks, pipes)

            patch.setattr(pool_module, "agent_process", spawn)
            patch.setattr(connection_module, "agent_process", spawn)
            app = App(editor, tasks)
            assert app.setup(
                {
                    "protocol_version": agent.version,
                    "agents": {"memory": {"cmd": ["memory-agent"]}},
                    "default_agent": "memory",
                    # What the agent sends is under test, not the editor's MCP server.
                    "editor_mcp": False,
                    **options,
                }
            )
            await app.open(1, None, cwd)
            try:
                yield app, editor
            finally:
                await app.shutdown()
                tasks.cancel_scope.cancel()


@contextmanager
def _closing(pipes: Pipes) -> Iterator[None]:
    try:
        yield
    finally:
        pipes.close_all()


def transcript_text(editor: RecordingEditor, chat: int = 1) -> str:
    return "\n".join("\n".join(lines) for lines in editor.transcript(chat).values())


# -- the watchdog ----------------------------------------------------------------------


class LoopStalled(BaseException):
    """The event loop did not run for the watchdog's limit (a BaseException, so no
    ``except Exception`` in the code under test swallows it)."""


# A loop that waits (a blocking call on it) counts as stalled only past this many
# times the limit of wall time: a loaded machine alone makes it wait seconds between
# two ticks, while a loop busy for the limit in its own CPU time is stalled anywhere.
_WAIT_FACTOR = 10


@contextmanager
def _alarm(limit: float) -> Iterator[list[float]]:
    """Raise LoopStalled in the main thread when it went on without a beat for
    ``limit`` seconds of its CPU time, or ``_WAIT_FACTOR`` times that of wall time.
    ``beat`` holds (wall time, the main thread's CPU time) of the last beat."""
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()
    cpu = time.pthread_getcpuclockid(main)
    beat = [time.monotonic(), time.thread_time()]

    def stalled(signum: int, frame: Any) -> None:
        raise LoopStalled(f"the event loop did not run for {limit} s")

    def watch() -> None:
        while not stop.wait(limit / 10):
            busy = time.clock_gettime(cpu) - beat[1] > limit
            if busy or time.monotonic() - beat[0] > limit * _WAIT_FACTOR:
                beat[:] = [math.inf, math.inf]  # one alarm per stall, none after
                signal.pthread_kill(main, signal.SIGUSR1)

    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, stalled)
    thread = threading.Thread(target=watch, name="loop-watchdog", daemon=True)
    thread.start()
    try:
        yield beat
    finally:
        stop.set()
        thread.join()
        signal.signal(signal.SIGUSR1, previous)


@asynccontextmanager
async def watchdog(limit: float = 2.0) -> AsyncIterator[None]:
    """Fail with LoopStalled when the loop does not tick for ``limit`` seconds of
    the main thread's CPU time (a loop kept busy), or ten times that while it waits."""
    with _alarm(limit) as beat:
        async with anyio.create_task_group() as tasks:

            async def heartbeat() -> None:
                while True:
                    beat[:] = [time.monotonic(), time.thread_time()]
                    await anyio.sleep(limit / 20)

            tasks.start_soon(heartbeat)
            try:
                yield
            finally:
                beat[:] = [math.inf, math.inf]  # no alarm while the test winds down
                tasks.cancel_scope.cancel()
