"""Which MCP servers a session is offered, and what the package shows (no Neovim)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import acp_nvim.client.mcp
from acp_nvim.client.config import EDITOR_TOOLS, load_config
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.mcp import AcpServer, EditorSocket, HttpServer, McpOffer, StdioServer
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from tests.fakes.editor import RecordingEditor

pytestmark = pytest.mark.anyio


def test_the_package_exports_its_names() -> None:
    for name in acp_nvim.client.mcp.__all__:
        value = getattr(acp_nvim.client.mcp, name)
        assert name == "ServerSpec" or value.__name__ == name
    with pytest.raises(AttributeError):
        acp_nvim.client.mcp.nothing  # noqa: B018


async def test_editor_server_then_the_users_and_what_the_agent_cannot_take(
    tmp_path: Path,
) -> None:
    config = load_config(
        {
            "mcp_servers": {
                "files": {"command": "ls", "args": ["-l"], "env": {"A": "1"}},
                "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"K": "v"}},
            }
        }
    )
    agent = config.all_agents()["demo"]
    editor = RecordingEditor()
    chat = Chat(1, "demo", editor)
    async with anyio.create_task_group() as tasks:
        socket = EditorSocket(editor, tasks, lambda: ProtocolLog(100))
        await socket.start()

        async def get_socket() -> EditorSocket:
            return socket

        offer = McpOffer(
            "demo", {}, Terminals({}), Permissions(), get_socket, lambda: 1.0,
            tools=config.editor_mcp_tools(agent), servers=config.agent_mcp_servers(agent),
        )  # fmt: skip
        first = await offer.servers_for(chat, {"stdio"})
        again = await offer.servers_for(chat, {"stdio"})
        nvim, files = first
        assert isinstance(nvim, StdioServer) and nvim.name == "nvim"
        assert nvim.args == ["-m", "acp_nvim.mcp"]
        assert nvim.env["ACP_NVIM_MCP_SOCKET"] == socket.path
        # A token per session: a turn of one the chat left is known by it.
        assert again[0].env["ACP_NVIM_MCP_TOKEN"] != nvim.env["ACP_NVIM_MCP_TOKEN"]
        assert files == StdioServer("files", "/usr/bin/ls", ["-l"], {"A": "1"})
        # Said once, in the chat and as a warning.
        warned = [m for level, m in editor.notices if level == "warn"]
        assert warned == ["demo cannot take MCP server 'web': it takes no http MCP servers"]
        # The offer of the agent restarted (a new process) does not say it again in the
        # chat, as it did at every restart; another chat is told it.
        restarted = McpOffer(
            "demo", {}, Terminals({}), Permissions(), get_socket, lambda: 1.0,
            tools=[], servers=config.agent_mcp_servers(agent),
        )  # fmt: skip
        await restarted.servers_for(chat, {"stdio"})
        assert [m for level, m in editor.notices if level == "warn"] == warned
        await restarted.servers_for(Chat(2, "demo", editor), {"stdio"})
        assert [m for level, m in editor.notices if level == "warn"] == warned * 2
        both = await offer.servers_for(chat, {"stdio", "http", "acp"})
        assert isinstance(both[0], AcpServer)
        assert offer.session(both[0].server_id) is not None
        assert both[2] == HttpServer("web", "http://127.0.0.1:9/mcp", {"K": "v"})
        nothing = await offer.servers_for(chat, set())
        assert nothing == []
        assert "demo cannot take the editor's MCP server: it takes no stdio MCP servers" in [
            m for _, m in editor.notices
        ]
        offer.tools = []
        assert [s.name for s in await offer.servers_for(chat, {"stdio"})] == ["files"]
        await offer.forget(chat)
        assert socket._sessions == {}
        await socket.aclose()
        tasks.cancel_scope.cancel()
    assert len(EDITOR_TOOLS) == 12


_READY = """
import sys, tempfile, anyio
from acp_nvim.client.app import App
from tests.fakes.editor import RecordingEditor

async def main():
    async with anyio.create_task_group() as tasks:
        app = App(RecordingEditor(), tasks)
        await app.open(1, None, tempfile.mkdtemp())
        assert app.chats[1].state == "ready"
        assert app.mcp_socket is not None  # the demo session was offered the server
        print("pydantic" in sys.modules, "acp_nvim.client.mcp._tools" in sys.modules)
        await app.shutdown()
        tasks.cancel_scope.cancel()

anyio.run(main)
"""


def test_a_session_is_ready_without_importing_pydantic() -> None:
    """pydantic (the tool models) loads when an agent first lists or calls a tool."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _READY], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "False"]


# How each version's agent advertises MCP-over-ACP in its initialize answer.
_TAKES_ACP = {
    1: {"protocolVersion": 1, "agentCapabilities": {"mcpCapabilities": {"acp": True}}},
    2: {
        "protocolVersion": 2,
        "info": {"name": "fake", "version": "0"},
        "capabilities": {"session": {"mcp": {"acp": {}}}},
    },
}


