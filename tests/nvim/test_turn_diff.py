""":AcpTurnDiff: every file a turn changed in one tab, each with its hunks inline,
decided with the review's keys (issue 28, point 5)."""

from __future__ import annotations

from tests.nvim.conftest import Editor
from tests.nvim.test_files import run, start


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
