"""Nothing typed in the chat's input is lost (|acp-history|): not to a buffer command
run in it (:bdelete, :bunload, :edit!, :bwipeout!), after which the chat's input
works again whole, nor to a signal that ends Neovim (a terminal window closed, an
SSH connection dropped)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from tests.nvim.conftest import Editor, wait_gone
from tests.nvim.test_chats import input_lines, quit_with, wait_input
from tests.nvim.test_history import second_neovim
from tests.nvim.test_permissions import INPUT_HINT, PROMPT, wait_text

KEPT = "acp: chat #1's unsent prompt is in the prompt history (<Up> in the input)"
TYPED = ["a long prompt", "on two lines"]
# What makes the input an input: its buffer's options and its keys.
WHOLE = """
local buf = require('acp').status().input_buf
local send = vim.fn.maparg('<CR>', 'n', false, true)
return {
  current = vim.api.nvim_get_current_buf() == buf,
  buftype = vim.bo[buf].buftype,
  filetype = vim.bo[buf].filetype,
  omnifunc = vim.bo[buf].omnifunc ~= '',
  send = send.buffer == 1 and send.desc or false,
  keys = #vim.api.nvim_buf_get_keymap(buf, 'i') > 0,
}
"""


def typed_then(editor: Editor, command: str) -> None:
    """A chat with ``TYPED`` in its input, then ``command`` (if any) run in the input."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.nvim.input("ia long prompt<CR>on two lines<Esc>")
    wait_input(editor, TYPED)
    if command:
        editor.nvim.command(command)


@pytest.mark.parametrize("command", ["bdelete", "bunload", "edit", "edit!", "bwipeout!"])
def test_a_buffer_command_in_the_input_keeps_its_text_and_the_input_whole(
    editor: Editor, command: str
) -> None:
    """:bdelete took the text and the input's keys, options and completion: <CR> no
    longer sent; :edit emptied it, undo could not bring it back."""
    typed_then(editor, command)
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == KEPT
    editor.nvim.command("AcpChat")
    assert editor.lua(WHOLE) == {
        "current": True,
        "buftype": "nofile",
        "filetype": "markdown",
        "omnifunc": True,
        "send": "acp: send",
        "keys": True,
    }
    assert input_lines(editor) == [""]
    editor.nvim.input("i<Up>")
    wait_input(editor, TYPED)
    editor.nvim.input("<Esc><CR>")
    editor.wait_event("AcpTurnEnd")
    assert "echo: a long prompt" in editor.transcript_text()
    assert [chat["id"] for chat in editor.lua("return require('acp').chats()")] == [1]


def test_a_wiped_input_leaves_the_chat_whole(editor: Editor) -> None:
    """:bwipeout! on the input: the chat left chats(), status() said nil, its
    transcript stayed as a hidden orphan and :AcpSend there threw the text away."""
    typed_then(editor, "bwipeout!")
    transcript = editor.lua("return require('acp.chat.registry').chats[1].transcript")
    editor.nvim.command(f"sbuffer {transcript}")
    status = editor.lua("return require('acp').status()")
    assert (status["chat"], status["transcript_buf"]) == (1, transcript)
    assert editor.lua("return vim.api.nvim_buf_get_name(...)", status["input_buf"]).endswith(
        "acp://input/1"
    )
    editor.nvim.command("AcpSend hello")
    editor.wait_event("AcpTurnEnd")
    assert "echo: hello" in editor.transcript_text()


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_what_is_typed_outlives_a_signal_that_ends_neovim(
    editor: Editor, signum: signal.Signals
) -> None:
    """A terminal window closed or an SSH connection dropped: Neovim gets SIGHUP (or
    SIGTERM) and unloads every buffer before VimLeavePre, so the input's text was
    gone before it could be kept; :qa! and :cq kept it. It is kept as it is typed."""
    editor.setup(agents={"hold": editor.fake_agent("hold")}, default_agent="hold")
    editor.open_chat()
    editor.lua("require('acp').send('hold')")
    editor.wait("require('acp').status().state == 'running'")
    editor.nvim.input("itwo lines<CR>typed during a turn")
    # Kept a moment after the last key, in stdpath("state")/acp/drafts/.
    drafts = editor.tmp / "xdg-state" / "nvim" / "acp" / "drafts"
    editor.wait(
        f"vim.iter(vim.fn.glob('{drafts}/*.json', true, true)):any(function(path)"
        " return (vim.uv.fs_stat(path) and table.concat(vim.fn.readfile(path)) or ''):find("
        "'typed during a turn', 1, true) ~= nil end)",
        what="the input's text kept",
    )
    pids = editor.agent_pids()
    os.kill(editor.pid, signum)
    assert wait_gone([editor.pid, *pids]) == []
    editor.quit()

    with second_neovim(editor) as other:
        other.setup(agents={"hold": other.fake_agent("hold")}, default_agent="hold")
        other.open_chat()
        assert other.lua("return _G.acp_notices")[-1]["msg"] == (
            "acp: 1 unsent prompt from a Neovim that ended is in the prompt history"
            " (<Up> in the input)"
        )
        other.nvim.input("i<Up>")
        wait_input(other, ["two lines", "typed during a turn"])
        other.nvim.input("<Up>")
        wait_input(other, ["hold"])


