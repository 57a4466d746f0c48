"""A small MCP client for the demo agent: it calls the editor's own MCP server.

The client offers that server in ``mcpServers`` of ``session/new`` (the stdio
shim, named ``nvim``); like a real agent, the demo starts it, says hello
(``initialize``, ``notifications/initialized``) and calls tools. The test fakes
use it too.
"""

from __future__ import annotations

__all__ = ["EDITOR_WORDS", "ask_editor", "editor_server", "mcp_session"]

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc

from acp_nvim import __version__
from acp_nvim.protocol import Connection

Params = dict[str, Any]

# Prompt words that make the demo call an editor tool.
EDITOR_WORDS = {
    "buffers": "list_buffers",
    "diagnostics": "get_diagnostics",
    "selection": "get_selection",
}


def editor_server(servers: list[Params]) -> Params | None:
    """The editor's stdio server among a session's ``mcpServers`` (v1 and v2 shapes)."""
    for server in servers:
        if server.get("name") == "nvim" and server.get("type", "stdio") == "stdio":
            return server
    return None


@asynccontextmanager
async def mcp_session(server: Params) -> AsyncIterator[Connection]:
    """Start ``server`` (a stdio entry of ``mcpServers``) and open an MCP session with it;
    the connection's ``request("tools/call", ...)`` calls a tool."""
    env = {**os.environ, **{v["name"]: v["value"] for v in server.get("env") or []}}
    command = [server["command"], *(server.get("args") or [])]
    async with await anyio.open_process(command, env=env, stderr=None) as process:
        assert process.stdout is not None and process.stdin is not None
        connection = Connection(process.stdout, process.stdin, name="mcp")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(connection.serve)
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "acp.nvim demo agent", "version": __version__},
            }
            await connection.request("initialize", hello, dict)
            await connection.notify("notifications/initialized", None)
            try:
                yield connection
            finally:
                await connection.aclose()
                tasks.cancel_scope.cancel()


async def ask_editor(servers: list[Params], words: set[str]) -> list[tuple[str, str]]:
    """Call the editor tools the prompt's words ask for: (tool, markdown answer) each.

    Raises:
        LookupError: the client offered no editor server (``editor_mcp = false``).
    """
    server = editor_server(servers)
    if server is None:
        raise LookupError("This client offered no editor MCP server (`editor_mcp`).")
    answers = []
    async with mcp_session(server) as mcp:
        for word, tool in EDITOR_WORDS.items():
            if word in words:
                result = await mcp.request("tools/call", {"name": tool, "arguments": {}}, dict)
                text = "".join(b.get("text", "") for b in result.get("content", []))
                fence = "```json" if text.startswith(("[", "{")) else "```"
                answers.append((tool, f"`{tool}` answered:\n\n{fence}\n{text}\n```"))
    return answers
