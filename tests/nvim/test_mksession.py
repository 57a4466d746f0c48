"""A Vim session (:mksession) saved with a chat shown, sourced in a new Neovim, and
acp:// names typed by hand: the plain buffers they make never stand in the way of
the plugin's own (decision 0084)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import ROOT, Editor, child_editor
from tests.nvim.test_files import run, start

# Every buffer: its name, 'buftype', lines and whether it is modified; and what
# each window of the current tab page shows.
BUFFERS = """
local bufs = {}
for _, buf in ipairs(vim.api.nvim_list_bufs()) do
  table.insert(bufs, { name = vim.api.nvim_buf_get_name(buf), buftype = vim.bo[buf].buftype,
    lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), modified = vim.bo[buf].modified })
end
local wins = vim.tbl_map(function(win)
  return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(win))
end, vim.api.nvim_tabpage_list_wins(0))
return { bufs = bufs, wins = wins }
"""
# The buffers of acp:// names that windows show, in every tab page.
ACP_SHOWN = """
local shown = {}
for _, win in ipairs(vim.api.nvim_list_wins()) do
  local buf = vim.api.nvim_win_get_buf(win)
  if vim.startswith(vim.api.nvim_buf_get_name(buf), 'acp://') then
    shown[buf] = true
  end
end
local bufs = vim.tbl_keys(shown)
table.sort(bufs)
return bufs
"""
# auto-session's recommended 'sessionoptions'; Neovim's default has "blank" too.
AUTO_SESSION = "blank,buffers,curdir,folds,help,tabpages,winsize,winpos,terminal,localoptions"


def buffers(editor: Editor) -> dict[str, Any]:
    return dict(editor.lua(BUFFERS))


def acp_shown(editor: Editor) -> list[int]:
    return list(editor.lua(ACP_SHOWN))


def chat_buffers(editor: Editor) -> list[int]:
    status = editor.lua("return require('acp').status()")
    return sorted([status["transcript_buf"], status["input_buf"]])


def settled(editor: Editor) -> None:
    """What the last command scheduled has run."""
    editor.lua("_G.flushed = false; vim.schedule(function() _G.flushed = true end)")
    editor.wait("_G.flushed")


def saved_session(editor: Editor, sessionoptions: str) -> tuple[Path, Path]:
    """A session of a file window beside a chat: the session file and the file."""
    notes = editor.tmp / "project" / "notes.txt"
    notes.write_text("mine\n")
    editor.nvim.command("edit notes.txt")
    editor.setup()
    editor.open_chat()
    if sessionoptions:
        editor.nvim.command(f"set sessionoptions={sessionoptions}")
    session = editor.tmp / "Session.vim"
    editor.nvim.command(f"mksession {session}")
    assert "file acp://chat/1" in session.read_text()  # what the session brings back
    return session, notes


def second_neovim(editor: Editor, loaded: str) -> Editor:
    """Another Neovim on the same project; the plugin loaded at start-up, or only
    on demand (lazy.nvim's `cmd`), after the session."""
    init = (ROOT / "tests" / "nvim" / "init.lua").read_text()
    if loaded == "lazily":
        init = init.replace('vim.cmd("runtime plugin/acp.lua")', "vim.o.loadplugins = false")
    other = child_editor(editor.tmp, init, {"ACP_TEST_ROOT": str(ROOT)})
    other.nvim.command(f"cd {editor.tmp / 'project'}")
    return other


@pytest.mark.parametrize("sessionoptions", ["", AUTO_SESSION])
@pytest.mark.parametrize("loaded", ["at start-up", "lazily"])
def test_a_session_saved_with_a_chat_restores_the_files_and_acpchat_works_first_time(
    editor: Editor, sessionoptions: str, loaded: str
) -> None:
    # Sourced, the session made plain buffers acp://chat/1 and acp://input/1 in
    # windows of their own; :AcpChat then failed with E95 and a traceback, left an
    # unnamed buffer behind, and the empty windows stayed.
    session, notes = saved_session(editor, sessionoptions)
    with second_neovim(editor, loaded) as other:
        other.nvim.command(f"source {session}")
        if loaded == "lazily":
            other.nvim.command("runtime plugin/acp.lua")
        else:  # the empty chat windows are gone with the session's loading
            other.wait(f"#(function() {ACP_SHOWN} end)() == 0", what="the empty windows to go")
            assert buffers(other)["wins"] == [str(notes)]
        other.setup()
        other.nvim.command("AcpChat")
        other.wait_event("AcpSessionReady")
        settled(other)
        assert other.lua("return require('acp').status().chat") == 1
        shown = buffers(other)
        assert shown["wins"] == [str(notes), "acp://chat/1", "acp://input/1"]
        assert sorted(b["name"] for b in shown["bufs"]) == sorted(shown["wins"])
        assert other.lua("return _G.acp_notices") == []


def test_a_name_typed_by_hand_before_its_chat_exists_gives_way_to_the_chat(
    editor: Editor,
) -> None:
    editor.setup()
    editor.nvim.command("edit acp://chat/1")
    editor.nvim.command("vsplit acp://input/1")
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpSessionReady")
    settled(editor)
    shown = buffers(editor)
    # Where the empty windows were, the chat's pair; the last window of all shows
    # an empty buffer of its own, as after :bwipeout.
    assert shown["wins"] == ["", "acp://chat/1", "acp://input/1"]
    assert [b["buftype"] for b in shown["bufs"] if b["name"].startswith("acp://")] == ["nofile"] * 2
    assert acp_shown(editor) == chat_buffers(editor)


def test_text_typed_into_a_buffer_of_the_chats_name_is_kept(editor: Editor) -> None:
    editor.setup()
    editor.nvim.command("edit acp://chat/1")
    editor.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'my notes'})")
    mine = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpSessionReady")
    assert editor.lua("return vim.api.nvim_buf_get_name(require('acp').status().transcript_buf)") == (
        "acp://chat/1"
    )
    kept = editor.lua(
        "local buf = ...; return { name = vim.api.nvim_buf_get_name(buf), modified = vim.bo[buf].modified,"
        " lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), shown = #vim.fn.win_findbuf(buf) }",
        mine,
    )
    assert kept == {"name": "", "modified": True, "lines": ["my notes"], "shown": 1}


