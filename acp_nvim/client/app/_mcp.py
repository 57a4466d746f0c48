"""The editor MCP server's wiring: the offer each agent connection makes, and the
host's one socket for the stdio shim, started when a session first offers it."""

from __future__ import annotations

__all__ = ["McpWiring"]

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from acp_nvim.client.app._context import AppContext
from acp_nvim.client.config import AgentConfig

if TYPE_CHECKING:
    from acp_nvim.client.agent.connection import AgentConnection
    from acp_nvim.client.mcp import EditorSocket, McpOffer
    from acp_nvim.client.services.changes import SessionChanges


class McpWiring:
    """``reviews``: each chat's review, by chat id (live), for the tools that edit."""

    def __init__(self, ctx: AppContext, reviews: Mapping[int, SessionChanges]) -> None:
        self.ctx = ctx
        self.reviews = reviews
        self.socket: EditorSocket | None = None
        self._starting = anyio.Lock()

    def __repr__(self) -> str:
        return f"<McpWiring socket {'up' if self.socket is not None else 'down'}>"

    def offer(self, connection: AgentConnection, agent_config: AgentConfig) -> McpOffer:
        """The MCP servers ``connection``'s sessions get (the options say which)."""
        from acp_nvim.client.mcp import McpOffer

        config = self.ctx.config
        return McpOffer(
            connection.name,
            self.reviews,
            connection.terminals,
            connection.permissions,
            self._socket,
            lambda: self.ctx.config.timeouts.lsp,
            tools=config.editor_mcp_tools(agent_config),
            servers=config.agent_mcp_servers(agent_config),
        )

    def configure(self, connection: AgentConnection) -> None:
        """The options ``connection``'s offer follows."""
        if connection.mcp is not None:
            config = self.ctx.config
            agent_config = config.all_agents().get(connection.name, connection.config)
            connection.mcp.tools = config.editor_mcp_tools(agent_config)
            connection.mcp.servers = config.agent_mcp_servers(agent_config)

    async def _socket(self) -> EditorSocket:
        """The editor MCP server's socket, started on first use."""
        async with self._starting:
            if self.socket is None:
                from acp_nvim.client.agent import groups
                from acp_nvim.client.mcp import EditorSocket

                ctx = self.ctx
                socket = EditorSocket(ctx.editor, ctx.tasks, lambda: ctx.log, reaper=groups)
                await socket.start()
                self.socket = socket
            return self.socket

    async def buffers_changed(self, connections: Iterable[AgentConnection]) -> None:
        """File buffers came or went: MCP clients that follow the list are told."""
        if self.socket is not None:
            await self.socket.resources_changed()
        for connection in connections:
            for listener in connection.mcp.listeners if connection.mcp is not None else []:
                await listener()

    def status(self) -> dict[str, Any]:
        """The editor MCP server for ``:checkhealth``: its socket and connections."""
        socket = self.socket
        if socket is None:
            return {"socket": None, "connections": 0}
        return {"socket": socket.path, "connections": socket.connections}

    async def aclose(self) -> None:
        if self.socket is not None:
            await self.socket.aclose()
