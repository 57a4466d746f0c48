"""Agent edits as diffs in the file itself: previews before allowing, decisions
where the hunks landed, :AcpDiff — in a headless Neovim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen
from tests.nvim.test_files import hunks, lines, modified, run, start
from tests.nvim.test_permissions import STUB_SELECT

# The default hunk keys, as typed (<localleader> is "\" unless set).
REJECT, ACCEPT, PREVIEW = "\\r", "\\a", "\\p"
# The default keys that answer a permission prompt in a file (keys.permission.buffer_*).
ALLOW, DENY = "\\y", "\\n"


def marks(editor: Editor, buf: int, namespace: str) -> list[dict[str, Any]]:
    """Our extmarks in `buf`: {row, end_row, line_hl, virt_lines (texts, without
    the gutter a preview's start with)}; not the keys' hint (see prompt_hint)."""
    return list(
        editor.lua(
            """
            local buf, name = ...
            local ns = vim.api.nvim_get_namespaces()[name]
            local out = {}
            for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {details = true})) do
              local d = m[4]
              if not d.virt_text then
                table.insert(out, {
                  row = m[2], end_row = d.end_row or m[2], line_hl = d.line_hl_group or '',
                  virt_lines = vim.tbl_map(function(l) return l[#l][1] end, d.virt_lines or {}),
                })
              end
            end
            return out
            """,
            buf,
            namespace,
        )
    )


def prompt_hint(editor: Editor, buf: int) -> list[Any]:
    """The preview's virtual text naming the keys that answer: [row, text]s."""
    return list(
        editor.lua(
            """
            local buf = ...
            local ns = vim.api.nvim_get_namespaces()['acp.preview']
            local out = {}
            for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {details = true})) do
              if m[4].virt_text then
                table.insert(out, {m[2], m[4].virt_text[1][1]})
              end
            end
            return out
            """,
            buf,
        )
    )


def pending_prompts(editor: Editor) -> int:
    return int(editor.lua("return #(require('acp.chat.registry').get().prompts or {})"))


def ask(editor: Editor, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Send a script to the `files` fake agent; returns the permission request."""
    editor.lua("require('acp').send(...)", json.dumps(steps))
    return editor.wait_event("AcpPermissionRequest")


# A Lua expression: how many floating windows the tab shows.
FLOATS = (
    "#vim.tbl_filter(function(w) return vim.api.nvim_win_get_config(w).relative ~= ''"
    " end, vim.api.nvim_tabpage_list_wins(0))"
)


def window_state(editor: Editor) -> dict[str, Any]:
    return dict(
        editor.lua(
            """return {win = vim.api.nvim_get_current_win(), cursor = vim.api.nvim_win_get_cursor(0),
                       wins = #vim.api.nvim_tabpage_list_wins(0)}"""
        )
    )


def focus(editor: Editor, buf: int, row: int = 1) -> None:
    """Put the cursor on ``row`` of ``buf``'s window through the API. Neovim fires the
    CursorMoved of it once back in its main loop, which a next request can come before
    (behind the host's batches still queued): what a CursorMoved closes, the hunk's
    preview, is opened by typed keys, which Neovim reads only there."""
    editor.lua(
        "local buf, row = ...; vim.api.nvim_set_current_win(vim.fn.bufwinid(buf));"
        "vim.api.nvim_win_set_cursor(0, {row, 0})",
        buf,
        row,
    )


@pytest.mark.parametrize("version", [1, 2])
def test_a_permission_request_previews_the_edit_in_its_buffer_where_its_keys_edit_nothing(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\nthree\nfour\n")
    buf = start(editor, path, version)
    assert buf is not None
    focus(editor, buf, 4)
    before = window_state(editor)
    ask(editor, [{"ask": {"path": str(path), "oldText": "two\nthree", "newText": "2\n2b\n3"}}])
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0"
    )
    # The lines the edit replaces are marked, the new ones hang below them; the
    # text, the window and the cursor are the user's as they were.
    assert marks(editor, buf, "acp.preview") == [
        {"row": 1, "end_row": 2, "line_hl": "AcpReviewDelete", "virt_lines": []},
        {"row": 2, "end_row": 2, "line_hl": "", "virt_lines": ["2", "2b", "3"]},
    ]
    # The file says which keys answer there.
    assert prompt_hint(editor, buf) == [[1, "  acp: \\y Allow once · \\n Reject (or in the chat)"]]
    assert lines(editor, buf) == ["one", "two", "three", "four"]
    assert editor.lua("return vim.bo[...].modified", buf) is False
    assert window_state(editor) == before

    # `A` appends and `r` replaces, as in any file: the prompt still waits.
    editor.nvim.input("Ax<Esc>")
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 3, 4, false)[1] == 'fourx'")
    editor.nvim.input("0rF")
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 3, 4, false)[1] == 'Fourx'")
    assert pending_prompts(editor) == 1 and editor.events("AcpTurnEnd") == []
    assert "permission: selected" not in editor.transcript_text()

    editor.nvim.input(DENY)
    editor.wait_event("AcpTurnEnd")
    assert '"optionId": "reject"' in editor.transcript_text()
    assert marks(editor, buf, "acp.preview") == [] and prompt_hint(editor, buf) == []
    assert path.read_text() == "one\ntwo\nthree\nfour\n"
    assert editor.lua("return vim.fn.maparg(...)", DENY) == ""  # gone with the prompt


