"""The editor MCP server in a real Neovim: fake agents (ACP v1 and v2) get it in
``mcpServers``, start the stdio shim and call its tools end to end."""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import socket
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_nvim.demo_agent._mcp import editor_server, mcp_session
from tests import proc
from tests.disk import fill, small_disk
from tests.nvim.conftest import Editor, wait_gone
from tests.nvim.test_files import open_elsewhere
from tests.nvim.test_permissions import PROMPT, focus_transcript, wait_text


def start(editor: Editor, scenario: str = "mcp", **options: Any) -> None:
    editor.setup(agents={"fake": editor.fake_agent(scenario)}, **options)
    editor.open_chat("fake")


def call(editor: Editor, calls: Any, turn: int = 1) -> list[Any]:
    """Have the fake agent call editor tools; their MCP results, decoded."""
    editor.lua("require('acp').send(...)", json.dumps(calls))
    editor.wait_event("AcpTurnEnd", count=turn)
    return [
        json.loads(line.split("RESULT ", 1)[1])
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ][-(len(calls) if isinstance(calls, list) else 1) :]


def text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"])


def edit(editor: Editor, path: Path) -> int:
    editor.nvim.command(f"edit {path}")
    return int(editor.lua("return vim.api.nvim_get_current_buf()"))


def test_v1_agent_gets_the_server_and_reads_unsaved_text(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.py"
    path.write_text("on disk\n")
    buf = edit(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, {'unsaved', 'text'})", buf)
    start(editor)
    [servers] = call(editor, "servers")
    [nvim] = [s for s in servers if s["name"] == "nvim"]
    assert nvim["args"] == ["-m", "acp_nvim.mcp"]
    env = {v["name"]: v["value"] for v in nvim["env"]}
    assert stat.S_IMODE(os.stat(os.path.dirname(env["ACP_NVIM_MCP_SOCKET"])).st_mode) == 0o700
    [listed, read, part] = call(
        editor,
        [
            {"tool": "list_buffers"},
            {"tool": "read_buffer", "arguments": {"path": "a.py"}},
            {"tool": "read_buffer", "arguments": {"path": str(path), "line": 2, "limit": 1}},
        ],
        turn=2,
    )
    [buffer] = listed["structuredContent"]["buffers"]
    assert buffer == {
        "path": str(path),
        "modified": True,
        "filetype": "python",
        "line_count": 2,
        "visible": True,
        "cursor": [1, 1],
    }
    assert text(read) == "unsaved\ntext\n"
    assert text(part) == "text\n"
    # :AcpLog shows the MCP traffic, marked as such.
    log = editor.lua("return require('acp.host').request('log')")
    assert any(" mcp:fake << " in line and '"tools/call"' in line for line in log)


def test_v2_agent_gets_the_server_and_calls_a_tool(editor: Editor, tmp_path: Path) -> None:
    """A v2 agent that does not advertise MCP-over-ACP gets the stdio shim."""
    path = tmp_path / "project" / "b.txt"
    path.write_text("hello v2\n")
    start(editor, "mcp_v2", protocol_version=2)
    assert editor.lua("return require('acp').status().protocol_version") == 2
    [[nvim]] = call(editor, "servers")
    assert (nvim["type"], nvim["name"], nvim["args"]) == ("stdio", "nvim", ["-m", "acp_nvim.mcp"])
    [result] = call(editor, [{"tool": "read_buffer", "arguments": {"path": "b.txt"}}], turn=2)
    assert text(result) == "hello v2\n"


def test_v2_agent_that_takes_mcp_over_acp_reads_unsaved_text(
    editor: Editor, tmp_path: Path
) -> None:
    """A v2 agent advertising ``session.mcp.acp`` gets the server on the ACP connection:
    no shim, no socket; mcp/connect, then the tool call inside mcp/message."""
    path = tmp_path / "project" / "d.txt"
    path.write_text("on disk\n")
    buf = edit(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, -1, false, {'unsaved over acp'})", buf)
    start(editor, "mcp_v2_acp", protocol_version=2)
    [[nvim]] = call(editor, "servers")
    assert nvim == {"type": "acp", "name": "nvim", "serverId": nvim["serverId"]}
    [result] = call(editor, [{"tool": "read_buffer", "arguments": {"path": "d.txt"}}], turn=2)
    assert text(result) == "unsaved over acp\n"
    # On the wire (:AcpLog): the agent connected to that server and called the tool in it.
    log = editor.lua("return require('acp.host').request('log')")
    received = [json.loads(line.split(" << ", 1)[1]) for line in log if " fake << " in line]
    [connect] = [m for m in received if m.get("method") == "mcp/connect"]
    assert connect["params"] == {"serverId": nvim["serverId"]}
    inner = [m["params"] for m in received if m.get("method") == "mcp/message"]
    assert [p["method"] for p in inner] == ["initialize", "notifications/initialized", "tools/call"]
    assert inner[2]["params"]["name"] == "read_buffer"
    assert [m for m in received if m.get("method") == "mcp/disconnect"]
    assert not any(" mcp:fake " in line for line in log)  # no shim connected


@pytest.mark.parametrize(
    ("keys", "mode", "expected"),
    [("Vj", "line", "two\nthree"), ("lvj", "char", "wo\nth"), ("l<C-v>j", "block", "w\nh")],
)
def test_get_selection_returns_the_text_of_the_last_selection(
    editor: Editor, tmp_path: Path, keys: str, mode: str, expected: str
) -> None:
    path = tmp_path / "project" / "s.txt"
    path.write_text("one\ntwo\nthree\n")
    edit(editor, path)
    editor.nvim.input(f"2G{keys}<Esc>")
    editor.wait("vim.fn.mode() == 'n' and vim.api.nvim_buf_get_mark(0, '>')[1] == 3")
    start(editor)
    [result] = call(editor, [{"tool": "get_selection"}])
    selection = result["structuredContent"]
    assert (selection["mode"], selection["text"]) == (mode, expected)
    assert selection["path"] == str(path)


def test_a_selection_outside_the_project_is_read_as_fs_access_says(
    editor: Editor, tmp_path: Path
) -> None:
    """get_selection gave the agent the text selected in any file, a secret outside
    the project too, though fs_access denied reading that file."""
    path = tmp_path / "credentials"
    path.write_text("user\nsecret-token\n")
    edit(editor, path)
    editor.nvim.input("2GV<Esc>")
    editor.wait("vim.fn.mode() == 'n' and vim.api.nvim_buf_get_mark(0, '>')[1] == 2")
    start(editor, fs_access={"outside": "deny"})
    [result] = call(editor, [{"tool": "get_selection"}])
    assert result["isError"] is True and "fs_access" in text(result)
    assert "secret-token" not in json.dumps(result)


def test_diagnostics_set_in_neovim_reach_the_agent(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "c.lua"
    path.write_text("local x = 1\nprint(y)\n")
    buf = edit(editor, path)
    editor.lua(
        """
        local buf = ...
        local ns = vim.api.nvim_create_namespace("test")
        vim.diagnostic.set(ns, buf, {
          { lnum = 1, col = 6, end_lnum = 1, end_col = 7, severity = vim.diagnostic.severity.WARN,
            message = "undefined global y", source = "luals", code = "undefined-global" },
          { lnum = 0, col = 6, severity = vim.diagnostic.severity.HINT, message = "unused x" },
        })
        """,
        buf,
    )
    start(editor)
    [everything, warnings] = call(
        editor,
        [
            {"tool": "get_diagnostics"},
            {"tool": "get_diagnostics", "arguments": {"path": "c.lua", "severity": "warning"}},
        ],
    )
    assert len(everything["structuredContent"]["diagnostics"]) == 2
    assert warnings["structuredContent"]["diagnostics"] == [
        {
            "path": str(path),
            "line": 2,
            "column": 7,
            "end_line": 2,
            "end_column": 8,
            "severity": "warning",
            "message": "undefined global y",
            "source": "luals",
            "code": "undefined-global",
        }
    ]


# An in-process language server (vim.lsp.start with a function as cmd) attached to
# buffer ``buf``, answering each request with ``answer(method, params)``.
START_SERVER = """
local function start_server(name, buf, answer)
  vim.lsp.start({
    name = name,
    root_dir = vim.fn.getcwd(),
    cmd = function()
      return {
        request = function(method, params, callback)
          vim.schedule(function() callback(nil, answer(method, params)) end)
          return true, 1
        end,
        notify = function() return true end,
        is_closing = function() return false end,
        terminate = function() end,
      }
    end,
  }, { bufnr = buf })
end
"""

FAKE_SERVER = START_SERVER + """
local buf = ...
local function answer(method, params)
  if method == "initialize" then
    return { capabilities = { definitionProvider = true, hoverProvider = true,
                              documentSymbolProvider = true } }
  elseif method == "textDocument/definition" then
    return { uri = params.textDocument.uri,
             range = { start = { line = 0, character = 4 }, ["end"] = { line = 0, character = 7 } } }
  elseif method == "textDocument/hover" then
    return { contents = { kind = "markdown",
                          value = "hover at " .. params.position.line .. ":" .. params.position.character } }
  elseif method == "textDocument/documentSymbol" then
    return { { name = "foo", kind = 12,
               range = { start = { line = 0, character = 0 }, ["end"] = { line = 1, character = 0 } },
               selectionRange = { start = { line = 0, character = 4 }, ["end"] = { line = 0, character = 7 } } } }
  end
  return vim.NIL
end
start_server("fakels", buf, answer)
"""


def test_lsp_tools_answer_from_the_attached_language_server(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "d.lua"
    path.write_text("def foo():\n    foo()\n")
    buf = edit(editor, path)
    editor.lua(FAKE_SERVER, buf)
    editor.wait(f"#vim.lsp.get_clients({{bufnr = {buf}, method = 'textDocument/hover'}}) == 1")
    other = tmp_path / "project" / "plain.txt"
    other.write_text("nothing\n")
    start(editor)
    at = {"path": "d.lua", "line": 2, "column": 5}
    definition, hover, symbols, none = call(
        editor,
        [
            {"tool": "lsp_definition", "arguments": at},
            {"tool": "lsp_hover", "arguments": at},
            {"tool": "lsp_symbols", "arguments": {"path": "d.lua"}},
            {"tool": "lsp_hover", "arguments": {"path": "plain.txt", "line": 1, "column": 1}},
        ],
    )
    [target] = definition["structuredContent"]["items"]
    assert (target["path"], target["line"], target["column"]) == (str(path), 1, 5)
    assert target["text"] == "def foo():"
    assert text(hover) == "hover at 1:4"
    [symbol] = symbols["structuredContent"]["items"]
    assert symbol["text"] == "[Function] foo"
    assert none["isError"] is True
    assert "No language server" in text(none)


WORKSPACE_SERVER = START_SERVER + """
local bufs, symbols = ...
start_server("fakews", bufs[1], function(method)
  return method == "initialize" and { capabilities = { workspaceSymbolProvider = true } }
    or method == "workspace/symbol" and symbols or vim.NIL
end)
for _, buf in ipairs(bufs) do
  vim.diagnostic.set(vim.api.nvim_create_namespace("test"), buf,
    { { lnum = 0, col = 0, severity = vim.diagnostic.severity.ERROR, message = "in " .. vim.fn.bufname(buf) } })
end
"""


def test_lsp_positions_are_characters_after_non_ascii_text(editor: Editor, tmp_path: Path) -> None:
    """The schemas promise columns in characters: lsp_symbols answered bytes (a
    workspace symbol's measured on the line of whatever buffer was current)."""
    path, other = tmp_path / "project" / "d.lua", tmp_path / "project" / "w.lua"
    path.write_text("déf foo():\n  «foo()»\n")
    other.write_text("x\n«» bar = 1\n")  # never opened in the editor
    buf = edit(editor, path)
    editor.lua(FAKE_SERVER, buf)
    bar = {"name": "bar", "kind": 13, "location": {"uri": other.as_uri(), "range": {
        "start": {"line": 1, "character": 3}, "end": {"line": 1, "character": 6}}}}  # fmt: skip
    editor.lua(WORKSPACE_SERVER, [buf], [bar])
    editor.wait(f"#vim.lsp.get_clients({{bufnr = {buf}, method = 'workspace/symbol'}}) == 1")
    editor.wait(f"#vim.lsp.get_clients({{bufnr = {buf}, method = 'textDocument/hover'}}) == 1")
    start(editor)
    at = {"path": "d.lua", "line": 2, "column": 4}  # the "f" after "«"
    definition, hover, symbols, found = call(
        editor,
        [
            {"tool": "lsp_definition", "arguments": at},
            {"tool": "lsp_hover", "arguments": at},
            {"tool": "lsp_symbols", "arguments": {"path": "d.lua"}},
            {"tool": "lsp_symbols", "arguments": {"query": "bar"}},
        ],
    )
    assert text(hover) == "hover at 1:3"  # UTF-16, the server's encoding
    [target] = definition["structuredContent"]["items"]
    assert (target["line"], target["column"], target["text"]) == (1, 5, "déf foo():")
    [symbol] = symbols["structuredContent"]["items"]
    assert (symbol["line"], symbol["column"], symbol["text"]) == (1, 5, "[Function] foo")
    [symbol] = found["structuredContent"]["items"]
    assert (symbol["path"], symbol["line"], symbol["column"]) == (str(other), 2, 4)
    assert (symbol["text"], symbol["kind"]) == ("[Variable] bar", "Variable")


@pytest.mark.parametrize("outside", ["ask", "deny", "allow"])
def test_listings_leave_out_files_outside_the_project_unless_fs_access_allows_them(
    editor: Editor, tmp_path: Path, outside: str
) -> None:
    """list_buffers, get_diagnostics and lsp_symbols without a path listed every
    buffer, a secret's outside the project too (its diagnostics quoting it), where a
    read of it was asked or denied by fs_access."""
    inside, secret = tmp_path / "project" / "in.lua", tmp_path / "credentials"
    inside.write_text("x = 1\n")
    secret.write_text("token = 1\n")
    bufs = [edit(editor, inside), edit(editor, secret)]
    symbols = [
        {"name": name, "kind": 13, "location": {"uri": path.as_uri(), "range": {
            "start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}}
        for name, path in (("x", inside), ("token", secret))
    ]  # fmt: skip
    editor.lua(WORKSPACE_SERVER, bufs, symbols)
    editor.wait(f"#vim.lsp.get_clients({{bufnr = {bufs[0]}, method = 'workspace/symbol'}}) == 1")
    start(editor, fs_access={"outside": outside})
    listed, diagnostics, found = call(
        editor,
        [
            {"tool": "list_buffers"},
            {"tool": "get_diagnostics"},
            {"tool": "lsp_symbols", "arguments": {"query": ""}},
        ],
    )
    paths = {
        "buffers": [b["path"] for b in listed["structuredContent"]["buffers"]],
        "diagnostics": [d["path"] for d in diagnostics["structuredContent"]["diagnostics"]],
        "symbols": [i["path"] for i in found["structuredContent"]["items"]],
    }
    if outside == "allow":
        assert paths == {key: [str(inside), str(secret)] for key in paths}
        return
    assert paths == {key: [str(inside)] for key in paths}
    for result in (listed, diagnostics, found):
        assert "credentials" not in json.dumps(result)
        assert "1 outside the session's directories left out (fs_access)" in text(result)
    # Nothing was asked: a listing asks no one.
    assert "asks to read" not in editor.transcript_text()


def test_edit_buffer_keeps_unsaved_text_and_shows_in_the_review(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "e.py"
    path.write_text("first = 1\nsecond = 2\n")
    buf = edit(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'first = 100'})", buf)
    start(editor)
    [result] = call(
        editor,
        [
            {
                "tool": "edit_buffer",
                "arguments": {"path": "e.py", "old_text": "second = 2", "new_text": "second = 3"},
            }
        ],
    )
    assert result["isError"] is False, text(result)
    assert editor.lua("return vim.api.nvim_buf_get_lines(..., 0, -1, false)", buf) == [
        "first = 100",
        "second = 3",
    ]
    [change] = editor.lua("return require('acp').changes()")
    assert change["path"] == str(path)
    assert [h["status"] for h in change["hunks"]] == ["pending"]
    # The disk got the agent's change alone; the user's line stays theirs, unsaved.
    assert path.read_text() == "first = 1\nsecond = 3\n"


def test_edit_buffer_keeps_the_line_endings_of_a_file_of_mixed_ones(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "mixed.txt"
    path.write_bytes(b"a\r\nb\nc\r\n")
    start(editor)
    arguments = {"path": "mixed.txt", "old_text": "c", "new_text": "C"}
    [result] = call(editor, [{"tool": "edit_buffer", "arguments": arguments}])
    assert result["isError"] is False, text(result)
    assert path.read_bytes() == b"a\r\nb\nC\r\n"


@pytest.mark.parametrize("endings", ["as read", "LF"])
@pytest.mark.parametrize("loaded", [True, False], ids=["buffer", "disk"])
def test_edit_buffer_takes_old_text_of_a_crlf_file_as_read_buffer_gave_it(
    editor: Editor, tmp_path: Path, loaded: bool, endings: str
) -> None:
    path = tmp_path / "project" / "dos.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    if loaded:
        buf = edit(editor, path)
        assert editor.lua("return vim.bo[...].fileformat", buf) == "dos"
    start(editor)
    [read] = call(editor, [{"tool": "read_buffer", "arguments": {"path": "dos.txt"}}])
    span = text(read).split("three")[0]  # "one", "two" and their line endings, as read
    if endings == "LF":
        span = span.replace("\r\n", "\n")
    arguments = {"path": "dos.txt", "old_text": span, "new_text": "ONE\r\n"}
    [result] = call(editor, [{"tool": "edit_buffer", "arguments": arguments}], turn=2)
    assert result["isError"] is False, text(result)
    assert path.read_bytes() == b"ONE\r\nthree\r\n"


def test_open_file_leaves_a_file_open_in_another_neovim_to_the_user(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "s.txt"
    path.write_text("one\ntwo\n")
    with open_elsewhere(editor, path):
        start(editor)
        [result] = call(editor, [{"tool": "open_file", "arguments": {"path": "s.txt"}}])
        # Not shown past Neovim's E325: opening it, the user is offered its swap file.
        why = "a swap file exists for it: it is open in another Neovim, or one crashed editing it"
        assert result["isError"] is True
        assert text(result) == f"The editor could not do it: cannot show {path}: {why}"
        assert editor.lua("return vim.fn.bufloaded(...)", str(path)) == 0


def test_a_connection_without_the_token_is_refused(editor: Editor) -> None:
    start(editor)
    [servers] = call(editor, "servers")
    env = {v["name"]: v["value"] for v in servers[0]["env"]}
    for hello in (b"\n", b'{"token": "not-the-token"}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(env["ACP_NVIM_MCP_SOCKET"])
            sock.sendall(hello)
            assert b'"ok": false' in sock.recv(1024)
    log = editor.lua("return require('acp.host').request('log')")
    assert sum("refused an MCP connection" in line for line in log) == 2


def test_editor_mcp_false_offers_no_server(editor: Editor) -> None:
    start(editor, editor_mcp=False)
    [servers] = call(editor, "servers")
    assert servers == []


@pytest.mark.parametrize("version", [1, 2])
def test_the_demo_agent_asks_the_editor(editor: Editor, tmp_path: Path, version: int) -> None:
    path = tmp_path / "project" / "notes.md"
    path.write_text("# notes\n")
    edit(editor, path)
    editor.setup(protocol_version=version)
    editor.open_chat("demo")
    editor.lua("require('acp').send('buffers and diagnostics please')")
    editor.wait_event("AcpTurnEnd")
    transcript = editor.transcript_text()
    assert "`list_buffers` answered:\n\n```json\n" in transcript
    assert str(path) in transcript
    # Plain text in a plain fence (not highlighted as JSON).
    assert "`get_diagnostics` answered:\n\n```\nNo diagnostics in the open buffers." in transcript


def test_checkhealth_reports_the_mcp_servers(editor: Editor) -> None:
    editor.setup(
        mcp_servers={
            "gh": {"command": "no-such-mcp-server", "args": ["--stdio"]},
            "web": {"type": "http", "url": "http://127.0.0.1:1/mcp"},
            "events": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        }
    )
    editor.open_chat("demo")  # its session is offered the editor server: the socket opens
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert "OK the editor MCP server offers 12 tools: list_buffers, read_buffer" in text
    assert "OK its stdio shim runs" in text
    assert "mcp.sock (directory only you can open), 0 connections" in text
    assert 'ERROR gh: "no-such-mcp-server" is not installed or not on PATH' in text
    assert "OK web: http://127.0.0.1:1/mcp (http)" in text
    assert "OK events: http://127.0.0.1:1/sse (sse)" in text


def test_the_socket_directory_goes_when_the_host_is_killed(editor: Editor) -> None:
    """No finally runs in a host killed outright: the reaper it handed its socket's
    directory to (its child, in a session of its own) removes it."""
    editor.open_chat("demo")  # its session is offered the editor server: the socket opens
    directory = Path(editor.lua("return require('acp.host').request('mcp')")["socket"]).parent
    assert directory.is_dir()
    host = editor.lua("return vim.fn.jobpid(require('acp.host').chan)")
    [reaper] = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and (found := proc.stat(entry.name)) is not None
        and found.parent == host
        and _cmdline(entry).startswith(b"/bin/sh\0-c\0\ntrap")
    ]
    os.kill(host, signal.SIGKILL)
    assert wait_gone([reaper]) == []
    assert not directory.exists()


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize(("scenario", "version"), [("mcp", 1), ("mcp_v2", 2)])
def test_the_users_servers_reach_the_agent_and_no_secret_reaches_the_log(
    editor: Editor, scenario: str, version: int
) -> None:
    """mcp_servers on the wire of each version, global and per agent; the values of
    their env and headers, and the editor server's token, stay out of :AcpLog."""
    token, bearer = "ghp_not_for_the_log", "Bearer not-for-the-log"
    fake, other = editor.fake_agent(scenario), editor.fake_agent(scenario)
    fake["mcp_servers"] = {"mine": {"command": "sh", "args": ["-c", "true"]}}
    editor.setup(
        agents={"fake": fake, "other": other},
        protocol_version=version,
        mcp_servers={
            "gh": {"command": "sh", "env": {"GITHUB_TOKEN": token}},
            "web": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                    "headers": {"Authorization": bearer}},
        },
    )  # fmt: skip
    editor.open_chat("fake")
    [servers] = call(editor, "servers")
    by_name = {s["name"]: s for s in servers}
    assert sorted(by_name) == ["gh", "mine", "nvim", "web"]
    stdio = {"type": "stdio"} if version == 2 else {}
    assert by_name["gh"] == {
        **stdio, "name": "gh", "command": by_name["gh"]["command"], "args": [],
        "env": [{"name": "GITHUB_TOKEN", "value": token}],
    }  # fmt: skip
    assert os.path.basename(by_name["gh"]["command"]) == "sh"
    assert by_name["web"] == {
        "type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp",
        "headers": [{"name": "Authorization", "value": bearer}],
    }  # fmt: skip
    assert by_name["mine"]["args"] == ["-c", "true"]
    editor_token = next(v["value"] for v in by_name["nvim"]["env"] if "TOKEN" in v["name"])
    # Another agent gets the global servers, not this one's own.
    editor.lua("require('acp').open({agent = 'other', new = true})")
    editor.wait_event("AcpSessionReady", count=2)
    [servers] = call(editor, "servers", turn=2)
    assert sorted(s["name"] for s in servers) == ["gh", "nvim", "web"]
    # (What the fake agent says back, RESULT lines, is its own business.)
    sent = [line for line in editor.lua("return require('acp.host').request('log')")]
    log = "\n".join(line for line in sent if " >> " in line)
    assert '"mcpServers"' in log and "<redacted>" in log
    for secret in (token, bearer, editor_token):
        assert secret not in log


def test_an_sse_server_reaches_an_agent_that_takes_sse_and_is_said_to_others(
    editor: Editor,
) -> None:
    """v1's third transport: opencode advertises ``mcpCapabilities.sse``, yet no
    server could be configured as `sse`. An agent without it is told of, not sent one."""
    bearer = "Bearer not-for-the-log"
    events = {"type": "sse", "url": "http://127.0.0.1:9/sse", "headers": {"Authorization": bearer}}
    editor.setup(
        agents={"opencode": editor.fake_agent("mcp_sse"), "http_only": editor.fake_agent("mcp")},
        mcp_servers={"events": events},
    )
    editor.open_chat("opencode")
    [servers] = call(editor, "servers")
    assert {s["name"]: s for s in servers}["events"] == {
        "type": "sse", "name": "events", "url": "http://127.0.0.1:9/sse",
        "headers": [{"name": "Authorization", "value": bearer}],
    }  # fmt: skip
    editor.lua("_G.acp_notices = {}")
    editor.lua("require('acp').open({agent = 'http_only', new = true})")
    editor.wait_event("AcpSessionReady", count=2)
    [servers] = call(editor, "servers", turn=2)
    assert [s["name"] for s in servers] == ["nvim"]
    said = "http_only cannot take MCP server 'events': it takes no sse MCP servers"
    assert f"*{said}.*" in editor.transcript()
    assert {"level": 3, "msg": f"acp: {said}"} in editor.lua("return _G.acp_notices")


@pytest.mark.parametrize(("scenario", "version"), [("mcp", 1), ("mcp_v2", 2)])
def test_a_refused_call_does_not_make_an_existing_file_new(
    editor: Editor, tmp_path: Path, scenario: str, version: int
) -> None:
    """Issue 27.3: after an MCP read refused by fs_access, an edit of an existing file
    was listed as created, and rejecting it deleted the user's file. An MCP client may
    call tools at any time, here before the first prompt."""
    path = tmp_path / "project" / "keep.txt"
    path.write_text("one\ntwo\n")
    servers_file = tmp_path / "servers.json"
    agent = editor.fake_agent(scenario)
    agent["env"] = {"FAKE_MCP_SERVERS": str(servers_file)}
    editor.setup(agents={"fake": agent}, fs_access={"outside": "deny"}, protocol_version=version)
    assert editor.open_chat("fake")["protocol_version"] == version
    server = editor_server(json.loads(servers_file.read_text()))
    assert server is not None

    async def calls() -> list[Any]:
        async with mcp_session(server) as mcp:
            return [
                await mcp.request("tools/call", {"name": name, "arguments": arguments}, dict)
                for name, arguments in [
                    ("read_buffer", {"path": "/etc/passwd"}),
                    ("edit_buffer", {"path": "keep.txt", "old_text": "two", "new_text": "TWO"}),
                ]
            ]

    refused, edited = anyio.run(calls)
    assert refused["isError"] is True and "fs_access" in text(refused)
    assert edited["isError"] is False, text(edited)
    editor.wait("require('acp').changes()[1] ~= nil", what="the edit in the review")
    [change] = editor.lua("return require('acp').changes()")
    assert (change["path"], change["created"]) == (str(path), False)
    assert [h["status"] for h in change["hunks"]] == ["pending"]
    editor.lua("require('acp').reject()")
    editor.wait(f"vim.fn.readfile({str(path)!r})[2] == 'two'", what="the rejected edit undone")
    assert path.read_text() == "one\ntwo\n"


@pytest.mark.parametrize(("scenario", "version"), [("mcp", 1), ("mcp_v2", 2)])
def test_an_edit_on_a_full_disk_is_one_clear_error_and_changes_nothing(
    editor: Editor, tmp_path: Path, scenario: str, version: int
) -> None:
    """Issue 27.6 through the editor's tools (how a v2 agent writes): the tool says why,
    the file keeps its text, the review holds nothing."""
    with small_disk(tmp_path / "project" / "full") as full:
        path = full / "keep.txt"
        path.write_text("one\ntwo\n")
        servers_file = tmp_path / "servers.json"
        agent = editor.fake_agent(scenario)
        agent["env"] = {"FAKE_MCP_SERVERS": str(servers_file)}
        editor.setup(agents={"fake": agent}, protocol_version=version)
        assert editor.open_chat("fake")["protocol_version"] == version
        server = editor_server(json.loads(servers_file.read_text()))
        assert server is not None
        fill(full, room=0)
        arguments = {"path": str(path), "old_text": "two", "new_text": "x" * 10_000}

        async def call_edit() -> dict[str, Any]:
            async with mcp_session(server) as mcp:
                return await mcp.request(
                    "tools/call", {"name": "edit_buffer", "arguments": arguments}, dict
                )

        result = anyio.run(call_edit)
        assert result["isError"] is True
        assert text(result).endswith(f"cannot write {path}: No space left on device"), text(result)
        assert path.read_text() == "one\ntwo\n"
        assert editor.lua("return require('acp').changes()") == []
        assert not [name for name in os.listdir(full) if name.endswith(".acp~")]


class Relay:
    """The editor's stdio shim as an agent drives it, a line at a time, so that the
    test can answer prompts in Neovim while a tool call waits."""

    def __init__(self, server: dict[str, Any]) -> None:
        env = {**os.environ, **{v["name"]: v["value"] for v in server.get("env") or []}}
        self.process = subprocess.Popen(
            [server["command"], *server["args"]],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.ids = itertools.count(1)
        self.answers: dict[int, Any] = {}
        self.unread = b""  # read from the shim, not yet a whole line
        self.answer(self.start("initialize", {"protocolVersion": "2025-11-25",
                                              "capabilities": {}, "clientInfo": {"name": "t"}}))  # fmt: skip
        self.send({"method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        self.process.stdin.flush()

    def start(self, method: str, params: dict[str, Any]) -> int:
        request_id = next(self.ids)
        self.send({"id": request_id, "method": method, "params": params})
        return request_id

    def call(self, name: str, arguments: dict[str, Any]) -> int:
        return self.start("tools/call", {"name": name, "arguments": arguments})

    def cancel(self, request_id: int) -> None:
        self.send({"method": "notifications/cancelled", "params": {"requestId": request_id}})

    def answer(self, request_id: int, timeout: float = 15) -> Any:
        """The response to ``request_id``; None when the shim ends without one."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        while request_id not in self.answers:
            if b"\n" not in self.unread:
                ready, _, _ = select.select([out], [], [], timeout)
                assert ready, f"no answer to request {request_id} within {timeout} s"
                data = os.read(out, 65536)
                if not data:
                    return None
                self.unread += data
                continue
            line, self.unread = self.unread.split(b"\n", 1)
            message = json.loads(line)
            if "id" in message and "method" not in message:
                self.answers[message["id"]] = message
        return self.answers.pop(request_id)


@contextmanager
def relay(editor: Editor, tmp_path: Path, **options: Any) -> Iterator[Relay]:
    """A chat with the fake agent, and the editor server it was offered."""
    servers_file = tmp_path / "servers.json"
    agent = editor.fake_agent("mcp")
    agent["env"] = {"FAKE_MCP_SERVERS": str(servers_file)}
    editor.setup(agents={"fake": agent}, **options)
    editor.open_chat("fake")
    server = editor_server(json.loads(servers_file.read_text()))
    assert server is not None
    mcp = Relay(server)
    with mcp.process:  # closes the pipes, waits for the shim
        yield mcp


def block_status(editor: Editor, title: str, status: str) -> None:
    """Wait for the tool call block ``title`` to read ``status``."""
    wait_text(editor, f"#### {title}")
    editor.wait(
        "vim.tbl_contains(vim.tbl_map(function(e) return e.data.title .. ' ' .. e.data.status end,"
        f" vim.tbl_filter(function(e) return e.name == 'AcpToolCall' end, _G.acp_events)),"
        f" {f'{title} {status}'!r})",
        what=f"{title}: {status}",
    )


def test_a_write_outside_withdrawn_at_its_prompt_ends_cancelled(
    editor: Editor, tmp_path: Path
) -> None:
    """notifications/cancelled while fs_access asks: the block said "pending" forever."""
    with relay(editor, tmp_path) as mcp:
        target = tmp_path / "outside.txt"
        request = mcp.call("write_file", {"path": str(target), "content": "x\n"})
        wait_text(editor, PROMPT)
        mcp.cancel(request)
        block_status(editor, f"Write {target}", "cancelled")
        assert "`edit` · cancelled" in editor.transcript_text()
        assert PROMPT not in editor.transcript_text()
        assert mcp.answer(mcp.start("ping", {})) is not None  # no answer came before it
        assert request not in mcp.answers
        assert not target.exists()


def test_a_command_whose_cwd_is_no_directory_ends_failed_with_the_reason(
    editor: Editor, tmp_path: Path
) -> None:
    with relay(editor, tmp_path) as mcp:
        request = mcp.call("run_command", {"command": "pwd", "cwd": "nonexistent"})
        wait_text(editor, PROMPT)
        focus_transcript(editor)
        editor.nvim.input("a")
        answer = mcp.answer(request)
        assert answer["result"]["isError"] is True
        block_status(editor, "Run `pwd` in nonexistent", "failed")
        assert "cwd is not a directory: " in editor.transcript_text()
        assert "`execute` · failed" in editor.transcript_text()


def test_a_command_to_run_elsewhere_says_where_at_its_prompt(
    editor: Editor, tmp_path: Path
) -> None:
    """run_command with a cwd out of the project was asked as "Run `ls`": the user
    allowed it taking it to run in the project."""
    with relay(editor, tmp_path) as mcp:
        request = mcp.call("run_command", {"command": "ls", "cwd": str(tmp_path)})
        wait_text(editor, PROMPT)
        assert f"#### Run `ls` in {tmp_path}\n" in editor.transcript_text()
        focus_transcript(editor)
        editor.nvim.input("r")
        assert mcp.answer(request)["result"]["isError"] is True


def test_a_running_command_withdrawn_is_killed_and_ends_cancelled(
    editor: Editor, tmp_path: Path
) -> None:
    with relay(editor, tmp_path, permission_policy="allow_all") as mcp:
        request = mcp.call("run_command", {"command": "sleep 100; echo done"})
        block_status(editor, "Run `sleep 100; echo done`", "in_progress")
        mcp.cancel(request)
        block_status(editor, "Run `sleep 100; echo done`", "cancelled")
        wait_text(editor, "`execute` · cancelled")  # the block's line may come a batch later


def test_closing_the_chat_answers_a_tool_call_waiting_on_a_prompt(
    editor: Editor, tmp_path: Path
) -> None:
    """:AcpClose while write_file waited on its fs_access prompt: the shim exited
    and the agent never heard of the call again."""
    with relay(editor, tmp_path) as mcp:
        request = mcp.call("write_file", {"path": str(tmp_path / "outside.txt"), "content": "x"})
        wait_text(editor, PROMPT)
        editor.nvim.command("AcpClose")
        answer = mcp.answer(request)
        assert answer is not None, "the shim ended without answering"
        assert answer["error"]["message"] == "the chat was closed"
        assert not (tmp_path / "outside.txt").exists()


def test_editor_mcp_without_tools_offers_no_server_and_health_says_it_is_off(
    editor: Editor,
) -> None:
    """`editor_mcp = { tools = {} }`: :checkhealth said "OK the editor MCP server
    offers 0 tools: " (a dangling colon)."""
    start(editor, editor_mcp={"tools": []})
    [servers] = call(editor, "servers")
    assert servers == []
    editor.nvim.command("checkhealth acp")
    text = "\n".join(editor.nvim.current.buffer[:])
    assert "the editor MCP server is off (editor_mcp.tools is empty)" in text
    assert "0 tools" not in text


def test_a_file_over_16_mb_is_read_in_parts(editor: Editor, tmp_path: Path) -> None:
    """read_buffer refused a big file even for a slice of two lines, and said only
    that it was larger than 16 MB."""
    path = tmp_path / "project" / "big.log"
    path.write_text("".join(f"line {i} {'x' * 80}\n" for i in range(1, 200_001)))
    assert path.stat().st_size > 16 * 2**20
    start(editor)
    whole, part, past = call(
        editor,
        [
            {"tool": "read_buffer", "arguments": {"path": "big.log"}},
            {"tool": "read_buffer", "arguments": {"path": "big.log", "line": 199_999, "limit": 5}},
            {"tool": "read_buffer", "arguments": {"path": "big.log", "line": 200_002}},
        ],
    )
    assert whole["isError"] is True
    assert text(whole) == f"{path} is larger than 16 MB: read it in parts (line, limit)"
    assert part["isError"] is False
    assert text(part) == f"line 199999 {'x' * 80}\nline 200000 {'x' * 80}\n"
    assert text(past) == f"{path}: line 200002 is past the end of the file (200000 lines)"


def test_open_file_without_a_line_shows_it_and_refuses_what_it_cannot_show(
    editor: Editor, tmp_path: Path
) -> None:
    """`open_file` without `line` was a Lua stack trace for every path (Python's None
    reached Lua as vim.NIL), so a missing file, a directory or a file outside the
    project got the same trace, not a refusal."""
    project = tmp_path / "project"
    (project / "a.py").write_text("one\ntwo\n")
    (project / "sub").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("not the project's\n")
    start(editor, fs_access={"outside": "deny"})
    shown, missing, directory, denied = call(
        editor,
        [
            {"tool": "open_file", "arguments": {"path": path}}
            for path in ("a.py", "missing.txt", "sub", str(outside))
        ],
    )
    assert (shown["isError"], text(shown)) == (False, f"Showed {project / 'a.py'} to the user.")
    window = editor.lua("return vim.fn.bufwinid(...)", str(project / "a.py"))
    assert editor.lua("return vim.api.nvim_win_get_cursor(...)", window) == [1, 0]
    assert (missing["isError"], text(missing)) == (True, f"{project / 'missing.txt'}: no such file.")
    assert (directory["isError"], text(directory)) == (True, f"{project / 'sub'} is a directory.")
    assert denied["isError"] is True and "fs_access" in text(denied), text(denied)
    assert editor.lua("return vim.fn.bufnr(...)", str(outside)) == -1


def test_open_file_past_the_last_line_says_where_the_cursor_went(
    editor: Editor, tmp_path: Path
) -> None:
    """`open_file` at line 999 of a 2-line file answered "at line 999" while the
    cursor went to line 2."""
    path = tmp_path / "project" / "a.py"
    path.write_text("one\ntwo\n")
    start(editor)
    past, within = call(
        editor,
        [
            {"tool": "open_file", "arguments": {"path": "a.py", "line": 999}},
            {"tool": "open_file", "arguments": {"path": "a.py", "line": 1}},
        ],
    )
    assert (past["isError"], text(past)) == (
        False,
        f"Showed {path} at line 2, its last, to the user: no line 999.",
    )
    assert text(within) == f"Showed {path} at line 1 to the user."
    window = editor.lua("return vim.fn.bufwinid(...)", str(path))
    assert editor.lua("return vim.api.nvim_win_get_cursor(...)", window) == [1, 0]


def test_a_line_with_a_nul_byte_leaves_buffers_and_selection_readable(
    editor: Editor, tmp_path: Path
) -> None:
    """The cursor or the selection on a line holding a NUL byte (a Lua string that
    vim.fn takes for a Blob: E1174) failed list_buffers, get_selection and
    resources/list whole: one such buffer hid every buffer from the agent."""
    project = tmp_path / "project"
    (project / "a.py").write_text("x = 1\n")
    data = project / "bin.dat"
    data.write_bytes("ab\0dé f\nmore\n".encode())
    edit(editor, project / "a.py")
    edit(editor, data)
    editor.nvim.input("1G0v4l<Esc>")
    editor.wait("vim.fn.mode() == 'n' and vim.api.nvim_buf_get_mark(0, '>')[2] == 4")
    servers_file = tmp_path / "servers.json"
    agent = editor.fake_agent("mcp")
    agent["env"] = {"FAKE_MCP_SERVERS": str(servers_file)}
    editor.setup(agents={"fake": agent})
    editor.open_chat("fake")
    server = editor_server(json.loads(servers_file.read_text()))
    assert server is not None

    async def ask() -> list[Any]:
        async with mcp_session(server) as mcp:
            return [
                await mcp.request("tools/call", {"name": "list_buffers"}, dict),
                await mcp.request("tools/call", {"name": "get_selection"}, dict),
                await mcp.request("resources/list", {}, dict),
            ]

    buffers, selection, resources = anyio.run(ask)
    assert buffers["isError"] is False, text(buffers)
    listed = {b["path"]: b for b in buffers["structuredContent"]["buffers"]}
    assert sorted(listed) == [str(project / "a.py"), str(data)]
    assert listed[str(data)]["cursor"] == [1, 5]  # on "é", the 5th character
    assert selection["isError"] is False, text(selection)
    chosen = selection["structuredContent"]
    assert (chosen["start"], chosen["end"], chosen["text"]) == ([1, 1], [1, 5], "ab\0dé")
    assert sorted(r["name"] for r in resources["resources"]) == ["a.py", "bin.dat"]


def test_a_fifo_is_neither_shown_nor_loaded_for_a_language_server(
    editor: Editor, tmp_path: Path
) -> None:
    """open_file and the LSP tools on a FIFO in the project had Neovim read it as a
    file: it waited for a writer, so the call never ended and the editor froze."""
    pipe = tmp_path / "project" / "pipe"
    os.mkfifo(pipe)
    calls = [
        ("open_file", {"path": "pipe"}),
        ("lsp_hover", {"path": "pipe", "line": 1, "column": 1}),
        ("lsp_symbols", {"path": "pipe"}),
    ]
    with relay(editor, tmp_path) as mcp:
        for name, arguments in calls:
            answer = mcp.answer(mcp.call(name, arguments))["result"]
            assert answer["isError"] is True, name
            assert text(answer) == f"{pipe} is not a regular file.", name
        assert editor.lua("return vim.fn.bufnr(...)", str(pipe)) == -1


def test_a_lone_surrogate_in_a_call_is_written_as_a_replacement_character(
    editor: Editor, tmp_path: Path
) -> None:
    """A string cut inside an emoji, as JavaScript agents' JSON.stringify sends it
    ("\\ud83d"), made the whole request unreadable: a parse error without its id,
    so the agent waited for an answer for ever."""
    with relay(editor, tmp_path) as mcp:
        content = "cut 😀"[:-1] + "\ud83d\n"
        answer = mcp.answer(mcp.call("write_file", {"path": "cut.txt", "content": content}))
        assert answer["result"]["isError"] is False, answer
    assert (tmp_path / "project" / "cut.txt").read_text() == "cut \ufffd\n"
