"""Nothing typed in the chat's input is lost (|acp-history|): not to a buffer command
run in it (:bdelete, :bunload, :edit!, :bwipeout!), after which the chat's input
works again whole."""

from __future__ import annotations

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.test_chats import input_lines, wait_input
from tests.nvim.test_permissions import PROMPT, wait_text

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
    """A chat with ``TYPED`` in its input, then ``command`` run in the input."""
    editor.setup(agents={"fake": editor.fake_agent("echo")}, default_agent="fake")
    editor.open_chat()
    editor.nvim.input("ia long prompt<CR>on two lines<Esc>")
    wait_input(editor, TYPED)
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


def test_an_input_made_again_answers_a_waiting_permission_prompt(editor: Editor) -> None:
    """A prompt's keys are the input's too while it waits (\\y, \\n and their hint)."""
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    editor.nvim.command("bdelete")
    editor.nvim.command("AcpChat")
    hint = editor.lua(
        "return vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_get_namespaces()"
        "['acp.permission.hint'], 0, -1, {details = true})[1][4].virt_text[1][1]"
    )
    assert hint == "  permission: \\y Allow · \\n Reject"
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

