"""The editor as an MCP server, for every agent (ACP v1 and v2).

Tools over the same services that answer ACP's ``fs/*`` and ``terminal/*``
(buffers with unsaved text, diagnostics, language servers, edits recorded for
review, commands behind the permission prompt), both MCP generations, and two
transports: the stdio shim ``python -m acp_nvim.mcp`` relaying to a private Unix
socket, and MCP-over-ACP. doc/acp.txt |acp-mcp| describes it for users.

Names are loaded on first use: the shim imports this package too, and must
start without anyio, msgspec or pydantic.
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
    "StdioServer",
    "ToolSession",
]

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_nvim.mcp._acp import AcpBridge
    from acp_nvim.mcp._core import McpServer
    from acp_nvim.mcp._offer import AcpServer, HttpServer, McpOffer, ServerSpec, StdioServer
    from acp_nvim.mcp._session import ToolSession
    from acp_nvim.mcp._socket import EditorSocket

_WHERE = {
    "AcpBridge": "_acp",
    "AcpServer": "_offer",
    "EditorSocket": "_socket",
    "HttpServer": "_offer",
    "McpOffer": "_offer",
    "McpServer": "_core",
    "ServerSpec": "_offer",
    "StdioServer": "_offer",
    "ToolSession": "_session",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
