"""In-memory byte streams for protocol tests, exposed as fixtures.

Helpers are reached through fixtures (not imports) so the tests work whether or not
tests/ becomes a package.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_nvim.protocol import Connection, LineReader


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def scans_take_their_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tree scan's time cap (0.25 s) guards a huge tree; a test's few files need
    a complete scan, and on a loaded machine a thread kept from a core that long
    left one incomplete (the review then fell back as designed, and the test
    failed). The cap itself is tested with ``max_seconds``."""
    from acp_nvim.client.services import disk_changes

    monkeypatch.setattr(disk_changes, "SCAN_MAX_SECONDS", 60.0)


def inotify_instances() -> int:
    """This process's inotify instances (the review's tree watches), counted by kind:
    a number closed here may be reused at once by a thread."""
    kinds = []
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else ():
        try:
            kinds.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return kinds.count("anon_inode:inotify")


@pytest.fixture(autouse=True)
def closes_its_watches() -> Iterator[None]:
    """A test closes the inotify instances it opens, as the chats it stands for do
    when they close: left to the collector they piled up to ~80 in one run, and the
    user has 128 for every program, so two suites at once ran out."""
    before = inotify_instances()
    yield
    # Fewer: the collector freed one a test before left behind.
    assert inotify_instances() <= before, "an inotify instance was left open"


def assert_no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    """A contained bug is still a bug: nothing logged with its traceback."""
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]
    assert not errors, errors[0].getMessage()


@pytest.fixture
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """The test fails on anything ``acp_nvim`` logged with a traceback."""
    caplog.set_level(logging.ERROR, logger="acp_nvim")
    yield
    assert_no_tracebacks(caplog)


class MemoryByteSend(ByteSendStream):
    def __init__(self, inner: MemoryObjectSendStream[bytes]) -> None:
        self._inner = inner

    async def send(self, item: bytes) -> None:
        await self._inner.send(item)

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._inner.close()


class MemoryByteReceive(ByteReceiveStream):
    """Hands out what was sent, never more than max_bytes per receive."""

    def __init__(self, inner: MemoryObjectReceiveStream[bytes]) -> None:
        self._inner = inner
        self._left = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._left:
            self._left = await self._inner.receive()
        chunk, self._left = self._left[:max_bytes], self._left[max_bytes:]
        return chunk

    async def aclose(self) -> None:
        self._inner.close()


class Pipes:
    """Makes one-way byte pipes and closes them all when the test ends."""

    def __init__(self) -> None:
        self._made: list[MemoryObjectSendStream[bytes] | MemoryObjectReceiveStream[bytes]] = []

    def __call__(self) -> tuple[MemoryByteSend, MemoryByteReceive]:
        # Unbounded buffer: sends never block, so tests need no reader to progress.
        send, receive = anyio.create_memory_object_stream[bytes](math.inf)
        self._made += [send, receive]
        return MemoryByteSend(send), MemoryByteReceive(receive)

    def close_all(self) -> None:
        for stream in self._made:
            stream.close()


class ScriptedReceive(ByteReceiveStream):
    """Yields the given chunks exactly as split (lazily), then EOF."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self.receives = 0
        self.on_receive: Callable[[], None] | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        if self.on_receive is not None:
            self.on_receive()
        self.receives += 1
        try:
            chunk = next(self._chunks)
        except StopIteration:
            raise anyio.EndOfStream from None
        assert len(chunk) <= max_bytes
        return chunk

    async def aclose(self) -> None:
        pass


class RawPeer:
    """The far end of a Connection, speaking raw lines (for malformed input)."""

    def __init__(self, send: MemoryByteSend, receive: MemoryByteReceive) -> None:
        self.send_stream = send
        self.receive_stream = receive
        self.reader = LineReader(receive)

    async def send_line(self, line: bytes | str) -> None:
        if isinstance(line, str):
            line = line.encode()
        await self.send_stream.send(line + b"\n")

    async def send_json(self, obj: Any) -> None:
        await self.send_line(msgspec.json.encode(obj))

    async def receive_json(self) -> Any:
        return msgspec.json.decode(await self.reader.receive_line())


@asynccontextmanager
async def _serving(*conns: Connection) -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as tg:
        for conn in conns:
            await tg.start(conn.serve)
        try:
            yield tg
        finally:
            for conn in conns:
                await conn.aclose()


@pytest.fixture
def serving() -> Callable[..., Any]:
    """`async with serving(conn, ...) as tasks`: run serve() for each, aclose on exit."""
    return _serving


@pytest.fixture
def pipe() -> Iterator[Pipes]:
    """Factory of one-way in-memory byte pipes: `send, receive = pipe()`."""
    pipes = Pipes()
    yield pipes
    pipes.close_all()


@pytest.fixture
def scripted() -> type[ScriptedReceive]:
    return ScriptedReceive


@pytest.fixture
def connection_pair(pipe: Pipes) -> Callable[..., tuple[Connection, Connection]]:
    """Factory: two Connections wired to each other (kwargs go to both)."""

    def make(**kwargs: Any) -> tuple[Connection, Connection]:
        a_to_b_send, a_to_b_recv = pipe()
        b_to_a_send, b_to_a_recv = pipe()
        a = Connection(b_to_a_recv, a_to_b_send, name="a", **kwargs)
        b = Connection(a_to_b_recv, b_to_a_send, name="b", **kwargs)
        return a, b

    return make


@pytest.fixture
def raw_peer(pipe: Pipes) -> Callable[..., tuple[Connection, RawPeer]]:
    """Factory: a Connection and a RawPeer at its far end (kwargs go to Connection)."""

    def make(**kwargs: Any) -> tuple[Connection, RawPeer]:
        to_conn_send, to_conn_recv = pipe()
        from_conn_send, from_conn_recv = pipe()
        kwargs.setdefault("name", "conn")
        conn = Connection(to_conn_recv, from_conn_send, **kwargs)
        return conn, RawPeer(to_conn_send, from_conn_recv)

    return make


@pytest.fixture(autouse=True)
def fast_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo agent streams without its human-friendly pauses."""
    monkeypatch.setenv("ACP_DEMO_DELAY", "0")


async def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Wait until ``condition()`` holds, re-checking after the loop runs other tasks."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.005)