@pytest.mark.parametrize("version", [1, 2])
async def test_mcp_over_acp_where_the_agent_takes_it(
    connection_pair: Any, serving: Any, tmp_path: Path, version: int, caplog: Any
) -> None:
    """v1 and v2 agents that advertise it get the editor server as an ``acp`` server
    and reach it with mcp/connect, mcp/message, mcp/disconnect (the unstable schemas'
    shapes, one bridge for both versions)."""
    import msgspec

    from acp_nvim.client.agent.sessions import Services
    from acp_nvim.client.agent.v1 import SessionsV1
    from acp_nvim.client.agent.v2 import SessionsV2
    from acp_nvim.client.services.changes import SessionChanges
    from acp_nvim.client.services.elicitations import Elicitations
    from acp_nvim.client.session.workspace import Workspace
    from acp_nvim.client.tasks import Tasks
    from acp_nvim.protocol import RequestError
    from acp_nvim.protocol import schema_v2 as v2
    from tests.unit.conftest import wait_for

    client, agent = connection_pair()
    editor = RecordingEditor()
    chat = Chat(1, "fake", editor, Workspace(str(tmp_path)))
    chats: dict[str, Chat] = {}
    seen: dict[str, Any] = {}
    told: list[dict[str, Any]] = []

    async def initialize(params: dict[str, Any]) -> dict[str, Any]:
        return _TAKES_ACP[version]

    async def new_session(params: dict[str, Any]) -> dict[str, Any]:
        seen.update(params)
        return {"sessionId": "s1"}

    async def on_message(params: dict[str, Any]) -> None:
        told.append(params)

    async def no_socket() -> EditorSocket:
        raise AssertionError("MCP-over-ACP needs no socket")

    agent.on_request("initialize", dict, initialize)
    agent.on_request("session/new", dict, new_session)
    agent.on_notification("mcp/message", dict, on_message)
    (tmp_path / "a.txt").write_text("over acp\n")
    async with anyio.create_task_group() as tasks, serving(client, agent):
        review = SessionChanges(editor, 1, str(tmp_path), Tasks(tasks))
        terminals, permissions = Terminals(chats), Permissions()
        offer = McpOffer(
            "fake", {1: review}, terminals, permissions, no_socket, lambda: 1.0,
            tools=list(EDITOR_TOOLS),
        )  # fmt: skip
        services = Services(
            chats, {1: review}, terminals, permissions, Tasks(tasks), Elicitations(), offer
        )
        sessions: SessionsV1 | SessionsV2
        if version == 1:
            sessions = SessionsV1(client, services)
            await sessions.initialize("fake")
        else:
            raw = msgspec.json.encode(_TAKES_ACP[2])
            sessions = SessionsV2(client, v2.decode(raw, v2.InitializeResponse), services)
        await sessions.new_session(chat)
        [server] = seen["mcpServers"]
        assert server == {"type": "acp", "name": "nvim", "serverId": server["serverId"]}
        with pytest.raises(RequestError) as unknown_server:
            await agent.request("mcp/connect", {"serverId": "not-offered"}, dict)
        assert unknown_server.value.code == -32602
        connected = await agent.request("mcp/connect", {"serverId": server["serverId"]}, dict)
        cid = connected["connectionId"]

        async def mcp(method: str, params: dict[str, Any]) -> dict[str, Any]:
            message = {"connectionId": cid, "method": method, "params": params}
            result: dict[str, Any] = await agent.request("mcp/message", message, dict)
            return result

        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "a", "version": "0"},
        }
        assert (await mcp("initialize", hello))["protocolVersion"] == "2025-06-18"
        await agent.notify(
            "mcp/message", {"connectionId": cid, "method": "notifications/initialized"}
        )
        result = await mcp("tools/call", {"name": "read_buffer", "arguments": {"path": "a.txt"}})
        assert result["content"] == [{"type": "text", "text": "over acp\n"}]
        with pytest.raises(RequestError) as unknown:
            await mcp("prompts/list", {})
        assert unknown.value.code == -32601
        assert editor.watching
        for listener in offer.listeners:
            await listener()
        await wait_for(lambda: bool(told))
        assert told == [{"connectionId": cid, "method": "notifications/resources/list_changed"}]
        await agent.request("mcp/disconnect", {"connectionId": cid}, dict)
        with pytest.raises(RequestError) as gone:
            await mcp("ping", {})
        assert gone.value.code == -32602
        # A notification to it is the agent's mistake: a warning line, no traceback
        # (issue 29.6). The request after it is answered once it was handled.
        note = {"connectionId": cid, "method": "notifications/initialized"}
        await agent.notify("mcp/message", note)
        with pytest.raises(RequestError):
            await mcp("ping", {})
        assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "acp_nvim"] == [
            ("WARNING", f"MCP-over-ACP notifications/initialized for unknown connection {cid!r}")
        ]
        assert not [r for r in caplog.records if r.exc_info]
        tasks.cancel_scope.cancel()
