"""Which MCP servers an agent gets with each session, as plain data.

The editor's own server (``editor_mcp``), offered over the ACP connection where
the agent takes MCP-over-ACP, else as the stdio shim ``python -m acp_nvim.mcp``;
then the user's ``mcp_servers``. A server the agent cannot take (its transport
is not in the agent's ``mcpCapabilities``) is left out and said once in each
chat, in it and as a warning. The protocol adapters (``client/agent/v1``, ``v2``) turn
these into their wire types.
"""

from __future__ import annotations

__all__ = [
    "AcpServer",
    "HttpServer",
    "McpOffer",
    "ServerSpec",
    "SseServer",
    "StdioServer",
    "shim_launch",
]

import os
import shutil
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping

import msgspec

import acp_nvim
from acp_nvim.client.config import EDITOR_SERVER, McpServerOptions
from acp_nvim.client.mcp._session import ToolSession
from acp_nvim.client.mcp._socket import EditorSocket
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat


class StdioServer(msgspec.Struct, frozen=True):
    name: str
    command: str
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)


class HttpServer(msgspec.Struct, frozen=True):
    name: str
    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class SseServer(msgspec.Struct, frozen=True):
    """MCP's older HTTP+SSE transport (v1 only: v2 has no such server)."""

    name: str
    url: str
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class AcpServer(msgspec.Struct, frozen=True):
    """MCP-over-ACP: the agent reaches it with ``mcp/connect {serverId}`` on the ACP
    connection."""

    name: str
    server_id: str


ServerSpec = StdioServer | HttpServer | SseServer | AcpServer


def shim_launch() -> tuple[str, list[str], dict[str, str]]:
    """How to start the shim: this Python, this tree (whatever is installed)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(acp_nvim.__file__)))
    path = os.environ.get("PYTHONPATH")
    return (
        sys.executable,
        ["-m", "acp_nvim.mcp"],
        {"PYTHONPATH": root + os.pathsep + path if path else root},
    )


class McpOffer(msgspec.Struct, eq=False):
    """The MCP servers of one agent connection's sessions.

    ``tools`` (the editor tools offered; empty: no editor server) and ``servers``
    (the user's) follow the options; the app keeps them current. ``socket``
    starts the host's editor socket on first use.
    """

    agent: str
    reviews: Mapping[int, SessionChanges]
    terminals: Terminals
    permissions: Permissions
    socket: Callable[[], Awaitable[EditorSocket]]
    lsp_timeout: Callable[[], float]
    tools: list[str] = msgspec.field(default_factory=list)
    servers: dict[str, McpServerOptions] = msgspec.field(default_factory=dict)
    # Told when buffers come and go (MCP-over-ACP connections).
    listeners: list[Callable[[], Awaitable[None]]] = msgspec.field(default_factory=list)
    _tokens: dict[int, list[str]] = msgspec.field(default_factory=dict)  # by chat id
    _ids: dict[str, ToolSession] = msgspec.field(default_factory=dict)  # MCP-over-ACP ids
    # By chat id: the tool sessions offered with a session the agent has not named yet.
    _unbound: dict[int, list[ToolSession]] = msgspec.field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<McpOffer {self.agent} {len(self.tools)} tools, {len(self.servers)} servers>"

    async def servers_for(self, chat: Chat, takes: set[str]) -> list[ServerSpec]:
        """The servers for a new or resumed session of ``chat``; ``takes`` are the
        transports the agent advertises (``stdio``, ``http``, ``sse``, ``acp``)."""
        offered: list[ServerSpec] = []
        if self.tools:
            editor = await self._editor_server(chat, takes)
            if editor is not None:
                offered.append(editor)
        for name, options in self.servers.items():
            if options.type not in takes:
                self._report(chat, name, f"it takes no {options.type} MCP servers")
            elif options.type in ("http", "sse"):
                remote = HttpServer if options.type == "http" else SseServer
                offered.append(remote(name, options.url or "", dict(options.headers)))
            else:
                command = options.command or ""
                offered.append(
                    StdioServer(
                        name,
                        shutil.which(command) or command,
                        list(options.args),
                        dict(options.env),
                    )
                )
        return offered

    def session(self, server_id: str) -> ToolSession | None:
        """The session an MCP-over-ACP ``mcp/connect`` names."""
        return self._ids.get(server_id)

    def bind(self, chat: Chat, session_id: str) -> None:
        """The agent named ``chat``'s session it was just offered servers with (new,
        forked or resumed): ``session_id``; they serve that session."""
        for session in self._unbound.pop(chat.id, []):
            session.session_id = session_id

    async def forget(self, chat: Chat) -> None:
        """The chat left this agent (closed, or restarted): the tokens and ids of its
        sessions stop working."""
        self._ids = {k: s for k, s in self._ids.items() if s.chat is not chat}
        self._unbound.pop(chat.id, None)
        for token in self._tokens.pop(chat.id, []):
            await (await self.socket()).remove(token)

    def _tool_session(self, chat: Chat) -> ToolSession:
        return ToolSession(
            chat,
            self.reviews,
            self.terminals,
            self.permissions,
            list(self.tools),
            self.lsp_timeout,
        )

    async def _editor_server(self, chat: Chat, takes: set[str]) -> ServerSpec | None:
        """The editor's server for one session of ``chat``: an id or token of its own,
        so a turn of a session the chat has left is known by it (:attr:`ToolSession.muted`)."""
        if "acp" not in takes and "stdio" not in takes:
            self._report(chat, EDITOR_SERVER, "it takes no stdio MCP servers")
            return None
        session = self._tool_session(chat)
        self._unbound.setdefault(chat.id, []).append(session)
        if "acp" in takes:
            server_id = str(uuid.uuid4())
            self._ids[server_id] = session
            return AcpServer(EDITOR_SERVER, server_id)
        socket = await self.socket()
        token = socket.add(session)
        self._tokens.setdefault(chat.id, []).append(token)
        command, args, env = shim_launch()
        return StdioServer(EDITOR_SERVER, command, args, {**env, **socket.launch_env(token)})

    def _report(self, chat: Chat, name: str, why: str) -> None:
        """Say once in ``chat`` (not at each restart of its agent, nor each session)
        that a server is left out; again only should what is said change."""
        what = "the editor's MCP server" if name == EDITOR_SERVER else f"MCP server {name!r}"
        message = f"{self.agent} cannot take {what}: {why}"
        if message in chat.said:
            return
        chat.said.add(message)
        chat.info(f"*{message}.*")
        chat.editor.notify(message, "warn")
