"""The editor MCP server driven by an independent client, the official ``mcp`` SDK,
through the real stdio shim (``python -m acp_nvim.mcp``) and the host's socket.

The host side runs here on the fake editor with the real services (review,
terminals, permissions), so every tool does what it does in Neovim short of the
Neovim calls themselves (tests/nvim/test_mcp.py covers those).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import jsonschema
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from acp_nvim.client.config import EDITOR_TOOLS
from acp_nvim.client.log import ProtocolLog
from acp_nvim.client.mcp import EditorSocket, McpServer, ToolSession
from acp_nvim.client.mcp._core import HANDSHAKE_VERSIONS
from acp_nvim.client.mcp._offer import shim_launch
from acp_nvim.client.services.changes import SessionChanges
from acp_nvim.client.services.permissions import Permissions
from acp_nvim.client.services.terminals import Terminals
from acp_nvim.client.session.chat import Chat
from acp_nvim.client.session.workspace import Workspace
from acp_nvim.client.tasks import Tasks
from tests.fakes.editor import RecordingEditor
from tests.unit.conftest import wait_for

# What a client sends is answered, never a bug logged with its traceback.
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_tracebacks")]


class Host:
    """The host side: the socket, one session of a chat, and what the editor holds."""

    def __init__(self, tasks: anyio.abc.TaskGroup, cwd: Path) -> None:
        self.cwd = cwd
        self.tasks = tasks
        self.editor = RecordingEditor()
        self.log = ProtocolLog(1000)
        self.chat = Chat(1, "sdk", self.editor, Workspace(str(cwd)))
        self.chat.session.session_id = "s1"
        self.review = SessionChanges(self.editor, 1, str(cwd), Tasks(tasks))
        self.terminals = Terminals({"s1": self.chat})
        self.terminals.start(tasks)
        self.permissions = Permissions("allow_all")
        self.socket = EditorSocket(self.editor, tasks, lambda: self.log)
        self.session = ToolSession(
            self.chat,
            {1: self.review},
            self.terminals,
            self.permissions,
            list(EDITOR_TOOLS),
            lambda: 1.0,
        )
        self.token = ""

    def server(self, token: str | None = None) -> StdioServerParameters:
        command, args, env = shim_launch()
        env = {**env, **self.socket.launch_env(token or self.token)}
        return StdioServerParameters(command=command, args=args, env=env)


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    async with anyio.create_task_group() as tasks:
        host = Host(tasks, tmp_path)
        await host.socket.start()
        host.token = host.socket.add(host.session)
        yield host
        await host.socket.aclose()
        host.review.close()
        tasks.cancel_scope.cancel()


async def _raw(session: ClientSession, method: str, params: dict[str, Any] | None) -> Any:
    return await session._dispatcher.send_raw_request(method, params, {"timeout": 10})


async def _handshake(session: ClientSession, version: str) -> types.InitializeResult:
    result = await session.send_request(
        types.InitializeRequest(
            params=types.InitializeRequestParams(
                protocol_version=version,
                capabilities=types.ClientCapabilities(),
                client_info=types.Implementation(name="conformance", version="0"),
            )
        ),
        types.InitializeResult,
    )
    return result


@pytest.mark.parametrize("version", [*HANDSHAKE_VERSIONS, "1999-01-01"])
async def test_handshake_answers_each_version_or_the_newest(host: Host, version: str) -> None:
    async with stdio_client(host.server()) as (read, write), ClientSession(read, write) as session:
        result = await _handshake(session, version)
        expected = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        assert result.protocol_version == expected
        assert result.server_info.name == "acp.nvim"
        assert result.capabilities.tools is not None
        assert result.capabilities.resources is not None
        assert result.capabilities.resources.list_changed is True
        # The SDK validates every later answer against the agreed version.
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())
        await session.send_ping()
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == list(EDITOR_TOOLS)


async def test_tools_list_is_paginated_and_every_schema_is_valid(host: Host) -> None:
    host.socket.page_size = 5
    async with Client(host.server(), mode="legacy") as client:
        names, cursor, pages = [], None, 0
        while True:
            page = await client.session.list_tools(
                params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
            )
            pages += 1
            for tool in page.tools:
                jsonschema.Draft202012Validator.check_schema(tool.input_schema)
                assert tool.input_schema["type"] == "object"
                assert tool.description
                names.append(tool.name)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 3
        assert names == list(EDITOR_TOOLS)
        with pytest.raises(MCPError) as bad:
            await client.session.list_tools(params=types.PaginatedRequestParams(cursor="nonsense"))
        assert bad.value.error.code == -32602


async def test_prompts_asked_of_a_server_without_them_are_method_not_found(host: Host) -> None:
    """qwen asks ``prompts/list`` and ``resources/list`` before ``tools/list``, whatever
    the server advertised (agents-in-the-wild.md). No ``prompts`` capability, so
    ``prompts/list`` is a method this server does not have: ``-32601`` as JSON-RPC and
    the MCP SDKs answer it, its message saying "Method not found", the words qwen's
    and gemini's MCP clients take as "no prompts here" (any other error they log as a
    failed discovery). Resources, advertised, are listed."""
    async with stdio_client(host.server()) as (read, write), ClientSession(read, write) as session:
        result = await _handshake(session, HANDSHAKE_VERSIONS[-1])
        assert result.capabilities.prompts is None
        session.adopt(result)
        await session.send_notification(types.InitializedNotification())
        with pytest.raises(MCPError) as prompts:
            await _raw(session, "prompts/list", {})
        assert prompts.value.error.code == -32601
        assert "Method not found" in prompts.value.error.message
        assert (await session.list_resources()).resources is not None
        assert [t.name for t in (await session.list_tools()).tools] == list(EDITOR_TOOLS)


async def test_unknown_methods_and_tools_and_bad_params_are_protocol_errors(host: Host) -> None:
    async with Client(host.server(), mode="legacy") as client:
        session = client.session
        with pytest.raises(MCPError) as unknown:
            await _raw(session, "prompts/explode", {})
        assert unknown.value.error.code == -32601
        with pytest.raises(MCPError) as tool:
            await _raw(session, "tools/call", {"name": "format_disk", "arguments": {}})
        assert tool.value.error.code == -32602
        with pytest.raises(MCPError) as arguments:
            await _raw(session, "tools/call", {"name": "read_buffer", "arguments": [1]})
        assert arguments.value.error.code == -32602
        # A call without its tool's name was "Unknown tool: None".
        with pytest.raises(MCPError) as nameless:
            await _raw(session, "tools/call", {"arguments": {"path": "a.py"}})
        assert nameless.value.error.code == -32602
        assert nameless.value.error.message == "Invalid params: name: a string is required"
        # Issue 29.5: each was -32603 with a traceback in the log.
        for method, params in [
            ("tools/list", {"cursor": "\u00b2"}),  # a digit to isdigit(), not to int()
            ("resources/list", {"cursor": "1" * 5000}),  # past int()'s digit limit
            ("resources/read", {"uri": "file://[::1/"}),  # urlparse: invalid IPv6 URL
            ("resources/read", {"uri": "file:///a%00b"}),
        ]:
            with pytest.raises(MCPError) as refused:
                await _raw(session, method, params)
            assert refused.value.error.code == -32602, (method, params)


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


# Every tool with good input: (name, arguments, text expected in the answer).
def _good_calls(host: Host) -> list[tuple[str, dict[str, Any], str]]:
    code = str(host.cwd / "code.py")
    return [
        ("list_buffers", {}, '"line_count": 3'),
        ("read_buffer", {"path": "code.py"}, "x = 1 # unsaved\n"),
        ("read_buffer", {"path": code, "line": 2, "limit": 1}, "y = 2\n"),
        ("get_selection", {}, '"text": "y = 2"'),
        ("get_diagnostics", {}, "undefined name"),
        ("get_diagnostics", {"path": "code.py", "severity": "error"}, "undefined name"),
        ("lsp_definition", {"path": "code.py", "line": 3, "column": 5}, '"line": 1'),
        ("lsp_references", {"path": "code.py", "line": 1, "column": 1}, "code.py"),
        ("lsp_hover", {"path": "code.py", "line": 1, "column": 1}, "x: int"),
        ("lsp_symbols", {"path": "code.py"}, "[Variable] x"),
        ("lsp_symbols", {"query": "x"}, "[Variable] x"),
        ("edit_buffer", {"path": "code.py", "old_text": "y = 2", "new_text": "y = 3"}, "Edited"),
        ("write_file", {"path": "new.txt", "content": "fresh\n"}, "Wrote"),
        ("run_command", {"command": "echo hello"}, "hello from the terminal"),
        ("open_file", {"path": "code.py", "line": 2}, "Showed"),
    ]


async def _set_editor(host: Host) -> None:
    code = host.cwd / "code.py"
    code.write_text("x = 1\ny = 2\nz = x\n")
    host.editor.open_buffer(str(code))
    host.editor.type_in(str(code), 0, "x = 1 # unsaved")
    host.editor.selected = {
        "path": str(code),
        "mode": "line",
        "start": [2, 1],
        "end": [2, 5],
        "text": "y = 2",
    }
    host.editor.diagnostic_list = [
        {"path": str(code), "line": 3, "column": 5, "end_line": 3, "end_column": 6,
         "severity": "error", "message": "undefined name", "source": "fake", "code": None},
    ]  # fmt: skip
    location = {"path": str(code), "line": 1, "column": 1, "text": "x = 1", "kind": None}
    symbol = {**location, "kind": "Variable", "text": "[Variable] x"}
    for request in ("definition", "references"):
        host.editor.lsp_answers[request] = {"servers": ["fake"], "items": [location], "errors": []}
    for request in ("document_symbols", "workspace_symbols"):
        host.editor.lsp_answers[request] = {"servers": ["fake"], "items": [symbol], "errors": []}
    host.editor.lsp_answers["hover"] = {"servers": ["fake"], "hover": ["x: int"], "errors": []}
    await host.review.begin_turn()  # agents use the tools during a turn


async def test_every_tool_with_good_input(host: Host, tmp_path: Path) -> None:
    await _set_editor(host)
    async with anyio.create_task_group() as tasks:
        output = b"hello from the terminal\r\n"
        tasks.start_soon(host.editor.finish_commands, host.terminals, output)
        async with Client(host.server(), mode="legacy") as client:
            for name, arguments, expected in _good_calls(host):
                result = await client.call_tool(name, arguments)
                assert isinstance(result, types.CallToolResult)
                assert not result.is_error, (name, _text(result))
                assert expected in _text(result), (name, _text(result))
        tasks.cancel_scope.cancel()
    code = str(tmp_path / "code.py")
    # The edit kept the user's unsaved text and is in the review as the agent's.
    assert host.editor.buffers[code].state.lines == ["x = 1 # unsaved", "y = 3", "z = x"]
    changed = {f["path"] for f in host.editor.reviews[1]["files"]}
    assert {code, str(tmp_path / "new.txt")} <= changed
    assert (tmp_path / "new.txt").read_text() == "fresh\n"
    assert host.editor.shown == [(code, 2)]
    assert host.editor.lsp_asked[0] == ("definition", code, (3, 5), "")


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("list_buffers", {"verbose": True}, "verbose: Extra inputs are not permitted"),
        ("read_buffer", {}, "path: Field required"),
        ("read_buffer", {"path": "code.py", "line": 0}, "line: Input should be greater than"),
        ("read_buffer", {"path": "missing.py"}, "no such file"),
        ("get_selection", {"x": 1}, "x: Extra inputs"),
        ("get_diagnostics", {"severity": "fatal"}, "severity: Input should be"),
        ("lsp_definition", {"path": "code.py", "line": 1}, "column: Field required"),
        (
            "lsp_references",
            {"path": "code.py", "line": "one", "column": 1},
            "line: Input should be a valid integer",
        ),
        ("lsp_hover", {"path": "code.py", "line": 1, "column": 1}, "No language server"),
        ("lsp_symbols", {"path": 7}, "path: Input should be a valid string"),
        (
            "edit_buffer",
            {"path": "code.py", "old_text": "nowhere", "new_text": ""},
            "was not found",
        ),
        (
            "edit_buffer",
            {"path": "code.py", "old_text": "", "new_text": "x"},
            "old_text: String should have at least 1",
        ),
        ("write_file", {"path": "x.txt"}, "content: Field required"),
        (
            "run_command",
            {"command": "ls", "timeout": -1},
            "timeout: Input should be greater than 0",
        ),
        ("open_file", {"line": 3}, "path: Field required"),
        # Strict as the schemas say: true is no line 1, "2" no number.
        ("read_buffer", {"path": "code.py", "line": True}, "line: Input should be a valid integer"),
        ("read_buffer", {"path": "code.py", "line": "2"}, "line: Input should be a valid integer"),
        ("read_buffer", {"path": "code.py", "limit": 2.0}, "limit: Input should be a valid integer"),
        (
            "edit_buffer",
            {"path": "code.py", "old_text": "x", "new_text": "y", "replace_all": "yes"},
            "replace_all: Input should be a valid boolean",
        ),
        (
            "run_command",  # (a bad output_limit too: a "5" taken as 5 s would run the command)
            {"command": "ls", "timeout": "5", "output_limit": 0},
            "timeout: Input should be a valid number",
        ),
        # What Neovim would show as an empty buffer or a listing is no file to show.
        ("open_file", {"path": "missing.py"}, "missing.py: no such file"),
        ("open_file", {"path": ".", "line": 1}, "is a directory"),
        ("read_buffer", {"path": "file://elsewhere/code.py"}, "not a file on this machine"),
        # Issue 29.5: what the file system refuses (ValueError) was -32603 with a
        # traceback in the log.
        ("read_buffer", {"path": "~\x00"}, "not a file name: '~\\x00'"),
        ("get_diagnostics", {"path": "a\x00b"}, "not a file name"),
        ("lsp_hover", {"path": "a\x00b", "line": 1, "column": 1}, "not a file name"),
        ("open_file", {"path": "a\x00b"}, "not a file name"),
        ("run_command", {"command": "true", "cwd": "~\x00"}, "not a file name"),
        # It was a Lua stack trace, after the user had allowed it.
        ("run_command", {"command": "echo a\x00b"}, "command: String should match pattern"),
        (
            "lsp_definition",
            {"path": "code.py", "line": 2**64, "column": 1},
            "line: Input should be less than or equal to 2147483647",
        ),
    ],
)
async def test_every_tool_with_bad_input_answers_is_error(
    host: Host, name: str, arguments: dict[str, Any], message: str
) -> None:
    (host.cwd / "code.py").write_text("x = 1\n")
    async with Client(host.server(), mode="legacy") as client:
        result = await client.call_tool(name, arguments)
        assert isinstance(result, types.CallToolResult)
        assert result.is_error
        assert message in _text(result)


async def test_a_path_may_be_a_file_uri(host: Host) -> None:
    """A file:// URI (what resources/list hands out) was taken for a relative name:
    "<cwd>/file:/<path>: no such file"."""
    spaced = host.cwd / "my notes.txt"
    spaced.write_text("read by its URI\n")
    async with Client(host.server(), mode="legacy") as client:
        read = await client.call_tool("read_buffer", {"path": spaced.as_uri()})
        assert not read.is_error and _text(read) == "read by its URI\n", _text(read)
        written = await client.call_tool(
            "write_file", {"path": "file://localhost" + str(host.cwd / "new.txt"), "content": "x\n"}
        )
        assert not written.is_error, _text(written)
    assert (host.cwd / "new.txt").read_text() == "x\n"


async def test_a_write_that_keeps_the_users_lines_says_so(host: Host) -> None:
    """The user edited a line (unsaved) after the agent read the file; the agent's write
    changed that line too: the user's text stays, the agent's lines wait in the review
    (decision 0015). The result said "Wrote" alone, as if the file held the agent's text."""
    code = host.cwd / "code.py"
    code.write_text("alpha\nbeta\ngamma\ndelta\n")
    host.editor.open_buffer(str(code))
    async with Client(host.server(), mode="legacy") as client:
        await client.call_tool("read_buffer", {"path": "code.py"})
        host.editor.type_in(str(code), 1, "beta typed by the user")
        written = await client.call_tool(
            "write_file", {"path": "code.py", "content": "alpha\nBETA\ngamma\nDELTA\n"}
        )
    assert not written.is_error
    assert _text(written) == (
        f"Wrote {code}. At line 2 the user had unsaved edits of their own: their text was "
        "kept there, and yours waits in the user's review until they accept it. Read the "
        "file again before changing those lines."
    )
    assert host.editor.buffers[str(code)].state.lines[:4] == [
        "alpha", "beta typed by the user", "gamma", "DELTA"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("other", "after"),
    [
        (
            ("edit_buffer", {"path": "code.py", "old_text": "a = 1", "new_text": "a = 10"}),
            "a = 10\nb = 2\nc = 30\n",
        ),
        (  # the whole text, as the agent wrote it after the edit
            ("write_file", {"path": "code.py", "content": "a = 10\nb = 2\nc = 3\n"}),
            "a = 10\nb = 2\nc = 3\n",
        ),
    ],
)
async def test_two_changes_of_one_file_at_once_are_made_one_after_the_other(
    host: Host, other: tuple[str, dict[str, Any]], after: str
) -> None:
    """An edit_buffer and another change of its file at once (agents run tool calls
    in parallel): both answered, but the edit had read the file before the other
    wrote it and, merged against that text, undid the other's change."""
    code = host.cwd / "code.py"
    code.write_text("a = 1\nb = 2\nc = 3\n")
    server = McpServer(host.session)
    edit = ("edit_buffer", {"path": "code.py", "old_text": "c = 3", "new_text": "c = 30"})
    answers: list[dict[str, Any]] = []

    async def run(name: str, arguments: dict[str, Any]) -> None:
        params = {"name": name, "arguments": arguments}
        answers.append(await server.request("tools/call", params))

    async with anyio.create_task_group() as tasks:
        for name, arguments in (edit, other):
            tasks.start_soon(run, name, arguments)
    assert [a["isError"] for a in answers] == [False, False], answers
    assert code.read_text() == after


