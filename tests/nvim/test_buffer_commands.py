"""Neovim's own buffer commands on the chat's transcript, the review buffer and the
sides of a diff split the plugin fills (:bdelete, :bunload, :e!, :bwipeout):
harmless, as closing a window is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen
from tests.nvim.test_files import lines, run
from tests.nvim.test_files import start as start_files
from tests.nvim.test_inline import DENY, REJECT, ask
from tests.nvim.test_permissions import PROMPT, STUB_SELECT, focus_transcript, wait_text

# What the user types in the transcript; each unloads it, which empties it.
UNLOADS = ["bdelete", "bunload!", "edit!"]


def in_transcript(editor: Editor, command: str) -> None:
    """Run Ex ``command`` in the transcript's window, then show the chat again as
    the user would (:AcpChat) where it closed the chat's windows."""
    focus_transcript(editor)
    editor.as_typed(command)
    editor.nvim.command("AcpChat")


def transcript_state(editor: Editor) -> dict[str, object]:
    """What the user has of the transcript beyond its text: its options and keys."""
    return editor.lua(
        """
        local buf = require('acp').status().transcript_buf
        local keys = {}
        for _, map in ipairs(vim.api.nvim_buf_get_keymap(buf, 'n')) do
          keys[map.lhs] = map.desc
        end
        return {
          loaded = vim.api.nvim_buf_is_loaded(buf),
          listed = vim.bo[buf].buflisted,
          modifiable = vim.bo[buf].modifiable,
          buftype = vim.bo[buf].buftype,
          syntax = vim.bo[buf].syntax,
          help = keys['?'],
          next_tool = keys[']t'],
        }
        """
    )


def fold_level(editor: Editor, row: int) -> int:
    """The fold level of 0-based transcript ``row`` in its window."""
    level: int = editor.lua(
        """
        local row = ...
        local win = vim.fn.win_findbuf(require('acp').status().transcript_buf)[1]
        return vim.api.nvim_win_call(win, function() return vim.fn.foldlevel(row + 1) end)
        """,
        row,
    )
    return level


def virtual_lines(editor: Editor, namespace: str) -> list[str]:
    """The virtual lines namespace ``namespace`` shows in the transcript."""
    lines: list[str] = editor.lua(
        """
        local buf = require('acp').status().transcript_buf
        local lines = {}
        for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, vim.api.nvim_get_namespaces()[...],
            0, -1, {details = true})) do
          for _, line in ipairs(mark[4].virt_lines or {}) do
            table.insert(lines, table.concat(vim.tbl_map(function(c) return c[1] end, line)))
          end
        end
        return lines
        """,
        namespace,
    )
    return lines


def drawn_plain(editor: Editor) -> list[str]:
    """The warnings of a transcript whose blocks lost their rows."""
    notices = editor.lua("return _G.acp_notices")
    return [n["msg"] for n in notices if "drawn plain" in n["msg"] or "has no row" in n["msg"]]


@pytest.mark.parametrize("command", UNLOADS)
def test_the_transcript_comes_back_whole_with_its_keys_and_goes_on(
    editor: Editor, command: str
) -> None:
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    before = editor.transcript()
    expected = transcript_state(editor)
    in_transcript(editor, command)
    assert editor.transcript() == before
    assert transcript_state(editor) == expected
    assert expected["listed"] is False and expected["help"] == "acp: show the chat's keys"
    assert fold_level(editor, before.index("### Thinking") + 1) == 1
    # The keys move between the blocks again.
    focus_transcript(editor)
    editor.nvim.command("normal G[[")
    assert editor.lua("return vim.api.nvim_win_get_cursor(0)[1]") == before.index("## You") + 1

    editor.lua("require('acp').send('again')")
    editor.wait_event("AcpTurnEnd", 2)
    lines = editor.transcript()
    assert lines[: len(before)] == before and "You said: *again*" in lines
    assert fold_level(editor, len(before) + lines[len(before) :].index("### Thinking") + 1) == 1
    # A rewind takes the second turn off again.
    editor.nvim.command("AcpRewind 2")
    editor.wait(
        "not table.concat(vim.api.nvim_buf_get_lines(require('acp').status().transcript_buf,"
        " 0, -1, false), '\\n'):find('You said: *again*', 1, true)",
        what="the second turn rewound",
    )
    assert drawn_plain(editor) == []