@pytest.mark.parametrize("version", [1, 2])
def test_a_file_no_window_shows_is_previewed_in_a_window_that_does_not_take_the_cursor(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    path = tmp_path / "project" / "b.txt"
    path.write_text("x = 1\n")
    start(editor, version=version)
    before = window_state(editor)
    steps = [
        {"ask": {"path": str(path), "oldText": "x = 1\n", "newText": "x = 2\n", "write": "x = 2\n"}}
    ]
    ask(editor, steps)
    editor.wait(f"vim.fn.bufwinid({str(path)!r}) ~= -1")
    after = window_state(editor)
    assert (after["win"], after["cursor"], after["wins"]) == (
        before["win"],
        before["cursor"],
        before["wins"] + 1,
    )
    buf = editor.lua("return vim.fn.bufnr(...)", str(path))
    assert [m["virt_lines"] for m in marks(editor, buf, "acp.preview")] == [[], ["x = 2"]]
    # The prompt's keys for a file work there too.
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", str(path))
    editor.nvim.input(ALLOW)
    editor.wait_event("AcpTurnEnd")
    assert path.read_text() == "x = 2\n"
    assert editor.lua("return vim.fn.bufwinid(...)", str(path)) == -1  # the window went
    assert window_state(editor)["wins"] == before["wins"]


def test_a_preview_above_the_first_line_leaves_no_filler_rows_once_answered(
    editor: Editor, tmp_path: Path
) -> None:
    # A line the edit would add at the top shows above line 1: the file's window
    # scrolls to it. Answered from the chat, that window kept an empty filler
    # row ("-----") there.
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\n")
    buf = start(editor, path)
    screen = Screen(editor, 120, 40)
    row, col = editor.lua(
        "local i = vim.fn.getwininfo(vim.fn.bufwinid(...))[1] return {i.winrow, i.wincol}", buf
    )
    ask(editor, [{"ask": {"path": str(path), "oldText": "one\n", "newText": "zero\none\n"}}])
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0"
    )
    screen.draw()
    assert [screen.text(row + i, col, 8).strip() for i in range(3)] == ["+ zero", "one", "two"]
    editor.lua(STUB_SELECT)
    editor.lua("_G.pick = 2; require('acp').permission()")  # the second option rejects
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) == 0"
    )
    screen.draw()
    assert [screen.text(row + i, col, 8).strip() for i in range(2)] == ["one", "two"]


