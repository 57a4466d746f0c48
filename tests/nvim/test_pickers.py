"""The session picker shows each session's title, agent, directory, age and turns
(issue 28, point 5); the branch picker tells branches apart."""

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
    editor.wait("(require('acp').history({query = 'again'})[1] or {}).turns == 2")
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpSessions")
    editor.wait("_G.offered ~= nil")
    turns = {item.split(" · ")[0]: item.split(" · ")[4] for item in editor.lua("return _G.offered")}
    assert turns == {"one": "3 turns", "two again": "2 turns"}


def test_two_branches_leaving_with_the_same_prompt_read_apart(editor: Editor) -> None:
    """Two branches that left at the same turn with the same prompt (one of them
    regenerated) read alike in :AcpBranches but for their turn counts."""
    editor.setup()
    editor.open_chat()
    ends = 0

    def turn(code: str, *args: str) -> None:
        nonlocal ends
        ends += 1
        editor.lua(code, *args)
        editor.wait_event("AcpTurnEnd", count=ends)

    send = "require('acp').send(...)"
    turn(send, "plan the parser")
    turn(send, "write the lexer")
    turn("vim.cmd.AcpRegenerate()")  # leaves [plan, write] as a branch
    turn(send, "now the tests " + "and more " * 10)  # the regenerated branch goes on
    editor.lua("require('acp').rewind(2)")  # leaves [plan, write, now] as another
    editor.wait("#require('acp.chat.registry').get().status.turns == 1", what="the rewind")
    turn(send, "start over")
    editor.lua(
        "vim.ui.select = function(items, opts, on_choice)"
        " _G.offered = vim.tbl_map(opts.format_item, items) end"
    )
    editor.nvim.command("AcpBranches")
    entries = editor.lua("return _G.offered")
    assert sorted(entry.split(" · ", 1)[1] for entry in entries) == [
        "leaves at turn 2 · 2 turns · write the lexer",
        "leaves at turn 2 · 3 turns · write the lexer → now the tests and more and more and mor…",
    ]
