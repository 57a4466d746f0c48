"""Agents that call the editor's MCP server: over the stdio shim, or over ACP itself."""

from __future__ import annotations

__all__ = ["SCENARIOS"]

import json
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from acp_nvim.demo_agent._mcp import editor_server, mcp_session
from acp_nvim.protocol import Connection, RequestError
from tests.fakes.handshake import Agent, Params, Prompt, Scenario


class McpSession(Protocol):
    """What a tool call needs of an MCP session, over stdio or over ACP."""

    async def request(self, method: str, params: Any, result_type: type[Params]) -> Params: ...


class AcpMcp:
    """The agent's side of one MCP-over-ACP connection: MCP requests in mcp/message."""

    def __init__(self, connection: Connection, connection_id: str) -> None:
        self.c = connection
        self.connection_id = connection_id

    async def request(self, method: str, params: Any, result_type: type[Params]) -> Params:
        message = {"connectionId": self.connection_id, "method": method, "params": params}
        return await self.c.request("mcp/message", message, result_type)


@asynccontextmanager
async def mcp_over_acp(agent: Agent, server: Params) -> AsyncIterator[AcpMcp]:
    """An MCP session with an ``acp`` server: mcp/connect, the MCP handshake in
    mcp/message, and mcp/disconnect at the end."""
    connected = await agent.c.request("mcp/connect", {"serverId": server["serverId"]}, dict)
    mcp = AcpMcp(agent.c, connected["connectionId"])
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fake"}}
    await mcp.request("initialize", hello, dict)
    await agent.c.notify(
        "mcp/message", {"connectionId": mcp.connection_id, "method": "notifications/initialized"}
    )
    try:
        yield mcp
    finally:
        await agent.c.request("mcp/disconnect", {"connectionId": mcp.connection_id}, dict)


async def call_editor_tools(agent: Agent, prompt: Prompt) -> None:
    """Prompt: a JSON list of ``{"tool", "arguments"}``, or ``"servers"`` for the
    mcpServers of session/new. Each tool is called on the editor's MCP server (the
    stdio shim from mcpServers, or over this ACP connection where the client
    offered an ``acp`` server); each answer is said as a ``RESULT <json>`` line."""
    calls = json.loads(prompt.text)
    if calls == "servers":
        await agent.result(agent.mcp_servers)
        return
    over_acp = [s for s in agent.mcp_servers if s.get("type") == "acp" and s["name"] == "nvim"]
    server = editor_server(agent.mcp_servers)
    if server is None and not over_acp:
        await agent.result({"error": "no editor server"})
        return
    session: AbstractAsyncContextManager[McpSession]
    session = mcp_over_acp(agent, over_acp[0]) if over_acp else mcp_session(server or {})
    async with session as mcp:
        for call in calls:
            try:
                result: Any = await mcp.request(
                    "tools/call",
                    {"name": call["tool"], "arguments": call.get("arguments", {})},
                    dict,
                )
            except RequestError as err:
                result = {"error": err.code, "message": err.message}
            await agent.result(result)


async def tell_servers(agent: Agent, params: Params) -> None:
    """session/new: the servers offered go to the file $FAKE_MCP_SERVERS, if set (for a
    test that calls the editor's tools itself, outside any turn)."""
    if os.environ.get("FAKE_MCP_SERVERS"):
        with open(os.environ["FAKE_MCP_SERVERS"], "w") as f:
            json.dump(params.get("mcpServers") or [], f)


SCENARIOS = (
    Scenario(
        "mcp",
        call_editor_tools,
        capabilities={"mcpCapabilities": {"http": True}},
        before={"session/new": tell_servers},
    ),
    # opencode's mcpCapabilities: http and sse
    Scenario(
        "mcp_sse",
        call_editor_tools,
        capabilities={"mcpCapabilities": {"http": True, "sse": True}},
    ),
    Scenario(
        "mcp_v2",
        call_editor_tools,
        v2={"mcp": {"stdio": {}, "http": {}}},
        before={"session/new": tell_servers},
    ),
    # MCP-over-ACP too (the unstable session.mcp.acp)
    Scenario("mcp_v2_acp", call_editor_tools, v2={"mcp": {"stdio": {}, "acp": {}}}),
)