@pytest.mark.parametrize("version", [1, 2])
def test_split_preview_diffs_the_file_against_the_proposed_text(
    editor: Editor, tmp_path: Path, version: int
) -> None:
    path = tmp_path / "project" / "c.txt"
    path.write_text("a\nb\nc\n")
    buf = start(editor, path, version)
    editor.setup(
        agents={"files": editor.fake_agent("files")}, diff_preview="split", protocol_version=version
    )
    ask(editor, [{"ask": {"path": str(path), "oldText": "b\n", "newText": "B\n"}}])
    editor.wait("vim.fn.bufnr('acp://proposed/*') ~= -1")
    proposed = editor.lua("return vim.fn.bufnr('acp://proposed/*')")
    assert lines(editor, proposed) == ["a", "B", "c"]
    diffed = editor.lua(
        "local a, b = ...; return {vim.wo[vim.fn.bufwinid(a)].diff, vim.wo[vim.fn.bufwinid(b)].diff}",
        buf,
        proposed,
    )
    assert diffed == [True, True]
    assert lines(editor, buf) == ["a", "b", "c"]
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", proposed)
    editor.nvim.input(DENY)
    editor.wait_event("AcpTurnEnd")
    assert editor.lua("return vim.fn.bufnr('acp://proposed/*')") == -1
    assert editor.lua("return vim.wo[vim.fn.bufwinid(...)].diff", buf) is False


def test_the_reject_key_on_an_agent_hunk_restores_buffer_and_disk_in_one_undo_step(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n5\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [{"write": {"path": str(path), "content": "1\ntwo\n3\n4\nfive\n"}}])
    focus(editor, buf, 2)
    seq = editor.lua("return vim.fn.undotree(...).seq_last", buf)
    editor.nvim.input(REJECT)
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert lines(editor, buf) == ["1", "2", "3", "4", "five"]
    assert path.read_text() == "1\n2\n3\n4\nfive\n"
    assert editor.lua("return vim.fn.undotree(...).seq_last", buf) == seq + 1
    editor.nvim.command("undo")
    assert lines(editor, buf) == ["1", "two", "3", "4", "five"]
    # The other hunk keeps its key: accept it, and the keys go with the last hunk.
    editor.nvim.command("redo")
    focus(editor, buf, 5)
    editor.nvim.input(ACCEPT)
    editor.wait("require('acp').changes()[1].hunks[2].status == 'accepted'")
    editor.wait(f"vim.fn.maparg({REJECT!r}, 'n') == ''")


