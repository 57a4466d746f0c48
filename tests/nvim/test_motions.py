"""Moving around a long chat (issue 28, point 5): `]]`/`[[` between your prompts,
`]t`/`[t` between tool calls, with a count."""

from __future__ import annotations

from tests.nvim.conftest import Editor


def focus(editor: Editor, row: int) -> None:
    editor.lua(
        "local buf, row = require('acp').status().transcript_buf, ...;"
        "vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1]);"
        "vim.api.nvim_win_set_cursor(0, {row, 0})",
        row,
    )


def rows_of(editor: Editor, text: str) -> list[int]:
    return [i + 1 for i, line in enumerate(editor.transcript()) if line == text]


def press(editor: Editor, keys: str) -> int:
    editor.nvim.input(keys)
    return int(editor.lua("return vim.fn.line('.')"))


def test_brackets_go_from_prompt_to_prompt(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    for n, text in enumerate(("one", "two", "three"), 1):
        editor.lua("require('acp').send(...)", text)
        editor.wait_event("AcpTurnEnd", count=n)
    first, second, third = rows_of(editor, "## You")
    focus(editor, first)
    assert press(editor, "]]") == second
    assert press(editor, "]]") == third
    assert press(editor, "]]") == third  # no later prompt: the cursor stays
    assert press(editor, "[[") == second
    focus(editor, first)
    assert press(editor, "2]]") == third
    assert press(editor, "<C-o>") == first  # a jump, like Vim's own ]]


def test_t_goes_from_tool_call_to_tool_call(editor: Editor) -> None:
    editor.setup(protocol_version=2)
    editor.open_chat()
    for n in (1, 2):
        editor.lua("require('acp').send('tool')")
        editor.wait_event("AcpTurnEnd", count=n)
    first, second = rows_of(editor, "#### Read notes.txt")
    focus(editor, 1)
    assert press(editor, "]t") == first
    assert press(editor, "]t") == second
    assert press(editor, "[t") == first


def test_the_session_picker_shows_agent_directory_age_and_turns(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    for n, text in enumerate(("remember me", "and this"), 1):
        editor.lua("require('acp').send(...)", text)
        editor.wait_event("AcpTurnEnd", count=n)
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpSessions")
    editor.wait("_G.offered ~= nil")
    [item] = editor.lua("return _G.offered")
    title, agent, where, age, turns = item.split(" · ")
    assert (title, agent, where, turns) == (
        "remember me",
        "demo",
        str(editor.tmp / "project"),
        "2 turns",
    )
    assert age == "just now" or age.endswith(" ago")