def test_a_review_name_typed_by_hand_gives_way_to_the_review(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n")
    start(editor)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n"}}])
    editor.nvim.command("wincmd t | edit acp://review/1")
    editor.nvim.command("AcpReview")
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == "acp://review/1"
    assert editor.lua("return vim.bo.filetype") == "acpreview"
    assert "  @@ -1 +1 @@ pending" in editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    assert acp_shown(editor) == sorted([*chat_buffers(editor), review])


def test_the_log_never_writes_into_a_buffer_of_its_name(editor: Editor) -> None:
    # :AcpLog wrote the log into the plain buffer and made it modified: :qa refused.
    editor.setup()
    editor.nvim.command("edit acp://log")
    editor.nvim.command("AcpLog")
    assert editor.lua("return vim.api.nvim_buf_get_name(0)") == "acp://log"
    assert editor.lua("return {vim.bo.buftype, vim.bo.filetype}") == ["nofile", "acplog"]
    assert acp_shown(editor) == [editor.lua("return vim.api.nvim_get_current_buf()")]


def test_a_terminal_name_typed_by_hand_gives_way_to_the_terminal(editor: Editor) -> None:
    """A terminal was left unnamed where a plain buffer held its name (E95, caught)."""
    editor.setup()
    editor.nvim.command("edit acp://terminal/d1")
    term = "require('acp.editor.terminal')"
    editor.lua(f"{term}.write('d1', 'ok', false)")
    named = editor.lua(
        "return vim.tbl_map(function(b) return vim.bo[b].buftype end, vim.tbl_filter(function(b)"
        " return vim.api.nvim_buf_get_name(b) == 'acp://terminal/d1' end, vim.api.nvim_list_bufs()))"
    )
    assert named == ["terminal"]
    assert editor.lua(f"return vim.api.nvim_buf_get_name({term}.terminals.d1.buf)") == (
        "acp://terminal/d1"
    )


def test_a_buffer_of_another_acp_name_is_left_alone(editor: Editor) -> None:
    """Every acp:// buffer the plugin had not named was swept at its next naming,
    another plugin's of that scheme too."""
    editor.setup()
    editor.nvim.command("edit acp://elsewhere/1")
    other = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.nvim.command("AcpChat")
    editor.wait_event("AcpSessionReady")
    assert editor.lua(f"return vim.api.nvim_buf_get_name({other})") == "acp://elsewhere/1"