def test_an_input_made_again_answers_a_waiting_permission_prompt(editor: Editor) -> None:
    """A prompt's keys are the input's too while it waits (\\y, \\n and their hint)."""
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    editor.nvim.command("bdelete")
    editor.nvim.command("AcpChat")
    hint = editor.lua(INPUT_HINT, editor.lua("return vim.api.nvim_get_current_buf()"))
    assert hint == ["permission: \\y Allow · \\n Reject"]
    editor.nvim.input("\\y")
    editor.wait_event("AcpTurnEnd")
    assert "permission: selected proceed_once" in editor.transcript_text()


def test_text_set_aside_by_a_walk_through_the_history_is_kept_too(editor: Editor) -> None:
    """<Up> sets what you typed aside for <Down> to bring back: a close then kept the
    prompt shown and lost what was set aside."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.lua("require('acp').send('sent')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.input("iset aside<Up>")
    wait_input(editor, ["sent"])
    editor.nvim.input("<Esc>")
    editor.nvim.command("AcpClose")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == KEPT
    editor.open_chat()
    editor.nvim.input("i<Up>")
    wait_input(editor, ["set aside"])
    editor.nvim.input("<Up>")
    wait_input(editor, ["sent"])


def test_neovim_quitting_keeps_the_text_once_and_no_draft(editor: Editor) -> None:
    """:qa! keeps the input's text in the prompt history, as before, and takes the
    drafts file with it: the next Neovim finds the text there once."""
    typed_then(editor, "")
    drafts = editor.tmp / "xdg-state" / "nvim" / "acp" / "drafts"
    editor.wait(f"#vim.fn.glob('{drafts}/*.json', true, true) == 1", what="the drafts kept")
    assert quit_with(editor, "") == [["a long prompt\non two lines"]]
    assert list(drafts.iterdir()) == []


def test_a_drafts_file_of_this_neovims_pid_is_taken_once(editor: Editor) -> None:
    """A Neovim before this one with the same pid (after a reboot) left a drafts
    file: its text came into the history, and the file stayed, so that a signal
    ending this Neovim before it kept anything of its own brought it in again."""
    drafts = editor.tmp / "xdg-state" / "nvim" / "acp" / "drafts"
    drafts.mkdir(parents=True)
    project = editor.lua("return vim.fn.getcwd()")
    left = drafts / f"{editor.pid}.json"
    left.write_text(json.dumps([[f"demo\t{project}", "typed before a reboot"]]))
    editor.setup()
    editor.open_chat()
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: 1 unsent prompt from a Neovim that ended is in the prompt history"
        " (<Up> in the input)"
    )
    editor.wait(f"vim.uv.fs_stat({str(left)!r}) == nil", what="the file taken in, gone")
    editor.nvim.input("i<Up>")
    wait_input(editor, ["typed before a reboot"])
