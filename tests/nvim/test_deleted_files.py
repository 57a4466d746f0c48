"""A file the agent deletes on disk while a buffer shows it (Claude's and Codex's
adapters delete with their own tools: nothing but the scan tells us): the buffer
shows the text once, marked deleted, and deciding acts on file and buffer alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen
from tests.nvim.test_files import lines, run, start
from tests.nvim.test_inline import ACCEPT, focus, marks
from tests.nvim.test_permissions import wait_text


def rm(path: Path) -> dict[str, Any]:
    """The agent deletes the file with a command of its own."""
    return {"rm": {"path": str(path)}}


def status_of(path: Path) -> str:
    """A Lua expression: the status of the file's one hunk in the review."""
    find = f"function(f) return f.path == {json.dumps(str(path))} end"
    return f"vim.iter(require('acp').changes()):find({find}).hunks[1].status"


def status(editor: Editor, path: Path) -> str:
    return str(editor.lua(f"return {status_of(path)}"))


def wait_status(editor: Editor, path: Path, wanted: str) -> None:
    editor.wait(f"{status_of(path)} == {json.dumps(wanted)}", what=f"{path.name} {wanted}")


def told(editor: Editor, path: Path) -> list[str]:
    """The messages naming the file's deletion."""
    notices = editor.lua("return _G.acp_notices") or []
    return [n["msg"] for n in notices if f"deleted {path.name}" in n["msg"]]


def modified(editor: Editor, buf: int) -> bool:
    return bool(editor.lua("return vim.bo[...].modified", buf))


def test_a_deleted_files_buffer_shows_its_text_once_and_a_reject_brings_the_file_back(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    a, b = project / "a.txt", project / "b.txt"
    a.write_text("a1\na2\n")
    b.write_text("b1\n")
    buf = start(editor, a)
    assert buf is not None
    screen = Screen(editor, 120, 40)
    run(editor, [rm(a), rm(b)])
    screen.draw()
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    top, left = editor.lua(f"local i = vim.fn.getwininfo({win})[1] return {{i.winrow, i.wincol}}")
    # One copy of the text, marked deleted where it is: no removed lines hang above it.
    assert [screen.text(top + row, left, 60).rstrip() for row in range(3)] == [
        "- a1   acp: the agent deleted this file",
        "- a2",
        "~",
    ]
    assert lines(editor, buf) == ["a1", "a2"] and not modified(editor, buf)
    assert marks(editor, buf, "acp.review") == [
        {"row": 0, "end_row": 1, "line_hl": "AcpReviewDelete", "virt_lines": []}
    ]
    assert told(editor, a) == [
        "acp: the agent deleted a.txt; the buffer keeps its text (:AcpHunk reject restores the file)"
    ]
    assert told(editor, b) == []  # no buffer shows it: the review does
    focus(editor, buf, 2)
    hunk = editor.lua("return require('acp').hunk_at_cursor()")
    assert (hunk["status"], hunk["header"]) == ("pending", "@@ -1,2 +0,0 @@")

    editor.nvim.command("AcpHunk reject")
    wait_status(editor, a, "rejected")
    assert a.read_text() == "a1\na2\n"
    assert lines(editor, buf) == ["a1", "a2"] and not modified(editor, buf)
    assert marks(editor, buf, "acp.review") == []
    assert status(editor, b) == "pending"
    # Neovim takes the file as the buffer's: a check reloads nothing, asks nothing.
    editor.nvim.command(f"checktime {buf}")
    assert lines(editor, buf) == ["a1", "a2"] and not modified(editor, buf)


def test_accepting_a_deletion_takes_the_unmodified_buffer_away_and_keeps_the_window(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    kept, gone = project / "k.txt", project / "gone.txt"
    kept.write_text("k\n")
    gone.write_text("g1\ng2\n")
    start(editor, kept)
    window = editor.lua("return vim.fn.bufwinid(vim.fn.bufnr(...))", str(kept))
    editor.lua(
        "local win, path = ...; vim.api.nvim_win_call(win, function() vim.cmd.edit(path) end)",
        window,
        str(gone),
    )
    buf = editor.lua("return vim.fn.bufnr(...)", str(gone))
    run(editor, [rm(gone)])
    focus(editor, buf, 1)
    editor.nvim.input(ACCEPT)
    wait_status(editor, gone, "accepted")
    assert not gone.exists()
    assert editor.lua("return vim.fn.bufnr(...)", str(gone)) == -1
    shown = editor.lua("return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(...))", window)
    assert shown == str(kept)  # the window stays, on the buffer it showed before


def test_restore_brings_a_deleted_file_back_through_its_buffer(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("a1\na2\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [rm(path)])
    editor.nvim.command("AcpRestore 1")
    wait_text(editor, "Restored the files to before turn 1: `a.txt`.")
    assert path.read_text() == "a1\na2\n"
    assert lines(editor, buf) == ["a1", "a2"] and not modified(editor, buf)
    assert status(editor, path) == "rejected"


def test_a_deleted_files_buffer_keeps_what_you_typed_in_it(editor: Editor, tmp_path: Path) -> None:
    """Unsaved text (typed before the deletion, or while it waits) stays the user's:
    rejecting puts the file's text back on disk behind it, accepting leaves the file
    deleted; the buffer stays, modified, either way."""
    project = tmp_path / "project"
    before, after = project / "before.txt", project / "after.txt"
    before.write_text("b1\nb2\n")
    after.write_text("a1\na2\n")
    buf = start(editor, before)
    assert buf is not None
    editor.nvim.command(f"badd {after}")
    other = editor.lua("local b = vim.fn.bufnr(...); vim.fn.bufload(b); return b", str(after))
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'b1 mine'})", buf)
    run(editor, [rm(before), rm(after)])
    assert told(editor, before) == [
        "acp: the agent deleted before.txt; the buffer keeps your unsaved text"
        " (:AcpHunk reject restores the file)"
    ]
    assert lines(editor, buf) == ["b1 mine", "b2"] and modified(editor, buf)
    assert marks(editor, buf, "acp.review") == [
        {"row": 0, "end_row": 1, "line_hl": "AcpReviewDelete", "virt_lines": []}
    ]
    # Typed while the deletion waits: the user's text, not the file's.
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'a1 mine'})", other)
    editor.lua("vim.api.nvim_exec_autocmds('TextChanged', {buffer = ...})", other)
    editor.lua(f"require('acp').reject({json.dumps(str(before))})")
    editor.lua(f"require('acp').accept({json.dumps(str(after))})")
    wait_status(editor, before, "rejected")
    wait_status(editor, after, "accepted")
    # What was accepted is the deletion, not the user's line as if the agent's.
    [file] = [f for f in editor.lua("return require('acp').changes()") if f["path"] == str(after)]
    assert file["deleted"] and [h["header"] for h in file["hunks"]] == ["@@ -1,2 +0,0 @@"]
    assert before.read_text() == "b1\nb2\n" and not after.exists()
    assert lines(editor, buf) == ["b1 mine", "b2"] and modified(editor, buf)
    assert lines(editor, other) == ["a1 mine", "a2"] and modified(editor, other)