async def test_resources_are_the_open_buffers_with_unsaved_text(host: Host) -> None:
    code = host.cwd / "code.py"
    code.write_text("print(1)\n")
    host.editor.open_buffer(str(code))
    host.editor.type_in(str(code), 0, "print(2)")
    async with Client(host.server(), mode="legacy") as client:
        listed = await client.list_resources()
        [resource] = listed.resources
        assert resource.uri == code.as_uri()
        assert resource.mime_type == "text/x-python"
        read = await client.read_resource(resource.uri)
        [contents] = read.contents
        assert isinstance(contents, types.TextResourceContents)
        assert contents.text == "print(2)\n"
        with pytest.raises(MCPError) as missing:
            await client.read_resource("file:///no/such/file.py")
        assert missing.value.error.code == -32002


async def test_list_changed_is_sent_when_buffers_come_and_go(host: Host) -> None:
    seen: list[str] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            seen.append(message.method)

    async with Client(host.server(), mode="legacy", message_handler=handler):
        await wait_for(lambda: host.socket.connections == 1 and host.editor.watching)
        await wait_for(lambda: all(s.initialized for s in host.socket._served))
        await host.socket.resources_changed()
        await wait_for(lambda: "notifications/resources/list_changed" in seen)


async def test_cancellation_stops_a_running_command(host: Host) -> None:
    async with Client(host.server(), mode="legacy") as client:
        async with anyio.create_task_group() as calling:
            calling.start_soon(client.call_tool, "run_command", {"command": "sleep 100"})
            await wait_for(lambda: bool(host.editor.terminals))  # the command runs
            calling.cancel_scope.cancel()
        # notifications/cancelled reached the host: the command was stopped and
        # released, and the connection serves on.
        await wait_for(lambda: any(t["stopped"] for t in host.editor.terminals.values()))
        result = await client.call_tool("list_buffers", {})
        assert isinstance(result, types.CallToolResult) and not result.is_error
    assert any('"method":"notifications/cancelled"' in line for line in host.log.lines()), (
        "the SDK's cancellation was not logged"
    )


