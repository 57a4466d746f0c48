"""Reviewing the agent's changes: marks, :AcpReview, accept/reject from keys and Lua."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen
from tests.nvim.test_files import lines, run, start, user_write
from tests.nvim.test_inline import marks as preview_marks
from tests.nvim.test_mentions import git
from tests.nvim.test_permissions import PROMPT, focus_transcript, wait_text


def statuses(editor: Editor) -> list[str]:
    changes = editor.lua("return require('acp').changes()")
    return [h["status"] for f in changes for h in f["hunks"]]


def marks(editor: Editor, buf: int) -> list[int]:
    """Rows carrying review marks in `buf`."""
    return sorted(
        set(
            editor.lua(
                """local buf = ...
            local ns = vim.api.nvim_get_namespaces()['acp.review']
            return vim.tbl_map(function(m) return m[2] end,
              vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}))""",
                buf,
            )
        )
    )


def test_rejecting_a_hunk_restores_buffer_and_disk(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n6\n7\n8\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n5\n6\n7\neight\n"}}])
    [file] = editor.lua("return require('acp').changes()")
    assert file["path"] == str(path) and file["kind"] == "write" and file["turn"] == 1
    first, second = file["hunks"]
    assert (first["preview"], second["preview"]) == (["-1", "+one"], ["-8", "+eight"])
    assert marks(editor, buf) == [0, 7]  # signs/highlights on the agent's lines

    editor.lua("require('acp').reject(...)", str(path), first["id"])
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert lines(editor, buf)[0] == "1"
    assert path.read_text() == "1\n2\n3\n4\n5\n6\n7\neight\n"
    assert marks(editor, buf) == [7]
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes()[1].hunks[2].status == 'accepted'")
    assert marks(editor, buf) == []


def test_conflicting_user_edit_survives(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\n")
    buf = start(editor, path)
    run(editor, [{"read": {"path": str(path)}}])
    editor.lua("vim.api.nvim_buf_set_lines(..., 1, 2, false, {'mine'})", buf)
    run(editor, [{"write": {"path": str(path), "content": "a\nagent\nc\n"}}], turn=2)
    assert lines(editor, buf) == ["a", "mine", "c"]
    [hunk] = editor.lua("return require('acp').changes()")[0]["hunks"]
    assert hunk["status"] == "conflict" and hunk["proposed"] == ["agent"]
    assert any("your text was kept" in n["msg"] for n in editor.lua("return _G.acp_notices"))


@pytest.mark.parametrize("version", [1, 2])
def test_direct_disk_edit_shows_in_acp_review_and_is_rejected_with_a_key(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\ny = 2\n")
    buf = start(editor, path, version)
    run(editor, [{"disk": {"path": str(path), "content": "x = 1\ny = 3\n"}}])
    assert lines(editor, buf) == ["x = 1", "y = 3"]  # the unmodified buffer was reloaded
    editor.nvim.command("AcpReview")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    text = lines(editor, review)
    # Over v2 the text before comes from the agent's patch taken back (a `patch` change).
    assert f"M b.py  [{'disk' if version == 1 else 'patch'}]" in text
    assert "  @@ -2 +2 @@ pending" in text
    assert text[editor.lua("return vim.fn.line('.')") - 1] == "  @@ -2 +2 @@ pending"  # on the hunk
    editor.nvim.input("r")
    editor.wait(
        "vim.tbl_contains(vim.api.nvim_buf_get_lines(0, 0, -1, false), '  @@ -2 +2 @@ rejected')"
    )
    assert path.read_text() == "x = 1\ny = 2\n"
    assert lines(editor, buf) == ["x = 1", "y = 2"]


@pytest.mark.parametrize("version", [1, 2])
def test_a_disk_edit_behind_unsaved_text_lands_in_the_buffer_and_is_rejected_there(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    """Decision 0015, amended: the buffer gets the agent's lines beside the user's
    unsaved ones (no W12 question, nothing saved), marked as the agent's; rejecting
    takes them out of buffer and file, and the user's line stays unsaved."""
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\ny = 2\n")
    buf = start(editor, path, version)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'x = 100  # mine'})", buf)
    run(editor, [{"disk": {"path": str(path), "content": "x = 1\ny = 2\nz = 3\n"}}])
    assert lines(editor, buf) == ["x = 100  # mine", "y = 2", "z = 3"]
    assert editor.lua("return vim.bo[...].modified", buf) is True
    assert path.read_text() == "x = 1\ny = 2\nz = 3\n"
    assert marks(editor, buf) == [2]
    notices = [n["msg"] for n in editor.lua("return _G.acp_notices")]
    assert any("the agent's change is in your buffer too" in n for n in notices), notices
    # Neovim took the file's new time as seen: a check asks nothing, reloads nothing.
    editor.nvim.command(f"checktime {buf}")
    assert lines(editor, buf)[0] == "x = 100  # mine"
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert lines(editor, buf) == ["x = 100  # mine", "y = 2"]
    assert path.read_text() == "x = 1\ny = 2\n"
    assert editor.lua("return vim.bo[...].modified", buf) is True
    assert marks(editor, buf) == []


