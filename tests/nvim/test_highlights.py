"""Highlight groups outlive colorscheme changes, and a colorscheme's own choice wins."""

from __future__ import annotations

from typing import Any

from tests.nvim.conftest import RENDER, Editor

GROUPS = "return vim.tbl_map(function(g) return { g[1], g[2] } end, require('acp.highlights').groups)"
# A colorscheme as most start: clear everything, then set its own groups.
SCHEME = """\
vim.cmd("highlight clear")
vim.g.colors_name = "acp_test"
vim.api.nvim_set_hl(0, "Normal", { fg = "#c0c0c0" })
vim.api.nvim_set_hl(0, "AcpUserHeader", { fg = "#ff0000" })
"""


def definitions(editor: Editor) -> dict[str, Any]:
    return dict(
        editor.lua(
            """
            local out = {}
            for _, g in ipairs(require('acp.highlights').groups) do
              out[g[1]] = vim.api.nvim_get_hl(0, { name = g[1] })
            end
            return out
            """
        )
    )


def test_groups_are_reapplied_after_a_colorscheme(editor: Editor) -> None:
    colors = editor.tmp / "xdg-config" / "nvim" / "colors"
    colors.mkdir(parents=True)
    (colors / "acp_test.lua").write_text(SCHEME)
    editor.lua(f"vim.opt.runtimepath:append({str(colors.parent)!r})")
    editor.setup()
    groups = editor.lua(GROUPS)
    assert len(groups) > 20
    linked = {name: {"link": link, "default": True} for name, link in groups}
    assert definitions(editor) == linked

    editor.nvim.command("colorscheme acp_test")
    after = definitions(editor)
    # What the colorscheme sets stays; every other group has its default link again.
    assert after.pop("AcpUserHeader") == {"fg": 0xFF0000}
    assert after == {name: value for name, value in linked.items() if name != "AcpUserHeader"}

    editor.nvim.command("colorscheme default")
    assert definitions(editor) == linked


def test_bold_in_a_reply_stays_bold_after_a_colorscheme_or_background_change(
    editor: Editor,
) -> None:
    """The transcript's syntax set its bold as attributes, which `:highlight clear`
    (the start of every colorscheme, and of a 'background' switch) wiped: `**bold**`
    drew plain until Neovim restarted. It links to a group Neovim defines again."""
    editor.setup()
    status = editor.open_chat()
    chat, buf = status["chat"], status["transcript_buf"]
    block = {"op": "block", "id": "m1", "kind": "agent", "lines": ["## Agent", ""]}
    editor.lua(RENDER, chat, [block, {"op": "append", "id": "m1", "text": "some **bold** words\n"}])
    lnum = editor.transcript().index("some **bold** words") + 1
    bold = (
        "local win, lnum = ...; return vim.api.nvim_win_call(win, function()"
        " return vim.fn.synIDattr(vim.fn.synIDtrans(vim.fn.synID(lnum, 8, 1)), 'bold') end)"
    )
    win = editor.lua("return vim.fn.win_findbuf(...)[1]", buf)
    assert editor.lua(bold, win, lnum) == "1"
    for change in ("colorscheme default", "set background=light", "colorscheme habamax"):
        editor.nvim.command(change)
        assert editor.lua(bold, win, lnum) == "1", change