async def test_2026_07_28_discover_and_per_request_version(host: Host) -> None:
    (host.cwd / "a.txt").write_text("modern\n")
    async with Client(host.server(), mode="auto") as client:
        session = client.session
        assert session.discover_result is not None, "the SDK fell back to the handshake"
        assert session.protocol_version == "2026-07-28"
        assert "2025-11-25" in session.discover_result.supported_versions
        result = await client.call_tool("read_buffer", {"path": "a.txt"})
        assert isinstance(result, types.CallToolResult)
        assert _text(result) == "modern\n"
        tools = await client.list_tools()
        assert len(tools.tools) == len(EDITOR_TOOLS)
        # A version nobody knows: -32022 naming what the server speaks.
        with pytest.raises(MCPError) as unsupported:
            await _raw(
                session,
                "tools/list",
                {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            )
        assert unsupported.value.error.code == -32022
        assert unsupported.value.error.data["requested"] == "2099-01-01"
        assert "2026-07-28" in unsupported.value.error.data["supported"]
    served = [json.loads(line.split(" << ", 1)[1]) for line in host.log.lines() if " << " in line]
    assert served[0]["method"] == "server/discover"
    assert not any(m.get("method") == "initialize" for m in served)


def _hello(path: str, hello: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(hello)
        return sock.recv(1024)


async def test_a_wrong_or_missing_token_is_refused_and_logged(host: Host) -> None:
    assert stat.S_IMODE(os.stat(host.socket.directory).st_mode) == 0o700
    answers = [
        await anyio.to_thread.run_sync(_hello, host.socket.path, hello)
        for hello in (
            b'{"token": "0000"}\n',
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}\n',
        )
    ]
    assert all(b'"ok": false' in answer for answer in answers)
    refusals = [line for line in host.log.lines() if "refused an MCP connection" in line]
    assert len(refusals) == 2
    assert host.socket.connections == 0
    # The shim says so on stderr and exits.
    command, args, env = shim_launch()
    env = {**os.environ, **env, **host.socket.launch_env("wrong")}
    process = await anyio.run_process([command, *args], env=env, input=b"", check=False)
    assert process.returncode == 1
    assert b"refused" in process.stderr
    assert sys.executable == command


def _lines(path: str, data: bytes, answers: int) -> list[bytes]:
    """Send ``data`` on a fresh connection, then read ``answers`` lines back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(data)
        with sock.makefile("rb") as answer:
            return [answer.readline() for _ in range(answers)]


async def test_one_connections_garbage_costs_only_that_connection(host: Host, tmp_path: Path) -> None:
    """Issue 27.2: a hello of ``"[" * 1020`` (RecursionError in json.loads), from any
    local process without the token, ended the listener: the socket and its directory
    went, and every chat's MCP server with them. The same after a good hello."""
    chat = Chat(2, "other", host.editor, Workspace(str(tmp_path)))
    review = SessionChanges(host.editor, 2, str(tmp_path), Tasks(host.tasks))
    other = ToolSession(
        chat, {2: review}, host.terminals, host.permissions, ["list_buffers"], lambda: 1.0
    )
    other_token = host.socket.add(other)
    path = host.socket.path

    async def send(data: bytes, answers: int = 1) -> list[bytes]:
        return await anyio.to_thread.run_sync(_lines, path, data, answers)

    for hello in (b"[" * 1020, b"{" * 100_000, b"\xff\xfe", b'{"token": "\\ud800"}', b'{"token": 5}'):
        assert b'"ok": false' in (await send(hello + b"\n"))[0]
    hello = json.dumps({"token": host.token}).encode() + b"\n"
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
    ok, nested, pong = await send(hello + b"[" * 100_000 + b"\n" + ping, answers=3)
    assert ok == b'{"ok": true}\n'
    assert json.loads(nested)["error"]["code"] == -32700
    assert json.loads(pong) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    await send(hello + b'{"jsonrpc": "2.0", "id": 1, "meth', answers=0)  # gone mid-line

    assert os.path.exists(path)
    for token in (host.token, other_token):  # each chat's server answers
        async with Client(host.server(token), mode="legacy") as client:
            assert (await client.list_tools()).tools