@pytest.mark.parametrize("version", [1, 2])
def test_after_a_disk_edit_behind_unsaved_text_write_asks_nothing(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\ny = 2\n")
    buf = start(editor, path, version)
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 1, false, {'x = 100  # mine'})", buf)
    run(editor, [{"disk": {"path": str(path), "content": "x = 1\ny = 2\nz = 3\n"}}])
    assert not user_write(editor, buf)
    assert path.read_text() == "x = 100  # mine\ny = 2\nz = 3\n"


def test_a_disk_edit_adding_where_you_added_keeps_both_lines(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\n")
    buf = start(editor, path)
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'y = 2  # mine'})", buf)
    run(editor, [{"disk": {"path": str(path), "content": "x = 1\nz = 3\n"}}])
    assert lines(editor, buf) == ["x = 1", "y = 2  # mine", "z = 3"]
    assert statuses(editor) == ["pending"]
    assert marks(editor, buf) == [2]


def test_neovims_own_directories_in_the_project_stay_out_of_the_review(
    editor: Editor, tmp_path: Path
) -> None:
    """Decision 0077: the project holds Neovim's own directories (here the test's
    XDG dirs, as $HOME holds ~/.local/state). What changes in them during a turn is
    not the agent's: the prompt history Lua writes at the send, a file of Neovim's
    that a command the agent ran wrote. Only the project's file is reviewed."""
    editor.nvim.command(f"cd {tmp_path}")
    state = Path(editor.lua("return vim.fn.stdpath('state')"))
    assert tmp_path in state.parents
    (state / "acp").mkdir(parents=True, exist_ok=True)
    kept, notes = state / "acp" / "kept.json", tmp_path / "notes.txt"
    kept.write_text("{}\n")
    notes.write_text("old\n")
    start(editor)
    steps = [
        {"shell": {"path": str(kept), "content": '{"a": 1}\n'}},
        {"shell": {"path": str(notes), "content": "new\n"}},
    ]
    run(editor, steps)
    changes = editor.lua("return require('acp').changes()")
    assert [(f["path"], f["hunks"][0]["preview"]) for f in changes] == [
        (str(notes), ["-old", "+new"])
    ]


def test_the_historys_own_file_in_the_project_stays_out_of_the_review(
    editor: Editor, tmp_path: Path
) -> None:
    """``history.path`` inside the project: what the history writes during a turn
    (the file and its journal) is the client's, not the agent's. Only the project's
    file is reviewed."""
    project = tmp_path / "project"
    editor.nvim.command(f"cd {project}")
    notes = project / "notes.txt"
    notes.write_text("old\n")
    history = project / "chats.sqlite3"
    editor.setup(agents={"files": editor.fake_agent("files")}, history={"path": str(history)})
    editor.open_chat("files")
    steps = [
        {"ask": {"path": str(notes), "oldText": "", "newText": ""}},
        {"shell": {"path": str(notes), "content": "new\n"}},
    ]
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpPermissionRequest")  # the turn waits here
    editor.wait("#require('acp').history() > 0", what="the chat written mid-turn")
    editor.lua("vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end")
    editor.nvim.command("AcpPermission")
    editor.wait_event("AcpTurnEnd")
    assert history.exists()
    changes = editor.lua("return require('acp').changes()")
    assert [f["path"] for f in changes] == [str(notes)]


def test_accept_all_and_reject_all(editor: Editor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "k.txt").write_text("k\n")
    start(editor)
    steps = [
        {"write": {"path": str(project / "k.txt"), "content": "K\n"}},
        {"write": {"path": str(project / "n.txt"), "content": "n\n"}},
    ]
    run(editor, steps)
    editor.nvim.command("AcpReview")
    editor.nvim.input("R")
    editor.wait(
        "#vim.tbl_filter(function(s) return s == 'rejected' end, "
        "vim.tbl_map(function(f) return f.hunks[1].status end, require('acp').changes())) == 2"
    )
    assert (project / "k.txt").read_text() == "k\n"
    assert not (project / "n.txt").exists()
    editor.nvim.input("q")
    # The agent reads again: a write from its old view would keep the rejection.
    run(editor, [{"read": {"path": str(project / "k.txt")}}, *steps], turn=2)
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes()[2].hunks[1].status == 'accepted'")
    assert statuses(editor) == ["accepted", "accepted"]
    assert (project / "k.txt").read_text() == "K\n"
    assert len(editor.lua("return require('acp').changes({all = true})")) == 4


