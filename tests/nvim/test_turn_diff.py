""":AcpTurnDiff: every file a turn changed in one tab, each with its hunks inline,
decided with the review's keys (issue 28, point 5)."""

from __future__ import annotations

from tests.nvim.conftest import Editor
from tests.nvim.test_files import run, start
from tests.nvim.test_inline import REJECT, marks


def shown(editor: Editor) -> list[list[str]]:
    """The current tab page's windows: their file and their winbar as drawn."""
    return editor.lua(  # type: ignore[no-any-return]
        "return vim.tbl_map(function(w) return {vim.api.nvim_buf_get_name("
        "vim.api.nvim_win_get_buf(w)), vim.api.nvim_eval_statusline(vim.wo[w].winbar,"
        " {winid = w, use_winbar = true}).str} end, vim.api.nvim_tabpage_list_wins(0))"
    )


def test_a_turns_files_open_in_one_tab_and_take_the_review_keys(editor: Editor) -> None:
    project = editor.tmp / "project"
    for name in ("a.txt", "b.txt", "c.txt"):
        (project / name).write_text("one\ntwo\n")
    start(editor)
    run(editor, [{"write": {"path": str(project / "c.txt"), "content": "one\nTWO\n"}}])
    writes = [
        {"write": {"path": str(project / name), "content": f"one\ntwo\n{name}\n"}}
        for name in ("a.txt", "b.txt")
    ]
    run(editor, writes, turn=2)
    tabs = editor.lua("return #vim.api.nvim_list_tabpages()")
    editor.nvim.command("AcpTurnDiff")
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == tabs + 1
    assert shown(editor) == [
        [str(project / "a.txt"), "turn 2 · a.txt · +1 -0"],
        [str(project / "b.txt"), "turn 2 · b.txt · +1 -0"],
    ]
    # The review's hunk key accepts the hunk under the cursor, in the file it is in.
    editor.nvim.command("2wincmd w")
    editor.nvim.command("normal! G")
    editor.nvim.input("\\a")
    editor.wait(
        "vim.iter(require('acp').changes()):any(function(f)"
        " return f.path:find('b.txt', 1, true) and f.hunks[1].status == 'accepted' end)",
        what="b.txt's hunk accepted",
    )
    [a] = [f for f in editor.lua("return require('acp').changes()") if f["path"].endswith("a.txt")]
    assert a["hunks"][0]["status"] == "pending"
    # The winbar follows the review, and the window: another file there has none.
    assert shown(editor)[1] == [str(project / "b.txt"), "turn 2 · b.txt · +1 -0 · decided"]
    editor.nvim.command(f"1wincmd w | edit {project / 'c.txt'}")
    assert shown(editor)[0] == [str(project / "c.txt"), ""]
    editor.wait("vim.wo.winbar == ''", what="the winbar's row given back")
    # An earlier turn by its number.
    editor.nvim.command("AcpTurnDiff 1")
    assert shown(editor) == [[str(project / "c.txt"), "turn 1 · c.txt · +1 -1"]]
    editor.nvim.command("AcpTurnDiff one")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == (
        'acp: a turn is a whole number, not "one"'
    )
    # A turn the chat never ran is named so, as :AcpRestore names it; not "changed no file".
    editor.nvim.command("AcpTurnDiff 9")
    assert editor.lua("return _G.acp_notices")[-1]["msg"] == "acp: no turn 9 (turns 1 to 2)"


def test_an_earlier_turn_shows_its_own_hunks_where_a_later_turn_moved_them(
    editor: Editor,
) -> None:
    path = editor.tmp / "project" / "a.txt"
    path.write_text("1\n2\n3\n4\n")
    start(editor)
    run(editor, [{"write": {"path": str(path), "content": "1\nTWO\n3\n4\n"}}])
    # Turn 2 adds a line above turn 1's and changes another: its hunks wait too.
    run(editor, [{"write": {"path": str(path), "content": "0\n1\nTWO\n3\nFOUR\n"}}], turn=2)
    editor.nvim.command("AcpTurnDiff 1")
    assert shown(editor) == [[str(path), "turn 1 · a.txt · +1 -1"]]
    buf = editor.lua("return vim.api.nvim_get_current_buf()")
    # Turn 1's hunk, on "TWO" where it is now; turn 2's are not this turn's.
    assert marks(editor, buf, "acp.review") == [
        {"row": 2, "end_row": 2, "line_hl": "AcpReviewAdd", "virt_lines": []},
        {"row": 2, "end_row": 2, "line_hl": "", "virt_lines": ["2"]},
    ]
    editor.nvim.command("normal! 3G")
    assert editor.lua("return require('acp').hunk_at_cursor().turn") == 1
    editor.nvim.input(REJECT)
    editor.wait(f"vim.api.nvim_buf_get_lines({buf}, 2, 3, false)[1] == '2'", what="rejected")
    assert path.read_text() == "0\n1\n2\n3\nFOUR\n"
    # The tab closed, the buffer shows its newest turn's hunks again.
    editor.nvim.command("tabclose")
    ns = "vim.api.nvim_get_namespaces()['acp.review']"
    editor.wait(f"#vim.api.nvim_buf_get_extmarks({buf}, {ns}, 0, -1, {{}}) == 3", what="turn 2's")
    assert [m["row"] for m in marks(editor, buf, "acp.review")] == [0, 4, 4]


def test_files_with_no_text_are_named_not_opened(editor: Editor) -> None:
    """A turn that wrote a text file and a file with no text: one window, the text's;
    the other named with its size (decision 0099). One with only such files opens no
    tab at all."""
    project = editor.tmp / "project"
    (project / "a.txt").write_text("one\n")
    logo = project / "logo.png"
    start(editor)
    write = {"write": {"path": str(project / "a.txt"), "content": "one\ntwo\n"}}
    run(editor, [write, {"bytes": {"path": str(logo), "hex": (b"\x00" * 3).hex()}}])
    tabs = editor.lua("return #vim.api.nvim_list_tabpages()")
    editor.nvim.command("AcpTurnDiff")
    assert shown(editor) == [[str(project / "a.txt"), "turn 1 · a.txt · +1 -0"]]
    told = "turn 1 also changed files with no text, not shown: logo.png (binary, 3 bytes) (:AcpReview)"
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == f"acp: {told}"
    editor.nvim.command("tabclose")
    run(editor, [{"bytes": {"path": str(logo), "hex": (b"\x00" * 5).hex()}}], turn=2)
    editor.nvim.command("AcpTurnDiff 2")
    assert editor.lua("return #vim.api.nvim_list_tabpages()") == tabs
    told = "turn 2 changed files with no text, not shown: logo.png (binary, 5 bytes) (:AcpReview)"
    assert editor.lua("return _G.acp_notices[#_G.acp_notices].msg") == f"acp: {told}"
