"""The editor as an MCP server, for every agent (ACP v1 and v2).

Tools over the same services that answer ACP's ``fs/*`` and ``terminal/*``
(buffers with unsaved text, diagnostics, language servers, edits recorded for
review, commands behind the permission prompt), both MCP generations, and two
transports: the stdio shim ``python -m acp_nvim.mcp`` (a program of its own)
relaying to a private Unix socket, and MCP-over-ACP. doc/acp.txt |acp-mcp|
describes it for users.

The MCP side of the client, as ``agent/`` is the ACP side: it uses the services
and the session model, and the agent adapters offer it (decision 0033). pydantic
(the tool input models) is imported on the first ``tools/list`` or ``tools/call``.
"""

from __future__ import annotations

__all__ = [
    "AcpBridge",
    "AcpServer",
    "EditorSocket",
    "HttpServer",
    "McpOffer",
    "McpServer",
    "ServerSpec",
    "SseServer",
    "StdioServer",
    "ToolSession",
]

from acp_nvim.client.mcp._acp import AcpBridge
from acp_nvim.client.mcp._core import McpServer
from acp_nvim.client.mcp._offer import (
    AcpServer,
    HttpServer,
    McpOffer,
    ServerSpec,
    SseServer,
    StdioServer,
)
from acp_nvim.client.mcp._session import ToolSession
from acp_nvim.client.mcp._socket import EditorSocket