def test_marks_follow_a_line_inserted_above_the_hunk(editor: Editor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    path = project / "a.txt"
    path.write_text("a\nb\nc\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [{"write": {"path": str(path), "content": "a\nb\nC\n"}}])
    assert [m["row"] for m in marks(editor, buf, "acp.review")] == [2, 2]  # rows, removed lines
    editor.lua("vim.api.nvim_buf_set_lines(..., 0, 0, false, {'typed'})", buf)
    assert [m["row"] for m in marks(editor, buf, "acp.review")] == [3, 3]
    focus(editor, buf, 4)
    hunk = editor.lua("return require('acp').hunk_at_cursor()")
    assert (hunk["path"], hunk["turn"], hunk["new_start"], hunk["preview"]) == (
        str(path),
        1,
        3,
        ["-c", "+C"],
    )
    focus(editor, buf, 3)
    assert editor.lua("return require('acp').hunk_at_cursor()") is None
    # Another change of the review redraws every mark: this one stays where it moved.
    run(editor, [{"write": {"path": str(project / "other.txt"), "content": "o\n"}}], turn=2)
    assert marks(editor, buf, "acp.review") == [
        {"row": 3, "end_row": 3, "line_hl": "AcpReviewAdd", "virt_lines": []},
        {"row": 3, "end_row": 3, "line_hl": "", "virt_lines": ["c"]},  # removed, above
    ]


def test_acp_diff_opens_the_file_against_its_baseline_and_decides_from_there(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "1\ntwo\n3\nfour\n"}}])
    editor.lua("vim.cmd('tab split | enew'); pcall(vim.cmd, 'AcpDiff'); vim.cmd('tabclose')")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        "acp: :AcpDiff compares a file: name one, or run it in a file's buffer"
    )
    editor.nvim.command(f"AcpDiff {path}")
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    base = editor.lua("return vim.fn.bufnr('acp://baseline/*')")
    assert lines(editor, base) == ["1", "2", "3"]
    state = editor.lua(
        """local base, buf = ...
        local bw, fw = vim.fn.bufwinid(base), vim.fn.bufwinid(buf)
        return {vim.wo[bw].diff, vim.wo[fw].diff, vim.bo[base].modifiable, vim.bo[base].readonly,
                #vim.api.nvim_tabpage_list_wins(0), vim.api.nvim_get_current_win() == fw}""",
        base,
        buf,
    )
    assert state == [True, True, False, True, 4, True]  # + the chat's two windows
    # In diff mode the baseline shows the removed lines: no virtual lines beside it.
    assert all(m["virt_lines"] == [] for m in marks(editor, buf, "acp.review"))
    # Reject the hunk from the baseline's side.
    editor.lua(
        "vim.api.nvim_set_current_win(vim.fn.bufwinid(...)); vim.api.nvim_win_set_cursor(0, {2, 0})",
        base,
    )
    assert editor.lua("return require('acp').hunk_at_cursor().preview") == ["-2", "+two"]
    editor.nvim.input(REJECT)
    editor.wait("require('acp').changes()[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "1\n2\n3\nfour\n"
    # Accepting the other moves it into the baseline, which the split shows at once.
    editor.lua("require('acp').accept()")
    editor.wait(f"#vim.api.nvim_buf_get_lines({base}, 0, -1, false) == 4")
    assert lines(editor, base) == ["1", "2", "3", "four"]
    # The baseline, read-only to the user, followed both without a warning (W10).
    assert "W10" not in editor.lua("return vim.v.warningmsg .. vim.fn.execute('messages')")
    editor.nvim.input("q")
    editor.wait("vim.fn.bufnr('acp://baseline/*') == -1")
    assert editor.lua("return vim.wo[vim.fn.bufwinid(...)].diff", buf) is False


def test_acp_diff_sides_pair_their_lines_row_by_row_under_a_winbar_each(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n3\n")
    buf = start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "1\ntwo\n3\n"}}])
    screen = Screen(editor, 120, 40)

    def sides() -> list[list[Any]]:
        """Baseline, then file: the window's top row on screen (its winbar) and the
        screen row of its line 2, where "2" and "two" stand."""
        screen.draw()
        placed = editor.lua(
            "return vim.tbl_map(function(win) local info = vim.fn.getwininfo(win)[1]"
            " return {info.winrow, info.wincol, info.width, vim.fn.screenpos(win, 2, 1).row}"
            " end, {vim.fn.bufwinid(vim.fn.bufnr('acp://baseline/*')), vim.fn.bufwinid(...)})",
            buf,
        )
        return [[screen.text(top, col, width).rstrip(), row] for top, col, width, row in placed]

    def close() -> None:
        """`q` in the baseline."""
        editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(vim.fn.bufnr('acp://baseline/*')))")
        editor.nvim.input("q")
        editor.wait("vim.fn.bufnr('acp://baseline/*') == -1")

    editor.nvim.command(f"AcpDiff {path}")
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    # Paired lines side by side: each side's winbar takes the same row above them.
    assert sides() == [["baseline of a.txt before turn 1", 3], ["a.txt now", 3]]
    close()
    assert editor.lua("return vim.wo[vim.fn.bufwinid(...)].winbar", buf) == ""
    # A winbar of the user's own stays as it is, and takes that row itself.
    editor.lua("vim.wo[vim.fn.bufwinid(...)].winbar = 'mine'", buf)
    editor.nvim.command(f"AcpDiff {path}")
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    assert sides() == [["baseline of a.txt before turn 1", 3], ["mine", 3]]
    close()
    assert editor.lua("return vim.wo[vim.fn.bufwinid(...)].winbar", buf) == "mine"


