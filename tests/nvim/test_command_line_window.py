"""The command-line window (q:), where no window may open, close or be entered
(E11): what would open one there waits until it closes, and nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.nvim.conftest import Editor
from tests.nvim.test_login import open_needing_login
from tests.nvim.test_mcp import start, text
from tests.nvim.test_terminals import open_fake

IN_CMDWIN = "vim.fn.getcmdwintype() ~= ''"
# Counts the batches Python sends, so that a test knows one came while it waits.
COUNT_BATCHES = """
local host = require('acp.host')
local apply = host.apply
_G.batches = 0
host.apply = function(...)
  _G.batches = _G.batches + 1
  return apply(...)
end
"""

# The agent sent a tool's result, seen in its log: what the chat draws of it waits.
AGENT_REPLIED = (
    "vim.iter(require('acp.host').request('log')):any(function(line)"
    " return line:find('RESULT ', 1, true) ~= nil end)"
)

FILE_WINDOW = """
local status = require('acp').status()
for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  local buf = vim.api.nvim_win_get_buf(win)
  if buf ~= status.transcript_buf and buf ~= status.input_buf then
    return vim.api.nvim_set_current_win(win)
  end
end
"""


def open_cmdwin(editor: Editor) -> None:
    """q: in Normal mode, from a window of the tab page that is not the chat's (`q`
    there closes the chat)."""
    editor.lua(FILE_WINDOW)
    editor.nvim.input("<C-\\><C-n>q:")
    editor.wait(IN_CMDWIN, what="the command-line window")


def leave_cmdwin(editor: Editor) -> None:
    editor.nvim.input(":quit<CR>")  # not <C-c>: an interrupt may flush the typeahead
    editor.wait(f"not ({IN_CMDWIN})", what="the command-line window closed")


def notices(editor: Editor) -> list[str]:
    return [n["msg"] for n in editor.lua("return _G.acp_notices")]


def test_a_command_that_opens_a_window_runs_once_the_command_line_window_closes(
    editor: Editor,
) -> None:
    editor.setup()
    editor.open_chat()
    tabs = editor.lua("return vim.fn.tabpagenr('$')")
    open_cmdwin(editor)
    editor.nvim.command("AcpLog")  # typed after `:` in the command-line window
    assert notices(editor) == ["acp: :AcpLog opens once the command-line window closes"]
    assert editor.lua("return vim.fn.tabpagenr('$')") == tabs
    leave_cmdwin(editor)
    editor.wait("vim.api.nvim_buf_get_name(0) == 'acp://log'", what="the log's tab page")
    assert editor.lua("return vim.fn.tabpagenr('$')") == tabs + 1
    assert len(notices(editor)) == 1


def test_acpedit_in_the_command_line_window_shows_the_chat_once_it_closes(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello there')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.command("AcpToggle")
    shown = "#vim.fn.win_findbuf(require('acp').status().input_buf) > 0"
    assert not editor.lua(f"return {shown}")
    editor.lua(COUNT_BATCHES)
    open_cmdwin(editor)
    editor.nvim.command("AcpEdit")
    editor.wait("_G.batches > 0", what="the edit's batch")
    assert not editor.lua(f"return {shown}")
    leave_cmdwin(editor)
    editor.wait(shown, what="the chat shown again")
    input_buf = editor.lua("return require('acp').status().input_buf")
    assert editor.nvim.buffers[input_buf][:] == ["hello there"]
    assert editor.lua("return vim.api.nvim_get_current_buf()") == input_buf


def test_an_export_asked_in_the_command_line_window_opens_once_it_closes(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello there')")
    editor.wait_event("AcpTurnEnd")
    tabs = editor.lua("return vim.fn.tabpagenr('$')")
    editor.lua(COUNT_BATCHES)
    open_cmdwin(editor)
    editor.nvim.command("AcpExport")
    editor.wait("_G.batches > 0", what="the export's reply")
    assert editor.lua("return vim.fn.tabpagenr('$')") == tabs
    leave_cmdwin(editor)
    editor.wait(f"vim.fn.tabpagenr('$') == {tabs + 1}", what="the export's buffer")
    assert "## You" in editor.nvim.current.buffer[:]
    assert notices(editor) == []


def test_a_batch_that_came_in_the_command_line_window_is_applied_whole_after_it(
    editor: Editor,
) -> None:
    editor.setup()
    status = editor.open_chat()
    editor.nvim.command("AcpToggle")
    open_cmdwin(editor)
    # An op that shows the chat, then more of the same batch, then a later batch.
    batch = [
        {"kind": "render", "chat": status["chat"], "ops": [
            {"op": "edit", "turn": 1, "text": "again"},
            {"op": "block", "id": "late", "kind": "agent", "lines": ["drawn after the edit"]},
        ]},
        {"kind": "event", "name": "AcpQueued", "data": {"chat": status["chat"]}},
    ]  # fmt: skip
    editor.lua("require('acp.host').apply(...)", batch)
    editor.lua("require('acp.host').apply(...)", [{"kind": "notify", "message": "later"}])
    assert editor.events("AcpQueued") == [] and notices(editor) == []
    leave_cmdwin(editor)
    editor.wait_event("AcpQueued")
    editor.wait("#_G.acp_notices > 0", what="the later batch")
    assert notices(editor) == ["acp: later"]
    assert "drawn after the edit" in editor.transcript_text()
    assert editor.lua("return vim.fn.win_findbuf(require('acp').status().input_buf)") != []


def test_a_file_the_agent_shows_in_the_command_line_window_opens_once_it_closes(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent's `open_file` there failed (E11 in Python) and showed nothing."""
    project = tmp_path / "project"
    (project / "a.py").write_text("one\ntwo\n")
    start(editor)
    open_cmdwin(editor)
    call = {"tool": "open_file", "arguments": {"path": "a.py", "line": 2}}
    editor.lua("require('acp').send(...)", json.dumps([call]))
    editor.wait(AGENT_REPLIED, what="the tool's result sent")
    leave_cmdwin(editor)
    editor.wait_event("AcpTurnEnd")
    (result,) = [
        json.loads(line.split("RESULT ", 1)[1])
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ]
    assert (result["isError"], text(result)) == (
        False,
        f"{project / 'a.py'} is shown to the user once they leave the command-line window.",
    )
    window = editor.lua("return vim.fn.bufwinid(...)", str(project / "a.py"))
    assert editor.lua("return vim.api.nvim_win_get_cursor(...)", window) == [2, 0]
    assert notices(editor) == []