@pytest.mark.parametrize("version", [1, 2])
def test_reject_all_and_accept_of_files_the_agent_wrote_itself(editor: Editor, version: int) -> None:
    """A v2 agent writes its files itself and names each by its patch: the review's
    `R` takes back a changed file and deletes a new one; `accept()` keeps the next."""
    from tests.nvim.test_rewind import start as start_agent
    from tests.nvim.test_rewind import turn

    project = editor.tmp / "project"
    k, n = project / "k.txt", project / "n.txt"
    k.write_text("k\n")
    start_agent(editor, "rewind", version)
    turn(editor, "write k.txt K", 1)
    turn(editor, "write n.txt n", 2)
    editor.nvim.command("AcpReview")
    editor.nvim.input("R")
    editor.wait(
        f"vim.fn.filereadable({str(n)!r}) == 0 and vim.fn.readfile({str(k)!r})[1] == 'k'",
        what="both taken back",
    )
    editor.nvim.input("q")
    turn(editor, "write k.txt K2", 3)
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes({all = true})[1].hunks[1].status == 'accepted'")
    assert k.read_text() == "K2\n" and not n.exists()
    assert [f["open"] for f in editor.lua("return require('acp').changes({all = true})")] == [
        False
    ] * 3


def test_a_closed_chats_hunks_stay_reviewable_until_none_waits(
    editor: Editor, tmp_path: Path
) -> None:
    """Decision 0081: the agent's lines that wait for a decision stay in the user's
    files when the chat closes, marked, and are still accepted or rejected (keys,
    :AcpReview, even with another chat current); once none waits, its review goes."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n6\n7\n8\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n5\n6\n7\neight\n"}}])
    closed = editor.lua("return require('acp').status().chat")
    editor.lua("require('acp').close()")
    said = f"acp: 2 hunks wait in your files from closed chat #{closed} (:AcpReview)"
    editor.wait(f"vim.tbl_contains(vim.tbl_map(function(n) return n.msg end, _G.acp_notices), {said!r})")
    assert marks(editor, buf) == [0, 7] and lines(editor, buf)[0] == "one"

    editor.open_chat("files")  # a chat of its own, nothing in its review
    editor.nvim.command("AcpReview")
    review = editor.lua("return vim.api.nvim_get_current_buf()")
    text = lines(editor, review)
    assert f"Chat #{closed} is closed: accept or reject what waits, as before." in text
    assert text[editor.lua("return vim.fn.line('.')") - 1] == "  @@ -1 +1 @@ pending"
    editor.nvim.input("r")
    first = f"require('acp.review.state').by_chat[{closed}].files[1].hunks[1]"
    editor.wait(f"{first}.status == 'rejected'", what="the rejection")
    assert lines(editor, buf)[0] == "1"
    assert path.read_text() == "1\n2\n3\n4\n5\n6\n7\neight\n"
    assert marks(editor, buf) == [7]

    editor.nvim.command("tabclose")
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)
    editor.lua("vim.api.nvim_win_set_cursor(0, {8, 0})")
    editor.nvim.command("AcpHunk accept")
    state = "require('acp.review.state').by_chat"
    editor.wait(f"{state}[{closed}] == nil", what="the closed chat's review let go")
    assert marks(editor, buf) == [] and lines(editor, buf)[7] == "eight"
    editor.nvim.command("AcpReview")  # the current chat's again
    assert editor.lua("return vim.api.nvim_buf_get_name(0)").endswith(f"review/{closed + 1}")


def test_rejecting_a_created_file_deletes_its_buffer_and_keeps_the_window(
    editor: Editor, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    kept, created = project / "k.txt", project / "n.txt"
    kept.write_text("k\n")
    start(editor, kept)
    window = editor.lua("return vim.fn.bufwinid(vim.fn.bufnr(...))", str(kept))
    run(editor, [{"write": {"path": str(created), "content": "n\n"}}])
    # The user looks at the new file in the window that showed k.txt.
    editor.lua(
        "local win, path = ...; vim.api.nvim_win_call(win, function() vim.cmd.edit(path) end)",
        window,
        str(created),
    )
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert not created.exists()
    assert editor.lua("return vim.fn.bufnr(...)", str(created)) == -1
    shown = editor.lua("return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(...))", window)
    assert shown == str(kept)  # the window stays, on the buffer it showed before


def test_rejecting_a_created_file_you_typed_in_keeps_your_text_in_its_buffer(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent makes a file, you open it and type a line below its own; rejecting
    the file takes it off the disk but keeps the buffer, your line in it, unsaved:
    it was deleted with everything in it, undo history too."""
    created = tmp_path / "project" / "n.txt"
    start(editor)
    run(editor, [{"write": {"path": str(created), "content": "agent\n"}}])
    editor.nvim.command(f"edit {created}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.as_typed("call append(1, 'mine')")
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert not created.exists()
    assert editor.lua("return vim.api.nvim_buf_is_valid(...)", buf)
    assert lines(editor, buf) == ["agent", "mine"]
    assert editor.lua("return vim.bo[...].modified", buf) is True
    said = "acp: n.txt: removed; its buffer keeps your edits (:write makes the file again)"
    assert said in [n["msg"] for n in editor.lua("return _G.acp_notices")]
    editor.nvim.command("write")  # and nothing stops you making it yours
    assert created.read_text() == "agent\nmine\n"


def test_rejecting_a_created_file_you_saved_your_lines_in_leaves_its_buffer_unsaved(
    editor: Editor, tmp_path: Path
) -> None:
    """The agent makes a file, you type a line in it and :write; rejecting the file
    takes it off the disk and keeps the buffer, marked modified: it was left
    unmodified, and :q then dropped your line without a word."""
    created = tmp_path / "project" / "n.txt"
    start(editor)
    run(editor, [{"write": {"path": str(created), "content": "agent\n"}}])
    editor.nvim.command(f"edit {created}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.as_typed("call append(1, 'mine') | write")
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert not created.exists()
    assert lines(editor, buf) == ["agent", "mine"]
    assert editor.lua("return vim.bo[...].modified", buf) is True
    said = "acp: n.txt: removed; its buffer keeps your edits (:write makes the file again)"
    assert said in [n["msg"] for n in editor.lua("return _G.acp_notices")]


def test_a_window_without_an_alternate_keeps_the_file_used_last_when_its_file_goes(
    editor: Editor, tmp_path: Path
) -> None:
    """A rejected new file's window whose alternate was no listed buffer (the
    chat's) showed a new empty buffer, where a window whose chat closes shows the
    buffer used last: both show what :bdelete would."""
    project = tmp_path / "project"
    kept, created = project / "k.txt", project / "n.txt"
    kept.write_text("k\n")
    start(editor, kept)
    run(editor, [{"write": {"path": str(created), "content": "n\n"}}])
    # Split off the chat's input: the new file's window has no listed alternate.
    window = editor.lua(
        "local input, path = ...; vim.api.nvim_set_current_win(vim.fn.win_findbuf(input)[1]);"
        " vim.cmd.split(path); return vim.api.nvim_get_current_win()",
        editor.lua("return require('acp').status().input_buf"),
        str(created),
    )
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert editor.lua("return vim.fn.bufnr(...)", str(created)) == -1
    shown = editor.lua("return vim.api.nvim_buf_get_name(vim.api.nvim_win_get_buf(...))", window)
    assert shown == str(kept)


def test_a_hunk_at_the_top_accepted_in_the_review_leaves_no_filler_rows_above_the_file(
    editor: Editor, tmp_path: Path
) -> None:
    # The lines the agent removed at the top of a file show above its line 1: its
    # window scrolls to them. Accepted while another window was current, that
    # window kept two empty filler rows ("-----") there.
    path = tmp_path / "project" / "a.txt"
    path.write_text("first\nsecond\nthird\n")
    buf = start(editor, path)
    screen = Screen(editor, 120, 40)
    run(editor, [{"disk": {"path": str(path), "content": "third\n"}}])
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    row, col = editor.lua(f"local i = vim.fn.getwininfo({win})[1] return {{i.winrow, i.wincol}}")
    screen.draw()
    assert [screen.text(row + i, col + 2, 6) for i in range(3)] == ["first ", "second", "third "]
    editor.nvim.command("AcpReview")
    editor.nvim.command("normal a")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")
    editor.nvim.command("tabclose")
    screen.draw()
    assert [screen.text(row + i, col, 8).strip() for i in range(2)] == ["third", "~"]


def test_the_lines_an_agent_hunk_removed_carry_their_minus_in_the_gutter(
    editor: Editor, tmp_path: Path
) -> None:
    """A virtual line has no sign column: the lines the agent removed, drawn above
    its own, were told from the file's only by their colour, and read as lines of
    it where that was faint. They start at the window's edge with a "-", as the
    preview's added lines do with their "+"."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\nthree\n")
    buf = start(editor, path)
    screen = Screen(editor, 100, 30)
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    editor.lua(f"vim.wo[{win}].number = true")
    run(editor, [{"disk": {"path": str(path), "content": "one\nTWO\nthree\n"}}])
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, require('acp.review.hunks').ns, 0, -1, {{}}) > 0")
    top, left = editor.lua(f"local i = vim.fn.getwininfo({win})[1] return {{i.winrow, i.wincol}}")
    screen.draw()
    shown = [screen.text(top + row, left, 11).rstrip() for row in range(4)]
    assert shown == ["    1 one", "-     two", "┃   2 TWO", "    3 three"]


def test_the_removed_lines_line_up_in_the_window_you_are_in_of_two_gutters(
    editor: Editor, tmp_path: Path
) -> None:
    """The file in two windows, one with line numbers: the "-" gutter of the lines
    the agent removed was measured once, in the window current at the draw, and in
    the other the removed text stood columns off the file's own. It is measured
    again for the window you go to, and as its gutter's options change."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\nthree\n")
    buf = start(editor, path)
    screen = Screen(editor, 100, 30)
    numbered = editor.lua("return vim.fn.bufwinid(...)", buf)
    editor.lua(f"vim.wo[{numbered}].number = true")
    split = "vim.cmd('vsplit') return vim.api.nvim_get_current_win()"
    plain = editor.lua(f"return vim.api.nvim_win_call({numbered}, function() {split} end)")
    editor.lua(f"vim.wo[{plain}].number = false")
    editor.lua(f"vim.api.nvim_set_current_win({numbered})")
    run(editor, [{"disk": {"path": str(path), "content": "one\nTWO\nthree\n"}}])
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, require('acp.review.hunks').ns, 0, -1, {{}}) > 0")

    def rows(win: int) -> list[str]:
        top, left = editor.lua(f"local i = vim.fn.getwininfo({win})[1] return {{i.winrow, i.wincol}}")
        screen.draw()
        return [screen.text(top + row, left, 11).rstrip() for row in range(4)]

    editor.lua(f"vim.api.nvim_set_current_win({numbered})")
    assert rows(numbered) == ["    1 one", "-     two", "┃   2 TWO", "    3 three"]
    editor.lua(f"vim.api.nvim_set_current_win({plain})")
    assert rows(plain) == ["  one", "- two", "┃ TWO", "  three"]
    editor.lua(f"vim.wo[{plain}].number = true")  # :set number where you are
    assert rows(plain) == ["    1 one", "-     two", "┃   2 TWO", "    3 three"]


REMOVED_GUTTER = """
local buf, ns = ...
for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
  if mark[4].virt_lines then
    return { mark[4].virt_lines[1][1][1], mark[2] }
  end
end
"""


def test_the_removed_lines_follow_a_number_column_widened_by_typing(
    editor: Editor, tmp_path: Path
) -> None:
    """A file growing past 999 lines in Insert mode while its hunks show widens the
    number column: the "-" gutter of the lines the agent removed stayed as wide as
    before, their text a column off the file's, until the review changed or you went
    to another window. Padded again where they stand (above the agent's line, which
    the lines typed above it moved): the review's rows are those before the typing."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\n" + "".join(f"{i}\n" for i in range(995)))
    buf = start(editor, path)
    editor.lua(f"vim.api.nvim_set_current_win(vim.fn.bufwinid({buf})) vim.wo.number = true")
    run(editor, [{"disk": {"path": str(path), "content": path.read_text().replace("two", "TWO")}}])
    ns = editor.lua("return require('acp.review.hunks').ns")
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, {ns}, 0, -1, {{}}) > 0")
    assert editor.lua(REMOVED_GUTTER, buf, ns) == ["-" + " " * 5, 1]  # 4 columns of numbers
    editor.nvim.input("ggO" + "<CR>" * 4)  # typed above the hunk, still typing: 1,002 lines
    editor.wait(f"vim.api.nvim_buf_line_count({buf}) == 1002")
    assert editor.lua("return vim.api.nvim_get_mode().mode") == "i"
    editor.wait(
        f"(function(...) {REMOVED_GUTTER} end)({buf}, {ns})[1] == '-' .. string.rep(' ', 6)",
        what="the gutter widened",
    )
    assert editor.lua(REMOVED_GUTTER, buf, ns)[1] == 6  # still above TWO
    assert lines(editor, buf)[6] == "TWO"
    editor.nvim.input("<Esc>")


def test_review_navigation_keys(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("".join(f"{i}\n" for i in range(20)))
    start(editor)
    content = path.read_text().replace("1\n", "one\n", 1).replace("18\n", "eighteen\n")
    run(editor, [{"write": {"path": str(path), "content": content}}])
    editor.nvim.command("AcpReview")
    first = editor.lua("return vim.fn.getline('.')")
    editor.nvim.input("]c")
    editor.wait("vim.fn.getline('.') ~= " + repr(first))
    second = editor.lua("return vim.fn.getline('.')")
    assert first.startswith("  @@ -2 ") and second.startswith("  @@ -19 ")
    editor.nvim.input("[c")
    editor.wait("vim.fn.getline('.') == " + repr(first))


def test_demo_agent_edits_through_the_editor_then_on_disk(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "hello.py"
    path.write_text("print('hi')\n")
    editor.nvim.command(f"edit {path}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.lua("vim.api.nvim_buf_set_lines(..., 1, 1, false, {'unsaved = 1'})", buf)
    editor.setup(permission_policy="allow_all")
    editor.open_chat()
    editor.lua("require('acp').send('edit hello.py')")
    editor.wait_event("AcpTurnEnd")
    header = "# Edited by the acp.nvim demo agent (review: :AcpReview)"
    assert lines(editor, buf) == [header, "print('hi')", "unsaved = 1"]
    # The disk gets the agent's change only: the unsaved line is the user's to save.
    assert path.read_text() == f"{header}\nprint('hi')\n"
    assert "I added a comment line at the top of `hello.py`." in editor.transcript_text()
    assert editor.lua("return vim.bo[...].modified", buf) is True
    [hunk] = editor.lua("return require('acp').changes()")[0]["hunks"]
    assert hunk["preview"] == ["+" + header]
    # The user saves (:write would first ask: the file changed since it was read).
    editor.lua("vim.api.nvim_buf_call(..., function() vim.cmd('silent write!') end)", buf)

    editor.lua("require('acp').send('disk hello.py')")
    editor.wait_event("AcpTurnEnd", count=2)
    appended = "Written to disk directly by the acp.nvim demo agent."
    assert lines(editor, buf)[-1] == appended  # reloaded
    assert "I appended a line to `hello.py`." in editor.transcript_text()
    [file] = editor.lua("return require('acp').changes()")
    assert file["kind"] == "disk" and file["hunks"][0]["preview"] == ["+" + appended]
    editor.lua("require('acp').reject()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert appended not in path.read_text()
    assert len(editor.lua("return require('acp').changes({all = true})")) == 2


def test_opencode_new_file_after_a_permission_is_created_and_rejectable(
    editor: Editor, tmp_path: Path
) -> None:
    # opencode 1.18: pending call without locations, the location in progress, a
    # permission request whose diff has oldText "", the file written on disk and by
    # fs/write_text_file, completed.
    path = tmp_path / "project" / "new.py"
    editor.setup(agents={"files": editor.fake_agent("files")}, permission_policy="allow_all")
    editor.open_chat("files")
    assert run(editor, [{"opencode": {"path": str(path), "content": "made = 1\n"}}]) == [{}]
    created_and_rejected(editor, path)


def created_and_rejected(editor: Editor, path: Path) -> None:
    """``path`` is in the review as a file the agent created (``made = 1``); rejected,
    it goes from the disk."""
    [file] = editor.lua("return require('acp').changes()")
    assert (file["path"], file["created"]) == (str(path), True)
    assert [h["preview"] for h in file["hunks"]] == [["+made = 1"]]
    editor.lua("require('acp').reject(...)", str(path))
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert not path.exists()


def test_the_review_follows_undo_and_redo_in_buffer_and_on_disk(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "u.txt"
    path.write_text("one\ntwo\nthree\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "one\nTWO\nthree\n"}}])
    [hunk] = editor.lua("return require('acp').changes()")[0]["hunks"]
    assert (hunk["status"], marks(editor, buf)) == ("pending", [1])
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", buf)

    def review_text() -> list[str]:
        editor.nvim.command("AcpReview")
        text = lines(editor, editor.lua("return vim.api.nvim_get_current_buf()"))
        editor.nvim.input("q")
        editor.wait(f"vim.api.nvim_get_current_buf() == {buf}")
        return text

    editor.as_typed("undo")
    editor.wait(
        "require('acp').changes()[1].hunks[1].status == 'reverted'", what="the undo is followed"
    )
    assert lines(editor, buf) == ["one", "two", "three"]
    assert path.read_text() == "one\ntwo\nthree\n"  # the disk follows: no agent line left there
    assert editor.lua("return vim.bo[...].modified", buf) is False
    assert marks(editor, buf) == []
    assert "  @@ -2 +2 @@ reverted" in review_text()

    editor.as_typed("redo")
    editor.wait(
        "require('acp').changes()[1].hunks[1].status == 'pending'", what="the redo is followed"
    )
    assert editor.lua("return require('acp').changes()[1].hunks[1].id") == hunk["id"]
    assert lines(editor, buf) == ["one", "TWO", "three"]
    assert path.read_text() == "one\nTWO\nthree\n"
    assert marks(editor, buf) == [1]
    assert "  @@ -2 +2 @@ pending" in review_text()
    # Offered again, it is decided as any agent hunk: a reject takes it out everywhere.
    editor.lua("require('acp').reject(...)", str(path), hunk["id"])
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert (lines(editor, buf), path.read_text()) == (["one", "two", "three"], "one\ntwo\nthree\n")


def test_gemini_new_file_probed_as_empty_is_created_and_rejectable(
    editor: Editor, tmp_path: Path
) -> None:
    # gemini-cli probes a new file's path with fs/read_text_file (answered "" with
    # missing_file_as_empty, as its preset has it), asks with the diff, then writes.
    path = tmp_path / "project" / "new.py"
    agent = {**editor.fake_agent("files"), "missing_file_as_empty": True}
    editor.setup(agents={"gemini": agent}, permission_policy="allow_all")
    editor.open_chat("gemini")
    steps = [
        {"read": {"path": str(path)}},
        {"ask": {"path": str(path), "oldText": "", "newText": "made = 1\n", "write": "made = 1\n"}},
    ]
    assert run(editor, steps)[0] == {"content": ""}
    assert path.read_text() == "made = 1\n"
    created_and_rejected(editor, path)


@pytest.mark.parametrize("loaded", [True, False])
def test_claudes_own_edit_after_its_permission_is_one_hunk_and_rejectable(
    editor: Editor, tmp_path: Path, loaded: bool
) -> None:
    # claude-agent-acp 0.23.1: the call pending with a diff of the whole file minus its
    # final newline, a permission request carrying it, the agent's own write to disk
    # (no fs/write_text_file), completed.
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\ny = 2\n")
    if loaded:
        editor.nvim.command(f"edit {path}")
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    editor.setup(agents={"claude": editor.fake_agent("files")}, permission_policy="allow_all")
    editor.open_chat("claude")
    [outcome] = run(editor, [{"claude": {"path": str(path), "content": "x = 1\ny = 3\n"}}])
    assert outcome == {"outcome": "selected", "optionId": "allow"}
    if loaded:
        assert lines(editor, buf) == ["x = 1", "y = 3"]  # the unmodified buffer was reloaded
    [file] = editor.lua("return require('acp').changes()")
    assert [h["preview"] for h in file["hunks"]] == [["-y = 2", "+y = 3"]]
    editor.lua("require('acp').reject(...)", str(path))
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "x = 1\ny = 2\n"


@pytest.mark.parametrize("named", ["@my\\ notes.txt", "`my notes.txt`", '"my notes.txt"'])
def test_demo_agent_edits_a_file_whose_name_has_a_space(editor: Editor, tmp_path: Path, named: str) -> None:
    """`edit @my\\ notes.txt` (as `@` completion writes it) edited demo.txt: the demo
    agent took the prompt's words one by one, so no path with a space was found."""
    path = tmp_path / "project" / "my notes.txt"
    path.write_text("mine\n")
    editor.setup(permission_policy="allow_all")
    editor.open_chat()
    editor.lua("require('acp').send(...)", f"edit {named}")
    editor.wait_event("AcpTurnEnd")
    assert path.read_text().startswith("# Edited by the acp.nvim demo agent")
    editor.lua("require('acp').send(...)", f"disk {named}")
    editor.wait_event("AcpTurnEnd", count=2)
    assert path.read_text().endswith("Written to disk directly by the acp.nvim demo agent.\n")
    assert not (tmp_path / "project" / "demo.txt").exists()


def test_an_earlier_turns_open_hunk_is_marked_with_its_keys_once_the_later_turns_are_decided(
    editor: Editor, tmp_path: Path
) -> None:
    """Two turns changed one file; the later one's hunk accepted, the earlier one's
    still open showed no mark and no key in the buffer: it waited, unseen, in
    :AcpReview only."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n6\n7\n8\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n5\n6\n7\n8\n"}}])
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n3\n4\n5\n6\n7\neight\n"}}], turn=2)
    assert marks(editor, buf) == [7]  # the later turn's hunk
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...)); vim.api.nvim_win_set_cursor(0, {8, 0})", buf)
    editor.nvim.input("\\a")  # <localleader>a on the later turn's hunk
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")
    assert marks(editor, buf) == [0]
    editor.nvim.command("1")
    hunk = editor.lua("return require('acp').hunk_at_cursor()")
    assert (hunk["turn"], hunk["preview"]) == (1, ["-1", "+one"])
    editor.nvim.input("\\r")  # <localleader>r, as the help lists it
    editor.wait(
        "require('acp').changes({all = true})[2].hunks[1].status == 'rejected'",
        what="the earlier hunk rejected by its key",
    )
    assert lines(editor, buf)[0] == "1"
    assert path.read_text() == "1\n2\n3\n4\n5\n6\n7\neight\n"
    assert marks(editor, buf) == []


@pytest.mark.parametrize("tracked", [True, False])
def test_claudes_edit_written_before_its_announcement_is_read_is_one_hunk_and_rejectable(
    editor: Editor, tmp_path: Path, tracked: bool
) -> None:
    # claude-agent-acp 0.23.1 in mode acceptEdits: no request, the file on disk already
    # changed when the client reads the call (its diff the whole file minus its final
    # newline): the "before" comes from the diff (or git), the final newline kept.
    project = tmp_path / "project"
    path = project / "b.py"
    path.write_text("x = 1\ny = 2\n")
    if tracked:
        git(project, "init", "-q")
        git(project, "add", "b.py")
        git(project, "-c", "user.email=you@example.com", "-c", "user.name=You",
            "-c", "commit.gpgsign=false", "commit", "-qm", "b")  # fmt: skip
    editor.setup(agents={"claude": editor.fake_agent("files")})
    editor.open_chat("claude")
    steps = [{"claude": {"path": str(path), "content": "x = 1\ny = 3\n", "accept": True}}]
    editor.lua("require('acp').send(...)", json.dumps(steps))
    editor.wait_event("AcpTurnEnd")
    [file] = editor.lua("return require('acp').changes()")
    assert [h["preview"] for h in file["hunks"]] == [["-y = 2", "+y = 3"]]
    editor.lua("require('acp').reject(...)", str(path))
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "x = 1\ny = 2\n"


def test_the_older_claude_adapters_edit_is_asked_once_with_its_diff_and_remembered_as_an_edit(
    editor: Editor, tmp_path: Path
) -> None:
    # claude-code-acp 0.16.2: `tool_call` twice for one id (its diff only in the
    # second), a permission request whose tool call has no kind and no content, once
    # allowed a read (line 1, limit 2000) and fs/write_text_file, completed.
    path = tmp_path / "project" / "b.py"
    path.write_text("x = 1\ny = 2\n")
    buf = start(editor, path)
    assert buf is not None
    steps = [{"claude_legacy": {"path": str(path), "content": f"x = 1\ny = {y}\n"}} for y in (3, 4)]
    editor.lua("require('acp').send(...)", json.dumps(steps))
    wait_text(editor, PROMPT)
    # One call, its kind and its diff kept from the calls before the request.
    heading = f"#### Edit `{path}`"
    transcript = editor.transcript()
    assert transcript.count(heading) == 1 and not any(t == "#### Edit" for t in transcript)
    at = transcript.index(heading)
    # The diff as the file reads: no "No newline at end of file" where the agent
    # only left out the final newline on both sides.
    assert transcript[at + 1 : at + 9] == [
        "`edit` · pending", "```diff", "diff --git b.py b.py", "--- b.py", "+++ b.py",
        "@@ -1,2 +1,2 @@", " x = 1", "-y = 2",
    ]  # fmt: skip
    assert transcript[at + 9 : at + 13] == ["+y = 3", "```", "→ b.py", PROMPT]
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0"
    )
    assert [m["virt_lines"] for m in preview_marks(editor, buf, "acp.preview")] == [[], ["y = 3"]]
    focus_transcript(editor)
    editor.nvim.input("A")  # always: the second edit is not asked
    editor.wait_event("AcpTurnEnd")
    assert len(editor.events("AcpPermissionRequest")) == 1
    results = [
        json.loads(line.split("RESULT ", 1)[1])
        for line in editor.transcript()
        if line.startswith("RESULT ")
    ]
    always = {"outcome": "selected", "optionId": "allow_always"}
    assert results == [always, {"content": "x = 1\ny = 2\n"}, always, {"content": "x = 1\ny = 3\n"}]
    assert lines(editor, buf) == ["x = 1", "y = 4"]
    [file] = editor.lua("return require('acp').changes()")
    assert [h["preview"] for h in file["hunks"]] == [["-y = 2", "+y = 4"]]
    editor.lua("require('acp').reject(...)", str(path))
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "x = 1\ny = 2\n"