def test_acp_diff_of_a_file_whose_changes_are_all_decided_says_so(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n")
    start(editor, path)
    run(editor, [{"write": {"path": str(path), "content": "1\ntwo\n"}}])
    editor.lua("require('acp').accept()")
    editor.wait("not require('acp').changes()[1].open")
    editor.nvim.command(f"AcpDiff {path}")
    assert editor.lua("return vim.fn.bufnr('acp://baseline/*')") == -1
    notice = editor.lua("return _G.acp_notices[#_G.acp_notices].msg")
    assert notice == "acp: the agent's changes to a.txt in turn 1 are all decided: nothing to compare"


def test_acp_diff_without_a_turn_compares_the_turn_whose_hunks_still_wait(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("1\n2\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [{"write": {"path": str(path), "content": "one\n2\n"}}])
    run(editor, [{"write": {"path": str(path), "content": "zero\none\n2\nthree\n"}}], turn=2)
    editor.lua("require('acp').accept(..., 1); require('acp').accept(..., 2)", str(path))
    editor.wait("not require('acp').changes()[1].open", what="turn 2 decided")
    focus(editor, buf, 1)
    editor.nvim.command("AcpDiff")  # turn 1's hunk waits
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    base = editor.lua("return vim.fn.bufnr('acp://baseline/*')")
    assert editor.lua("return vim.api.nvim_buf_get_name(...)", base).startswith("acp://baseline/1/")
    # Turn 1's own change: turn 2's accepted lines are on both sides, not a difference.
    assert lines(editor, base) == ["zero", "1", "2", "three"]
    # Its hunk is marked in the file where it is now, and decided from either side.
    assert marks(editor, buf, "acp.review") == [
        {"row": 1, "end_row": 1, "line_hl": "AcpReviewAdd", "virt_lines": []}
    ]
    editor.lua(
        "vim.api.nvim_set_current_win(vim.fn.bufwinid(...)); vim.api.nvim_win_set_cursor(0, {2, 0})",
        base,
    )
    hunk = editor.lua("return require('acp').hunk_at_cursor()")
    assert (hunk["turn"], hunk["preview"]) == (1, ["-1", "+one"])
    editor.nvim.input(REJECT)
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 1, 2, false)[1] == '1'", what="rejected")
    assert path.read_text() == "zero\n1\n2\nthree\n"


@pytest.mark.parametrize("version", [1, 2])
def test_acp_diff_of_a_file_the_agent_wrote_itself_decides_from_there(
    editor: Editor, version: int
) -> None:
    """A v2 agent writes its files itself and names the change in its tool call as a
    patch: :AcpDiff compares the file against it and a hunk is rejected from there."""
    from tests.nvim.test_rewind import start as start_agent
    from tests.nvim.test_rewind import turn

    path = editor.tmp / "project" / "a.txt"
    path.write_text("zero\n")
    start_agent(editor, "rewind", version)
    buf = editor.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); return b", str(path))
    turn(editor, "write a.txt one", 1)
    editor.nvim.command(f"AcpDiff {path}")
    editor.wait("vim.fn.bufnr('acp://baseline/*') ~= -1")
    base = editor.lua("return vim.fn.bufnr('acp://baseline/*')")
    assert lines(editor, base) == ["zero"] and lines(editor, buf) == ["one"]
    focus(editor, base)
    assert editor.lua("return require('acp').hunk_at_cursor().preview") == ["-zero", "+one"]
    editor.nvim.input(REJECT)
    editor.wait("require('acp').changes({all = true})[1].hunks[1].status == 'rejected'")
    assert path.read_text() == "zero\n" and lines(editor, buf) == ["zero"]


def test_hunk_command_preview_and_keys_are_configurable(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [{"write": {"path": str(path), "content": "A\nb\nc\n"}}])
    focus(editor, buf, 1)
    editor.nvim.input(":AcpHunk preview<CR>")
    editor.wait(f"{FLOATS} == 1", what="the preview")
    float_lines = editor.lua(
        """for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
             if vim.api.nvim_win_get_config(w).relative ~= '' then
               return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false)
             end
           end"""
    )
    assert float_lines[1:] == ["-a", "+A"]
    editor.nvim.input("]h")
    editor.wait("vim.fn.line('.') == 3")
    editor.nvim.command("AcpHunk accept")
    editor.wait("require('acp').changes()[1].hunks[2].status == 'accepted'")
    # Keys off: none mapped in the next buffer holding hunks.
    editor.setup(agents={"files": editor.fake_agent("files")}, hunk_keys=False)
    run(editor, [{"write": {"path": str(path), "content": "A\nB\nc\n"}}], turn=2)
    assert editor.lua("return vim.fn.maparg(']h', 'n')") == ""
    editor.nvim.command("AcpHunk reject")  # the command still works
    assert any("no agent hunk" in n["msg"] for n in editor.lua("return _G.acp_notices"))


def test_deciding_a_previewed_hunk_closes_its_preview(editor: Editor, tmp_path: Path) -> None:
    """The float named the hunk "pending" until the cursor moved."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\n")
    buf = start(editor, path)
    assert buf is not None
    run(editor, [{"write": {"path": str(path), "content": "A\nb\n"}}])
    focus(editor, buf, 1)
    editor.nvim.input(PREVIEW)
    editor.wait(f"{FLOATS} == 1", what="the preview")
    editor.nvim.command("AcpHunk accept")
    assert editor.lua(f"return {FLOATS}") == 0
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")


def test_a_write_asked_at_its_fs_access_prompt_is_previewed_too(
    editor: Editor, tmp_path: Path
) -> None:
    outside = tmp_path / "notes.txt"  # the session's directory is tmp_path/project
    outside.write_text("keep\nold\n")
    start(editor)
    editor.lua(
        "require('acp').send(...)",
        json.dumps([{"write": {"path": str(outside), "content": "keep\nnew\n"}}]),
    )
    editor.wait_event("AcpPermissionRequest")
    editor.wait(f"vim.fn.bufwinid({str(outside)!r}) ~= -1")
    buf = editor.lua("return vim.fn.bufnr(...)", str(outside))
    assert [
        (m["row"], m["line_hl"], m["virt_lines"]) for m in marks(editor, buf, "acp.preview")
    ] == [
        (1, "AcpReviewDelete", []),
        (1, "", ["new"]),
    ]
    assert outside.read_text() == "keep\nold\n"
    editor.lua("vim.api.nvim_set_current_win(vim.fn.bufwinid(...))", str(outside))
    editor.nvim.input(ALLOW)
    editor.wait_event("AcpTurnEnd")
    assert outside.read_text() == "keep\nnew\n"
    # The buffer loaded for the preview went with it.
    assert editor.lua("return vim.fn.bufnr(...)", str(outside)) == -1


def preview_shown(editor: Editor, buf: int) -> None:
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0"
    )


def test_a_preview_keeps_your_unsaved_line_where_the_write_will_keep_it(
    editor: Editor, tmp_path: Path
) -> None:
    """Decision 0015: an agent's change reaching into a line you typed and did not
    save waits as a conflict, your line staying. The prompt's preview showed the
    agent's line over yours all the same: you were asked about another edit than
    the one allowing it made. Now it shows your line kept and marked, the agent's
    below it as what will wait in the review, and the rest of the edit as before."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\nd\n")
    buf = start(editor, path)
    assert buf is not None
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 2, false, {'mine'})", buf)
    run(editor, [{"read": {"path": str(path)}}])  # through the editor: it saw "mine"
    written = "A\nb\nmine, reworded\nc\nd\n"
    edit = {"path": str(path), "oldText": "a\nb\nmine", "newText": "A\nb\nmine, reworded"}
    ask(editor, [{"ask": {**edit, "write": written}}])
    preview_shown(editor, buf)
    held = "your lines stay; the agent's wait in :AcpReview:"
    assert marks(editor, buf, "acp.preview") == [
        {"row": 0, "end_row": 0, "line_hl": "AcpReviewDelete", "virt_lines": []},
        {"row": 0, "end_row": 0, "line_hl": "", "virt_lines": ["A"]},
        {"row": 2, "end_row": 2, "line_hl": "AcpReviewConflict", "virt_lines": []},
        {"row": 2, "end_row": 2, "line_hl": "", "virt_lines": [held, "mine, reworded"]},
    ]
    focus(editor, buf)
    editor.nvim.input(ALLOW)
    editor.wait_event("AcpTurnEnd", count=2)
    # What the preview showed is what the write did.
    assert lines(editor, buf) == ["A", "b", "mine", "c", "d"] and modified(editor, buf)
    assert path.read_text() == "A\nb\nc\nd\n"
    assert hunks(editor) == [
        ("pending", ["-a", "+A"]),
        ("conflict", ["-mine", "+mine, reworded"]),
    ]


