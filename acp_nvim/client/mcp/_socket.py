"""The editor MCP server's socket: where the stdio shims of every agent connect.

One Unix socket per host, in a directory only the user can open (``mkdtemp``:
0700). Each session the server is offered to gets a random token; a shim first
sends ``{"token": ...}`` and the host answers ``{"ok": true}`` and serves MCP on
the connection for that session, or refuses (logged, and said to the shim) a
missing or wrong token. So another user cannot reach the socket at all, and
another program of the user's needs a token it was handed. The directory goes
with the listener; if the host is killed outright, the reaper it is handed to
(acp_nvim/client/agent/groups.py, which outlives the host) removes it.

Whatever one connection sends costs only that connection: its failures end it
alone, never the listener (whose end takes the socket, every chat's server).
"""

from __future__ import annotations

__all__ = ["SOCKET_ENV", "TOKEN_ENV", "EditorSocket"]

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.abc
from anyio.abc import ByteReceiveStream, SocketStream

from acp_nvim.client.editor import Editor
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.mcp._core import PAGE_SIZE, McpServer
from acp_nvim.client.mcp._session import ToolSession
from acp_nvim.client.tasks import Tasks
from acp_nvim.protocol import Connection, ConnectionClosed, RequestError
from acp_nvim.protocol.streams import receive, send

log = logging.getLogger("acp_nvim")

SOCKET_ENV = "ACP_NVIM_MCP_SOCKET"
TOKEN_ENV = "ACP_NVIM_MCP_TOKEN"
# The token line: a shim sends it at once; anything slower or longer is not one.
_HELLO_BYTES = 1024
_HELLO_SECONDS = 5.0
_REFUSAL = b'{"ok": false, "error": "acp.nvim: wrong or missing token"}\n'
_CHAT_CLOSED = RequestError(RequestError.INTERNAL_ERROR, "the chat was closed")


class Reaper(Protocol):
    """What removes a directory of ours once this process is gone, however it ends."""

    def hold_directory(self, path: str) -> None: ...

    def let_go_of_directory(self, path: str) -> None: ...


class _Rest(ByteReceiveStream):
    """A stream that first gives back what was read past the token line."""

    def __init__(self, stream: ByteReceiveStream, rest: bytes) -> None:
        self._stream, self._rest = stream, rest

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._rest:
            chunk, self._rest = self._rest[:max_bytes], self._rest[max_bytes:]
            return chunk
        return await self._stream.receive(max_bytes)

    async def aclose(self) -> None:
        await self._stream.aclose()


