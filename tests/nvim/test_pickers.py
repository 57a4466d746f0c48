"""The session picker shows each session's title, agent, directory, age and turns
(issue 28, point 5)."""

from __future__ import annotations

from tests.nvim.conftest import Editor


def test_the_session_picker_shows_agent_directory_age_and_turns(editor: Editor) -> None:
    editor.setup()
    editor.open_chat()
    for n, text in enumerate(("remember me", "and this"), 1):
        editor.lua("require('acp').send(...)", text)
        editor.wait_event("AcpTurnEnd", count=n)
    # The turns are the history's, written a moment after the turn's end.
    editor.wait("(require('acp').history({query = 'remember'})[1] or {}).turns == 2")
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpSessions")
    editor.wait("_G.offered ~= nil")
    [item] = editor.lua("return _G.offered")
    title, agent, where, age, turns, shown = item.split(" · ")
    assert (title, agent, where, turns, shown) == (
        "remember me",
        "demo",
        str(editor.tmp / "project"),
        "2 turns",
        "open in chat #1",
    )
    assert age == "just now" or age.endswith(" ago")


def test_the_session_picker_counts_each_branchs_turns_in_its_session(editor: Editor) -> None:
    """A rewind leaves a branch in one session and goes on in another: each session
    shows the turns of its own branch, not the chat's."""
    editor.setup()
    editor.open_chat()
    for n, text in enumerate(("one", "two", "three"), 1):
        editor.lua("require('acp').send(...)", text)
        editor.wait_event("AcpTurnEnd", count=n)
    editor.lua("require('acp').rewind(2)")
    editor.wait_event("AcpSessionReady", count=2)
    editor.lua("require('acp').send('two again')")
    editor.wait_event("AcpTurnEnd", count=4)
    editor.wait("(require('acp').history({query = 'again'})[1] or {}).turns == 4")
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpSessions")
    editor.wait("_G.offered ~= nil")
    turns = {item.split(" · ")[0]: item.split(" · ")[4] for item in editor.lua("return _G.offered")}
    assert turns == {"one": "3 turns", "two again": "2 turns"}
