"""The command-line window (q:), where no window may open, close or be entered
(E11): what would open one there waits until it closes, and nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path

from tests.nvim.conftest import Editor
from tests.nvim.test_mcp import start, text

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
    assert (result["isError"], text(result)) == (False, f"Showed {project / 'a.py'} at line 2 to the user.")
    window = editor.lua("return vim.fn.bufwinid(...)", str(project / "a.py"))
    assert editor.lua("return vim.api.nvim_win_get_cursor(...)", window) == [2, 0]
    assert notices(editor) == []

