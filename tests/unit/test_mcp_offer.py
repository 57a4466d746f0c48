"""Which MCP servers a session is offered, and what the package shows (no Neovim)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import acp_nvim.mcp
from acp_nvim.client.config import EDITOR_TOOLS, load_config
from acp_nvim.client.editor import RecordingEditor
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.mcp import AcpServer, EditorSocket, HttpServer, McpOffer, StdioServer

pytestmark = pytest.mark.anyio


def test_the_package_exports_its_names_lazily() -> None:
    for name in acp_nvim.mcp.__all__:
        value = getattr(acp_nvim.mcp, name)
        assert name == "ServerSpec" or value.__name__ == name
    with pytest.raises(AttributeError):
        acp_nvim.mcp.nothing  # noqa: B018


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
            "demo", {}, Terminals({}, str(tmp_path)), Permissions(), str(tmp_path),
            get_socket, lambda: 1.0,
            tools=config.editor_mcp_tools(agent), servers=config.agent_mcp_servers(agent),
        )  # fmt: skip
        first = await offer.servers_for(chat, {"stdio"})
        again = await offer.servers_for(chat, {"stdio"})
        nvim, files = first
        assert isinstance(nvim, StdioServer) and nvim.name == "nvim"
        assert nvim.args == ["-m", "acp_nvim.mcp"]
        assert nvim.env["ACP_NVIM_MCP_SOCKET"] == socket.path
        assert again[0] == nvim  # one token per chat
        assert files == StdioServer("files", "/usr/bin/ls", ["-l"], {"A": "1"})
        # Said once, in the chat and as a warning.
        warned = [m for level, m in editor.notices if level == "warn"]
        assert warned == ["demo cannot take MCP server 'web': it takes no http MCP servers"]
        both = await offer.servers_for(chat, {"stdio", "http", "acp"})
        assert isinstance(both[0], AcpServer)
        assert offer.session(both[0].id) is not None
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
from acp_nvim.client.editor import RecordingEditor

async def main():
    async with anyio.create_task_group() as tasks:
        app = App(RecordingEditor(), tasks)
        await app.open(1, None, tempfile.mkdtemp())
        assert app.chats[1].state == "ready"
        assert app.mcp_socket is not None  # the demo session was offered the server
        print("pydantic" in sys.modules, "acp_nvim.mcp._tools" in sys.modules)
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