@pytest.mark.parametrize("command", UNLOADS)
def test_a_reply_streamed_while_the_transcript_was_unloaded_is_whole(
    editor: Editor, command: str
) -> None:
    editor.setup(agents={"endless": editor.fake_agent("endless")}, default_agent="endless")
    editor.open_chat()
    editor.lua("require('acp').send('go')")
    editor.lua("require('acp').send('next')")
    editor.wait("require('acp').status().queued == 1")
    wait_text(editor, "tick3 ")
    queued = virtual_lines(editor, "acp.queue")
    focus_transcript(editor)
    editor.as_typed(command)
    wait_text(editor, "tick40 ")  # drawn after the command
    editor.nvim.command("AcpChat")
    assert virtual_lines(editor, "acp.queue") == queued and "queued 1/1 · next" in queued
    editor.nvim.command("AcpCancel")
    editor.wait_event("AcpTurnEnd")
    lines = editor.transcript()
    reply = lines[lines.index("## Agent") + 1].split()
    assert reply == [f"tick{i}" for i in range(len(reply))] and len(reply) > 40
    assert lines[-1].startswith("*— cancelled")
    assert drawn_plain(editor) == []


@pytest.mark.parametrize("command", UNLOADS)
@pytest.mark.parametrize("answer", ["key", "AcpPermission"])
def test_a_permission_waiting_is_answered_after_the_transcript_came_back(
    editor: Editor, command: str, answer: str
) -> None:
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    editor.open_chat("fake")
    editor.lua("require('acp').send('edit')")
    wait_text(editor, PROMPT)
    in_transcript(editor, command)
    assert PROMPT in editor.transcript()
    focus_transcript(editor)
    if answer == "key":
        editor.nvim.input("a")
    else:
        editor.lua(STUB_SELECT)
        editor.lua("_G.pick = 1")
        editor.nvim.command("AcpPermission")
    assert editor.wait_event("AcpTurnEnd")["stop_reason"] == "end_turn"
    assert "permission: selected proceed_once" in editor.transcript_text()
    assert drawn_plain(editor) == []


@pytest.mark.parametrize("command", UNLOADS)
def test_a_new_chats_first_screen_comes_back(editor: Editor, command: str) -> None:
    editor.setup()
    editor.open_chat()
    hint = virtual_lines(editor, "acp.first_screen")
    assert any("send it with" in line for line in hint)
    in_transcript(editor, command)
    assert virtual_lines(editor, "acp.first_screen") == hint
    assert editor.transcript() == [""]


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


def test_a_transcript_the_user_edited_goes_on_drawing(editor: Editor) -> None:
    """The user unlocked it: what they changed stays changed, and the next turns are
    drawn as before, without a warning."""
    editor.setup()
    editor.open_chat()
    for count, prompt in enumerate(["one", "two"], 1):
        editor.lua("require('acp').send(...)", prompt)
        editor.wait_event("AcpTurnEnd", count)
    focus_transcript(editor)
    editor.as_typed("set modifiable | execute 'normal! ggdd'")
    editor.nvim.command("normal! G")
    Screen.of(editor).draw()  # the rows at the end on screen: each one's block looked up
    editor.lua("require('acp').send('three')")
    editor.wait_event("AcpTurnEnd", 3)
    lines = editor.transcript()
    assert lines[0] == "one" and "You said: *three*" in lines
    assert fold_level(editor, len(lines) - 1 - lines[::-1].index("### Thinking") + 1) == 1
    assert editor.lua("return _G.acp_notices") == []


def test_edit_bang_in_the_review_buffer_draws_it_again(editor: Editor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "k.txt").write_text("k\n")
    start_files(editor)
    run(editor, [{"write": {"path": str(project / "k.txt"), "content": "K\n"}}])
    editor.nvim.command("AcpReview")
    before = editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    assert any("-k" in line for line in before)
    editor.as_typed("edit!")
    assert editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == before
    assert editor.lua("return vim.bo.buflisted") is False
    editor.nvim.input("A")  # accepts what it shows
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")


