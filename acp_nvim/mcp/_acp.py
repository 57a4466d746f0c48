"""MCP-over-ACP (``rfds/mcp-over-acp.mdx``): the editor server on the ACP connection.

An agent that advertises ``mcpCapabilities.acp`` gets the editor server as
``{"type": "acp", "name": "nvim", "id": ...}``; it opens a connection with
``mcp/connect {acpId}`` (answered with a fresh ``connectionId``), sends MCP
requests and notifications flattened into ``mcp/message {connectionId, method,
params}`` (a request's answer is the MCP result, an MCP error the ACP error),
and ends with ``mcp/disconnect``. Server notifications go back as
``mcp/message`` notifications. No shim runs and no socket is involved.
"""

from __future__ import annotations

__all__ = ["AcpBridge"]

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from acp_nvim.mcp._core import McpServer
from acp_nvim.mcp._offer import McpOffer
from acp_nvim.protocol import RequestError

# Sends one ACP notification: (method, params).
Send = Callable[[str, dict[str, Any]], Awaitable[None]]


class AcpBridge:
    """The ``mcp/*`` requests of one ACP connection, served for ``offer``'s sessions."""

    def __init__(self, offer: McpOffer, send: Send) -> None:
        self.offer = offer
        self._send = send
        self._servers: dict[str, McpServer] = {}
        self._ids = itertools.count(1)
        offer.listeners.append(self.resources_changed)

    def __repr__(self) -> str:
        return f"<AcpBridge {len(self._servers)} connections>"

    async def connect(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self.offer.session(str(params.get("acpId")))
        if session is None:
            raise RequestError.invalid_params(f"unknown MCP server id {params.get('acpId')!r}")
        connection_id = f"nvim-{next(self._ids)}"

        async def notify(method: str, inner: dict[str, Any] | None) -> None:
            message: dict[str, Any] = {"connectionId": connection_id, "method": method}
            if inner is not None:
                message["params"] = inner
            await self._send("mcp/message", message)

        self._servers[connection_id] = McpServer(session, notify)
        await session.editor.watch_buffers()
        return {"connectionId": connection_id}

    async def message(self, params: dict[str, Any]) -> dict[str, Any]:
        server, method, inner = self._unwrap(params)
        return await server.request(method, inner)

    async def notification(self, params: dict[str, Any]) -> None:
        server, method, _ = self._unwrap(params)
        if method == "notifications/initialized":
            server.initialized_notification()
        # notifications/cancelled names no inner id here: ACP's $/cancel_request
        # cancels the mcp/message request itself.

    async def disconnect(self, params: dict[str, Any]) -> dict[str, Any]:
        self._servers.pop(str(params.get("connectionId")), None)
        return {}

    async def resources_changed(self) -> None:
        for server in list(self._servers.values()):
            await server.resources_changed()

    def _unwrap(self, params: dict[str, Any]) -> tuple[McpServer, str, dict[str, Any]]:
        server = self._servers.get(str(params.get("connectionId")))
        if server is None:
            raise RequestError.invalid_params(f"unknown connection {params.get('connectionId')!r}")
        method, inner = params.get("method"), params.get("params")
        if not isinstance(method, str):
            raise RequestError.invalid_params("method: a string is required")
        if inner is not None and not isinstance(inner, dict):
            raise RequestError.invalid_params("params: an object is required")
        return server, method, inner or {}
