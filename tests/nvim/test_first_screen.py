"""A new chat's empty transcript says how to send, what `@` and `/` do and where help
is, as virtual lines that go with the first prompt (issue 28, point 1)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen

HINT = """
local buf = require('acp').status().transcript_buf
local ns = vim.api.nvim_get_namespaces()['acp.first_screen']
local lines = {}
for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {details = true})) do
  for _, line in ipairs(mark[4].virt_lines or {}) do
    table.insert(lines, table.concat(vim.tbl_map(function(c) return c[1] end, line)))
  end
end
return lines
"""


def hint(editor: Editor) -> str:
    """The hint's words, its lines wrapped to the window joined again."""
    lines: list[str] = editor.lua(HINT)
    return " ".join(" ".join(lines).split())


@pytest.mark.parametrize(
    ("options", "named", "unnamed"),
    [
        ({}, ["<CR> (Normal mode) or <C-S> (Insert mode too)", "q hides the chat", "? lists"], []),
        (  # the keys as the user set them; one turned off is not named
            {"keys": {"input": {"send_insert": "<C-g>"}, "chat": {"hide": False}}},
            ["<C-G> (Insert mode too)", "<C-C> cancels a turn"],
            ["<C-S>", "hides the chat"],
        ),
    ],
)
def test_an_empty_chat_teaches_and_the_first_prompt_takes_it_away(
    editor: Editor, options: dict[str, Any], named: list[str], unnamed: list[str]
) -> None:
    editor.setup(**options)
    editor.open_chat()
    shown = hint(editor)
    for needle in [*named, "@ attaches", "/ runs", ":help acp"]:
        assert needle in shown
    for needle in unnamed:
        assert needle not in shown
    assert editor.transcript() == [""]  # virtual lines only: no transcript text
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    assert hint(editor) == ""


def test_a_resumed_chat_shows_no_first_screen(editor: Editor) -> None:
    editor.setup()
    # Its transcript fills with the session's history: nothing to teach there.
    editor.lua("require('acp').open({agent = 'demo', session_id = 'demo-1'})")
    assert hint(editor) == ""



def test_the_first_screen_wraps_to_the_chats_window(editor: Editor) -> None:
    # Virtual lines never wrap: at the chat's default width (48 columns of 120) the
    # send keys and q, <C-c>, ? were cut off.
    screen = Screen(editor, 120, 40)
    editor.setup()
    status = editor.open_chat()
    win = editor.lua("return vim.fn.bufwinid(...)", status["transcript_buf"])
    sentences = [
        "Type your prompt in the input below; send it with <CR> (Normal mode)"
        " or <C-S> (Insert mode too).",
        "@ attaches a file, a directory, the selection, diagnostics… (completion offers them).",
        "/ runs one of the agent's commands; q hides the chat, <C-C> cancels a turn,"
        " ? lists the chat's keys.",
        ":help acp for everything else.",
    ]
    for width in (None, 70, 30):  # and again when the window is resized
        if width:
            editor.lua("vim.api.nvim_win_set_width(...)", win, width)
        assert " ".join(sentences) in " ".join(" ".join(screen.window(win)).split())