def test_the_split_preview_holds_the_text_the_write_will_leave(
    editor: Editor, tmp_path: Path
) -> None:
    """The same edit as above, previewed side by side: the proposed text keeps your
    unsaved line, as the write will."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("a\nb\nc\nd\n")
    buf = start(editor, path)
    editor.setup(agents={"files": editor.fake_agent("files")}, diff_preview="split")
    editor.lua("vim.api.nvim_buf_set_lines(..., 2, 2, false, {'mine'})", buf)
    run(editor, [{"read": {"path": str(path)}}])
    edit = {"path": str(path), "oldText": "a\nb\nmine", "newText": "A\nb\nmine, reworded"}
    ask(editor, [{"ask": edit}])
    proposed = "vim.fn.bufnr('^acp://proposed/')"
    editor.wait(f"{proposed} ~= -1", what="the proposed text")
    assert editor.lua(f"return vim.api.nvim_buf_get_lines({proposed}, 0, -1, false)") == [
        "A",
        "b",
        "mine",
        "c",
        "d",
    ]


def test_a_write_asked_at_its_fs_access_prompt_is_previewed_as_it_lands(
    editor: Editor, tmp_path: Path
) -> None:
    """An agent that never read the file through the editor writes it (merge base:
    the disk's text). The preview merged against the buffer instead, so it showed the
    agent's text over your unsaved last line, which the write keeps."""
    outside = tmp_path / "notes.txt"  # the session's directory is tmp_path/project
    outside.write_text("keep\nold\n")
    buf = start(editor, outside)
    assert buf is not None
    editor.lua("vim.api.nvim_buf_set_lines(..., -1, -1, false, {'mine'})", buf)
    editor.lua(
        "require('acp').send(...)",
        json.dumps([{"write": {"path": str(outside), "content": "keep\nnew\n"}}]),
    )
    editor.wait_event("AcpPermissionRequest")
    preview_shown(editor, buf)
    assert [
        (m["row"], m["end_row"], m["line_hl"], m["virt_lines"])
        for m in marks(editor, buf, "acp.preview")
    ] == [(1, 1, "AcpReviewDelete", []), (1, 1, "", ["new"])]
    focus(editor, buf)
    editor.nvim.input(ALLOW)
    editor.wait_event("AcpTurnEnd")
    assert lines(editor, buf) == ["keep", "new", "mine"] and modified(editor, buf)
    assert outside.read_text() == "keep\nnew\n"


def test_every_hunk_of_every_chat_is_under_a_mark_in_its_buffer(
    editor: Editor, tmp_path: Path
) -> None:
    path = tmp_path / "project" / "a.txt"
    path.write_text("".join(f"{n}\n" for n in range(1, 11)))
    buf = start(editor, path)
    assert buf is not None
    editor.setup(agents={"files": editor.fake_agent("files"), "more": editor.fake_agent("files")})
    run(editor, [{"write": {"path": str(path), "content": path.read_text().replace("2\n", "two\n")}}])
    editor.lua("vim.o.columns = 200")
    editor.open_chat("more")
    # The second chat's agent writes on disk, keeping the first one's change.
    run(editor, [{"disk": {"path": str(path), "content": path.read_text().replace("9\n", "nine\n")}}])
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 8, 9, false)[1] == 'nine'")
    editor.wait("#require('acp').changes() == 1", what="the second chat's change")
    found = editor.lua(
        """
        local buf = ...
        local chats, found = require('acp.review.state').by_chat, {}
        vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
        for chat, state in pairs(chats) do
          for _, file in ipairs(state.files) do
            for _, hunk in ipairs(file.hunks) do
              vim.api.nvim_win_set_cursor(0, {hunk.new_start + 1, 0})
              local under = require('acp').hunk_at_cursor()
              table.insert(found, {chat, hunk.new_start, under and under.chat or 0})
            end
          end
        end
        table.sort(found, function(a, b) return a[2] < b[2] end)
        return found
        """,
        buf,
    )
    assert found == [[1, 1, 1], [2, 8, 2]]  # chat, row, the chat of the hunk marked there
    # ]h reaches both.
    editor.nvim.input("gg]h")
    editor.wait("vim.fn.line('.') == 2")
    editor.nvim.input("]h")
    editor.wait("vim.fn.line('.') == 9")


