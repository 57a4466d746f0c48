"""Neovim's own buffer commands on the chat's transcript and the review buffer
(:bdelete, :bunload, :e!, :bwipeout): harmless, as closing a window is."""

from __future__ import annotations

from tests.nvim.conftest import Editor
from tests.nvim.test_permissions import focus_transcript


def test_bwipeout_on_the_transcript_closes_the_chat_without_an_error(editor: Editor) -> None:
    editor.setup()
    status = editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    focus_transcript(editor)
    editor.nvim.command("bwipeout!")  # raises on an error in its autocommands
    assert editor.lua("return require('acp').chats()") == []
    for buf in (status["transcript_buf"], status["input_buf"]):
        assert editor.lua("return vim.api.nvim_buf_is_valid(...)", buf) is False