class EditorSocket:
    """The socket, the sessions by token, and the MCP connections being served.

    ``log`` returns the current protocol log (``:AcpLog``); MCP traffic is
    logged as ``mcp:AGENT``. ``reaper`` holds the socket's directory while it is up.
    """

    def __init__(
        self,
        editor: Editor,
        tasks: Tasks,
        log: Callable[[], ProtocolLog],
        reaper: Reaper | None = None,
    ) -> None:
        self.editor = editor
        self._reaper = reaper
        self._tasks = tasks
        self._log = log
        self.directory = ""
        self.path = ""
        self._listener: anyio.abc.Listener[SocketStream] | None = None
        self._sessions: dict[str, ToolSession] = {}
        self._served: dict[McpServer, Connection] = {}
        self._watching = False
        self._serving = anyio.CancelScope()
        self.page_size = PAGE_SIZE  # of tools/list and resources/list

    def __repr__(self) -> str:
        served = len(self._served)
        return f"<EditorSocket {self.path} {len(self._sessions)} sessions, {served} connections>"

    @property
    def connections(self) -> int:
        return len(self._served)

    async def start(self) -> None:
        """Listen on ``<private dir>/mcp.sock``."""
        self.directory = tempfile.mkdtemp(prefix="acp-nvim-mcp-")
        if self._reaper is not None:
            self._reaper.hold_directory(self.directory)
        self.path = os.path.join(self.directory, "mcp.sock")
        self._listener = await anyio.create_unix_listener(self.path)
        self._tasks.start_soon(self._listen, self._listener)

    async def _listen(self, listener: anyio.abc.Listener[SocketStream]) -> None:
        # However it ends (aclose, or the host's task group cancelled), the socket
        # and its directory go with it.
        try:
            with self._serving:
                async with listener, anyio.create_task_group() as connections:
                    await listener.serve(self._accept, connections)
        finally:
            if self._reaper is not None:  # first: once gone, its name may be anyone's
                self._reaper.let_go_of_directory(self.directory)
            shutil.rmtree(self.directory, ignore_errors=True)

    def add(self, session: ToolSession) -> str:
        """Admit connections for ``session``; returns the token they must present."""
        token = os.urandom(32).hex()
        self._sessions[token] = session
        return token

    async def remove(self, token: str) -> None:
        """The session ended: its token stops working and its connections close."""
        session = self._sessions.pop(token, None)
        for server, connection in list(self._served.items()):
            if server.session is session:
                # A tool call still waiting (on a prompt, a command) is told why.
                await connection.aclose(answer=_CHAT_CLOSED)

    def launch_env(self, token: str) -> dict[str, str]:
        """What the shim needs to reach this socket for the session of ``token``."""
        return {SOCKET_ENV: self.path, TOKEN_ENV: token}

    async def resources_changed(self) -> None:
        for server in list(self._served):
            await server.resources_changed()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            self._serving.cancel()
            for connection in list(self._served.values()):
                await connection.aclose()
            if self._listener is not None:
                await self._listener.aclose()

    # -- one connection

    async def _accept(self, stream: SocketStream) -> None:
        """One connection, behind its own barrier: an exception out of here would end
        the listener's task group, the socket and every chat's server with it."""
        async with stream:
            try:
                await self._admit(stream)
            except ConnectionClosed:
                pass  # it hung up: nothing to answer
            except Exception:
                log.exception("the editor MCP server failed on one connection; it goes on")

    async def _admit(self, stream: SocketStream) -> None:
        """Check the token, then serve MCP on the connection until it ends."""
        hello, rest = await self._hello(stream)
        session = self._session(hello)
        if session is None:
            why = "no token" if not hello.get("token") else "a wrong token"
            message = f"refused an MCP connection with {why}"
            log.warning("%s", message)
            self._log().add("mcp", "!!", message)
            await send(stream, _REFUSAL)
            return
        await send(stream, b'{"ok": true}\n')
        await self._serve(session, _Rest(stream, rest), stream)

    async def _hello(self, stream: SocketStream) -> tuple[dict[str, Any], bytes]:
        """The shim's first line as an object ({} when it is none), and what followed."""
        data = b""
        with anyio.move_on_after(_HELLO_SECONDS):
            while b"\n" not in data and len(data) <= _HELLO_BYTES:
                if not (chunk := await receive(stream, _HELLO_BYTES)):
                    break
                data += chunk
        line, _, rest = data.partition(b"\n")
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or "[" * 1020
            return {}, rest
        return (hello if isinstance(hello, dict) else {}), rest

    def _session(self, hello: dict[str, Any]) -> ToolSession | None:
        import hmac  # only when a shim connects (hashlib is not cheap to import)

        token = hello.get("token")
        if not isinstance(token, str):
            return None
        given = token.encode("utf-8", "surrogatepass")  # JSON may hold a lone surrogate
        for known, session in self._sessions.items():
            if hmac.compare_digest(known.encode(), given):
                return session
        return None

    async def _serve(
        self, session: ToolSession, receive: ByteReceiveStream, stream: SocketStream
    ) -> None:
        source = f"mcp:{session.chat.agent}"

        def traffic(direction: str, data: bytes, count: int) -> None:
            self._log().traffic(source, ">>" if direction == "out" else "<<", data, count)

        connection = Connection(receive, stream, on_traffic=traffic, name=source)
        server = McpServer(session, connection.notify, page_size=self.page_size)
        server.attach(connection)
        self._served[server] = connection
        if not self._watching:
            self._watching = True
            await self.editor.watch_buffers()
        try:
            await connection.serve()
        finally:
            del self._served[server]