def test_a_transcript_taken_by_bdelete_outlives_the_next_buffer_named(editor: Editor) -> None:
    """:bdelete drops a buffer's b: variables, where the plugin marked the buffers it
    named: the next buffer named (a new chat's) swept the first chat's unloaded
    transcript away as a session's leftover, and that chat closed."""
    editor.setup()
    editor.open_chat()
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    before = editor.transcript()
    first = editor.lua("return require('acp').status().chat")
    focus_transcript(editor)
    editor.as_typed("bdelete")
    editor.nvim.command("AcpChat!")
    editor.wait_event("AcpSessionReady", count=2)
    assert editor.lua("return #require('acp').chats()") == 2
    chat = f"require('acp.chat.registry').chats[{first}]"
    assert editor.lua(f"return {chat} ~= nil")
    editor.lua("_G.before = ...", before)
    editor.wait(
        f"vim.api.nvim_buf_is_loaded({chat}.transcript) and vim.deep_equal("
        f"vim.api.nvim_buf_get_lines({chat}.transcript, 0, -1, false), _G.before)",
        what="the first chat's transcript back whole",
    )


def diff_highlights(editor: Editor, bufs: list[int]) -> list[list[str]]:
    """Each buffer's diff highlight on each of its lines, in its window of this tab."""
    found: list[list[str]] = editor.lua(
        """
        return vim.tbl_map(function(buf)
          return vim.api.nvim_win_call(vim.fn.bufwinid(buf), function()
            local out = {}
            for row = 1, vim.api.nvim_buf_line_count(buf) do
              table.insert(out, vim.fn.synIDattr(vim.fn.diff_hlID(row, 1), 'name'))
            end
            return out
          end)
        end, {...})
        """,
        *bufs,
    )
    return found


def edit_bang_in(editor: Editor, side: int) -> None:
    """`:e!` typed in the window of ``side``, which keeps the cursor after it."""
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", side)
    editor.as_typed("edit!")


def test_edit_bang_in_the_baseline_of_acp_diff_draws_it_again(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start_files(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "1\ntwo\n3\n"}}])
    editor.nvim.command(f"AcpDiff {path}")
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    base = editor.lua("return vim.fn.bufnr('acp://baseline/*')")
    diffed = diff_highlights(editor, [base, buf])
    assert diffed[0] == ["", "DiffText", ""]
    edit_bang_in(editor, base)
    assert lines(editor, base) == ["1", "2", "3"]
    assert diff_highlights(editor, [base, buf]) == diffed
    flags = "local b = ...; return {vim.bo[b].buflisted, vim.bo[b].modifiable, vim.bo[b].readonly}"
    assert editor.lua(flags, base) == [False, False, True]
    # Its keys act on the hunk it shows.
    editor.lua("vim.api.nvim_win_set_cursor(0, {2, 0})")
    assert editor.lua("return require('acp').hunk_at_cursor().preview") == ["-2", "+two"]
    editor.nvim.input(REJECT)
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "1\n2\n3\n"


def test_edit_bang_in_the_proposed_side_of_a_split_preview_draws_it_again(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "c.txt"
    path.write_text("a\nb\nc\n")
    buf = start_files(editor, path)
    editor.setup(agents={"files": editor.fake_agent("files")}, diff_preview="split")
    ask(editor, [{"ask": {"path": str(path), "oldText": "b\n", "newText": "B\n"}}])
    editor.wait("vim.fn.bufnr('acp://proposed/*') ~= -1")
    proposed = editor.lua("return vim.fn.bufnr('acp://proposed/*')")
    diffed = diff_highlights(editor, [buf, proposed])
    assert diffed[1] == ["", "DiffText", ""]
    edit_bang_in(editor, proposed)
    assert lines(editor, proposed) == ["a", "B", "c"]
    assert diff_highlights(editor, [buf, proposed]) == diffed
    assert editor.lua("return vim.bo[...].buflisted", proposed) is False
    # The prompt's keys there answer it, and the preview goes with it.
    editor.nvim.input(DENY)
    editor.wait_event("AcpTurnEnd")
    assert editor.lua("return vim.fn.bufnr('acp://proposed/*')") == -1
    assert path.read_text() == "a\nb\nc\n"