# Each call Python makes of acp.editor.terminal's functions, with whether the
# command-line window was open and how it went.
RECORD_TERMINAL_CALLS = """
local term = require('acp.editor.terminal')
_G.terminal_calls = {}
for name, fn in pairs(term) do
  if type(fn) == 'function' then
    term[name] = function(...)
      local result = { pcall(fn, ...) }
      table.insert(_G.terminal_calls, {
        name = name, cmdwin = vim.fn.getcmdwintype() ~= '', ok = result[1], value = result[2],
      })
      if not result[1] then
        error(result[2], 0)
      end
      return unpack(result, 2)
    end
  end
end
"""
# Python asked for the agent's terminal in the command-line window and now waits
# for it to close; or Neovim refused the terminal.
TERMINAL_WAITS = (
    "vim.iter(_G.terminal_calls):any(function(c) return c.name == 'allowed' or not c.ok end)"
)


def terminal_calls(editor: Editor) -> list[dict[str, Any]]:
    return list(editor.lua("return _G.terminal_calls"))


def test_a_command_the_agent_runs_in_the_command_line_window_runs_once_it_closes(
    editor: Editor,
) -> None:
    """terminal/create failed there (E11: Neovim makes no terminal in it) and the
    agent's command never ran. It waits for the window to close, then runs whole,
    and what it did is reviewed and watched as any command's."""
    (editor.tmp / "project" / "notes.txt").write_text("mine\n")
    open_fake(editor)
    editor.lua(RECORD_TERMINAL_CALLS)
    open_cmdwin(editor)
    report = editor.tmp / "report.json"
    create = {"command": "echo theirs > notes.txt; seq 3000; exit 3", "outputByteLimit": 100_000}
    script = {"create": create, "report_to": str(report)}
    editor.lua("require('acp').send(...)", json.dumps(script))
    editor.wait(TERMINAL_WAITS, what="the agent's command asked for")
    assert [c for c in terminal_calls(editor) if not c["ok"]] == []
    assert editor.lua("return vim.tbl_isempty(require('acp.editor.terminal').terminals)")
    leave_cmdwin(editor)
    editor.wait_event("AcpTurnEnd")
    result = json.loads(report.read_text())
    assert result["output"] == "".join(f"{i}\n" for i in range(1, 3001))
    assert result["exit"] == {"exitCode": 3}
    key = result["terminalId"]
    assert f"[terminal {key} · exit 3] echo theirs > notes.txt;" in editor.transcript_text()
    creates = [c for c in terminal_calls(editor) if c["name"] == "create"]
    assert [c["cmdwin"] for c in creates] == [True, False]
    editor.nvim.command("AcpReview")
    review = editor.nvim.current.buffer[:]
    assert "M notes.txt  [disk]" in review and "  @@ -1 +1 @@ pending" in review
    # The terminal is a real one the user opens as any other.
    editor.nvim.command("AcpTerminal")
    assert editor.lua("return vim.bo.buftype") == "terminal"
    assert editor.lua("return vim.api.nvim_buf_get_name(0)").endswith(f"acp://terminal/{key}")
    editor.wait("vim.fn.getline(1) == '1'", what="the output in the terminal")