def test_each_added_line_has_its_plus_in_the_gutter_and_the_sign_column_stays(
    editor: Editor, tmp_path: Path
) -> None:
    """A virtual line has no sign: the "+" of the lines an edit adds stood beside
    the real row above them (or below, at the top), as if that row were added."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\nthree\n")
    buf = start(editor, path)
    assert buf is not None
    screen = Screen(editor, 100, 30)
    win = editor.lua("return vim.fn.bufwinid(...)", buf)
    editor.lua(f"vim.wo[{win}].number = true")
    assert editor.lua(f"return vim.wo[{win}].signcolumn") == "auto"
    ask(
        editor,
        [{"ask": {"path": str(path), "oldText": "one\ntwo\nthree\n",
                  "newText": "zero\none\n2\n2b\nthree\n", "write": "zero\none\n2\n2b\nthree\n"}}],
    )  # fmt: skip
    editor.wait(
        f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0"
    )
    screen.draw()
    top, left = editor.lua(f"local i = vim.fn.getwininfo({win})[1] return {{i.winrow, i.wincol}}")
    shown = [screen.text(top + row, left, 11).rstrip() for row in range(6)]
    assert shown == [
        "+     zero",  # above the first line
        "    1 one",
        "-   2 two",  # removed, in place
        "+     2",  # and what replaces it, below
        "+     2b",
        "    3 three",
    ]
    assert editor.lua(f"return vim.wo[{win}].signcolumn") == "yes"
    editor.lua(STUB_SELECT)
    editor.lua("_G.pick = 1; require('acp').permission()")  # the first option allows
    editor.wait_event("AcpTurnEnd")
    editor.lua("require('acp').accept()")
    editor.wait("require('acp').changes()[1].hunks[1].status == 'accepted'")
    assert editor.lua(f"return vim.wo[{win}].signcolumn") == "yes"  # no shift when marks go


ADDED_GUTTERS = """
local buf = ...
local ns = vim.api.nvim_get_namespaces()['acp.preview']
local out = {}
for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
  for _, line in ipairs(mark[4].virt_lines or {}) do
    table.insert(out, line[1][1])
  end
