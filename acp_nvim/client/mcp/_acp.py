"""MCP-over-ACP (``rfds/mcp-over-acp.mdx``): the editor server on the ACP connection.

An agent that advertises it (v1 ``mcpCapabilities.acp``, v2 ``session.mcp.acp``)
gets the editor server as ``{"type": "acp", "name": "nvim", "serverId": ...}``; it
opens a connection with ``mcp/connect {serverId}`` (answered with a fresh
``connectionId``), sends MCP requests and notifications flattened into
``mcp/message {connectionId, method, params}`` (a request's answer is the MCP
result, an MCP error the ACP error), and ends with ``mcp/disconnect``. Server
notifications go back as ``mcp/message`` notifications. No shim runs and no
socket is involved.

The bridge takes and gives plain values: each protocol version's adapter decodes
and encodes the ``mcp/*`` messages with its own generated types
(``client/agent/sessions.serve_mcp_over_acp``).
"""

from __future__ import annotations

__all__ = ["AcpBridge"]

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from acp_nvim.client.mcp._core import McpServer
from acp_nvim.client.mcp._offer import McpOffer
from acp_nvim.protocol import RequestError

# Sends one server notification to the agent: (connection id, MCP method, MCP params).
Send = Callable[[str, str, dict[str, Any] | None], Awaitable[None]]


class AcpBridge:
    """The MCP-over-ACP connections of one ACP connection, served for ``offer``'s sessions."""

    def __init__(self, offer: McpOffer, send: Send) -> None:
        self.offer = offer
        self._send = send
        self._servers: dict[str, McpServer] = {}
        self._ids = itertools.count(1)
        offer.listeners.append(self.resources_changed)

    def __repr__(self) -> str:
        return f"<AcpBridge {len(self._servers)} connections>"

    async def connect(self, server_id: str) -> str:
        """Open a connection to the server ``server_id`` names; returns its id.

        Raises:
            RequestError: no session of this connection was offered that server.
        """
        session = self.offer.session(server_id)
        if session is None:
            raise RequestError.invalid_params(f"unknown MCP server id {server_id!r}")
        connection_id = f"nvim-{next(self._ids)}"

        async def notify(method: str, params: dict[str, Any] | None) -> None:
            await self._send(connection_id, method, params)

        self._servers[connection_id] = McpServer(session, notify)
        await session.editor.watch_buffers()
        return connection_id

    async def message(
        self, connection_id: str, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """An MCP request; its result, or the MCP error raised as ``RequestError``."""
        return await self._server(connection_id).request(method, params)

    async def notification(self, connection_id: str, method: str) -> None:
        server = self._server(connection_id)
        if method == "notifications/initialized":
            server.initialized_notification()
        # notifications/cancelled names no inner id here: ACP's $/cancel_request
        # cancels the mcp/message request itself.

    async def disconnect(self, connection_id: str) -> None:
        self._servers.pop(connection_id, None)

    async def resources_changed(self) -> None:
        for server in list(self._servers.values()):
            await server.resources_changed()

    def _server(self, connection_id: str) -> McpServer:
        server = self._servers.get(connection_id)
        if server is None:
            raise RequestError.invalid_params(f"unknown connection {connection_id!r}")
        return server