def test_a_terminal_login_asked_in_the_command_line_window_opens_once_it_closes(
    editor: Editor,
) -> None:
    open_needing_login(editor)
    editor.lua(RECORD_TERMINAL_CALLS)
    open_cmdwin(editor)
    editor.nvim.command("AcpLogin tui")  # typed after `:` in the command-line window
    editor.wait(TERMINAL_WAITS, what="the login's terminal asked for")
    assert notices(editor) == []
    leave_cmdwin(editor)
    editor.wait("vim.bo.buftype == 'terminal'", what="the login terminal in front")
    editor.wait("vim.fn.join(vim.fn.getline(1, '$')):find('Press Enter') ~= nil", what="the login")
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "t"
    editor.lua("vim.api.nvim_chan_send(vim.bo.channel, '\\r')")
    editor.wait_event("AcpSessionReady")
    assert (editor.tmp / "logged-in").exists()


def test_a_cancel_while_the_agents_command_waits_for_the_window_starts_nothing(
    editor: Editor,
) -> None:
    """The user cancels the turn (:AcpCancel given there): the agent's waiting
    command is refused at once and does not run once the window closes."""
    open_fake(editor)
    editor.lua(RECORD_TERMINAL_CALLS)
    open_cmdwin(editor)
    script = {"create": {"command": "echo never"}, "report_to": str(editor.tmp / "report.json")}
    editor.lua("require('acp').send(...)", json.dumps(script))
    editor.wait(TERMINAL_WAITS, what="the agent's command asked for")
    editor.nvim.command("AcpCancel")
    refused = (
        "vim.iter(require('acp.host').request('log')):any(function(line)"
        " return line:find('was stopped before it could start', 1, true) ~= nil end)"
    )
    editor.wait(refused, what="the agent told")
    leave_cmdwin(editor)
    editor.wait_event("AcpTurnEnd")
    assert editor.lua("return vim.tbl_isempty(require('acp.editor.terminal').terminals)")
    assert [c["name"] for c in terminal_calls(editor)].count("create") == 1
    assert not (editor.tmp / "report.json").exists()


def test_a_display_terminal_started_afresh_in_the_command_line_window_leaves_nothing_behind(
    editor: Editor,
) -> None:
    """An agent's display terminal (ACP v2) starting afresh there left its old
    buffer behind (E11 deleting it) and the new one without its name."""
    editor.setup()
    term = "require('acp.editor.terminal')"
    editor.lua(f"{term}.write('d1', 'old screen', false)")
    old = editor.lua(f"{term}.open('d1'); vim.cmd.wincmd('p'); return {term}.terminals.d1.buf")
    window = editor.lua(f"return vim.fn.bufwinid({old})")
    editor.nvim.input("q:")
    editor.wait(IN_CMDWIN, what="the command-line window")
    editor.lua(f"{term}.write('d1', 'fresh', true)")
    editor.lua(f"{term}.write('d1', ' and more', false)")
    new = editor.lua(f"return {term}.terminals.d1.buf")
    assert new != old
    leave_cmdwin(editor)
    editor.wait(f"vim.api.nvim_win_get_buf({window}) == {new}", what="the window on the new screen")
    assert editor.lua(f"return vim.api.nvim_buf_is_valid({old})") is False
    assert editor.lua(f"return vim.api.nvim_buf_get_name({new})").endswith("acp://terminal/d1")
    editor.wait(f"vim.api.nvim_buf_get_lines({new}, 0, 1, false)[1] == 'fresh and more'")


def test_a_chat_closed_in_the_command_line_window_takes_its_terminals_with_it(
    editor: Editor,
) -> None:
    """Its commands were stopped but their buffers stayed, and so did its transcript
    and input (E11 deleting them there)."""
    open_fake(editor)
    script = {"create": {"command": "echo started; sleep 100"}, "wait": False, "release": False}
    editor.lua("require('acp').send(...)", json.dumps(script))
    editor.wait_event("AcpTurnEnd")
    term = editor.lua("local t = require('acp.editor.terminal') return t.terminals[t.last]")
    status = editor.lua("return require('acp').status()")
    open_cmdwin(editor)
    editor.lua("require('acp').close()")
    editor.wait(f"vim.fn.jobwait({{{term['job']}}}, 0)[1] ~= -1", what="the command stopped")
    leave_cmdwin(editor)
    for buf in (term["buf"], status["transcript_buf"], status["input_buf"]):
        editor.wait(f"not vim.api.nvim_buf_is_valid({buf})", what=f"buffer {buf} gone")