end
return { out, vim.fn.getwininfo(vim.api.nvim_get_current_win())[1].textoff }
"""


def test_the_added_lines_line_up_in_the_window_you_are_in_of_two_gutters(
    editor: Editor, tmp_path: Path
) -> None:
    """The file in two windows, one with line numbers: the "+" gutter of the lines an
    edit adds was measured once, where the preview was drawn, and in the other window
    the added text stood columns off the file's own. It is measured again for the
    window you go to, as its gutter's options change, and as Insert mode grows the
    file past 999 lines."""
    path = tmp_path / "project" / "a.txt"
    path.write_text("one\ntwo\n" + "x\n" * 996)
    buf = start(editor, path)
    numbered = editor.lua("return vim.fn.bufwinid(...)", buf)
    editor.lua(f"vim.wo[{numbered}].number = true")
    split = "vim.cmd('vsplit') return vim.api.nvim_get_current_win()"
    plain = editor.lua(f"return vim.api.nvim_win_call({numbered}, function() {split} end)")
    editor.lua(f"vim.wo[{plain}].number = false vim.api.nvim_set_current_win({numbered})")
    ask(editor, [{"ask": {"path": str(path), "oldText": "two\n", "newText": "2\n2b\n"}}])
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, vim.api.nvim_get_namespaces()['acp.preview'], 0, -1, {{}}) > 0")
    assert editor.lua(ADDED_GUTTERS, buf) == [["+" + " " * 5] * 2, 6]
    editor.lua(f"vim.api.nvim_set_current_win({plain})")
    assert editor.lua(ADDED_GUTTERS, buf) == [["+ "] * 2, 2]
    editor.lua(f"vim.wo[{plain}].number = true")  # :set number where you are
    assert editor.lua(ADDED_GUTTERS, buf) == [["+" + " " * 5] * 2, 6]
    editor.nvim.input("GO<CR>")  # 1,000 lines, still typing
    editor.wait(f"vim.api.nvim_buf_line_count({buf}) == 1000")
    assert editor.lua(ADDED_GUTTERS, buf) == [["+" + " " * 6] * 2, 7]
    editor.nvim.input("<Esc>")
    editor.lua(f"vim.wo[{plain}].number = false vim.wo[{plain}].signcolumn = 'no'")  # no gutter
    assert editor.lua(ADDED_GUTTERS, buf) == [["2", "2b"], 0]
    editor.lua(f"vim.api.nvim_set_current_win({numbered})")
    assert editor.lua(ADDED_GUTTERS, buf) == [["+" + " " * 6] * 2, 7]
