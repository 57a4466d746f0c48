"""What a user sees: a UI attached to the test's Neovim, its screen read as cells.

Attached with ``ext_hlstate``, Neovim names the highlight groups each cell's
colours were made of (syntax, our stored marks, a decoration provider's ephemeral
marks alike), so a test asks which of our groups colour a row of a window rather
than which extmarks a buffer holds. Each of our groups gets a colour of its own
(linked, a cell would be named by the group it links to).
"""

from __future__ import annotations

__all__ = ["Screen"]

from typing import Any

from tests.nvim.conftest import Editor


class Screen:
    """The grid of a UI attached to ``editor`` (one grid: windows drawn into it);
    ``Screen.of(editor)`` attaches one the first time."""

    @classmethod
    def of(cls, editor: Editor) -> Screen:
        screen = getattr(editor, "screen", None)
        if screen is None:
            screen = cls(editor)
            editor.screen = screen  # type: ignore[attr-defined]
        return screen

    def __init__(self, editor: Editor, width: int = 100, height: int = 40) -> None:
        self.editor = editor
        self.width, self.height = width, height
        self.names: dict[int, frozenset[str]] = {0: frozenset()}
        self.grid: list[list[int]] = [[0] * width for _ in range(height)]
        self.chars: list[list[str]] = [[" "] * width for _ in range(height)]
        # win_viewport events: [grid, window, topline, botline, curline, curcol,
        # line_count, scroll_delta], the newest last.
        self.viewports: list[list[Any]] = []
        editor.lua(
            "for i, group in ipairs(require('acp.highlights').groups) do"
            " vim.api.nvim_set_hl(0, group[1], {fg = i}) end"
        )
        editor.nvim.ui_attach(width, height, rgb=True, ext_linegrid=True, ext_hlstate=True)

    def _apply(self, name: str, args: list[Any]) -> None:
        if name == "hl_attr_define":
            self.names[args[0]] = frozenset(i["hi_name"] for i in args[3] if "hi_name" in i)
        elif name in ("grid_resize", "grid_clear"):
            if name == "grid_resize":
                self.width, self.height = args[1], args[2]
            self.grid = [[0] * self.width for _ in range(self.height)]
            self.chars = [[" "] * self.width for _ in range(self.height)]
        elif name == "grid_line":
            _, row, col, cells = args[:4]
            attr = 0
            for cell in cells:
                if len(cell) > 1:
                    attr = cell[1]
                for _ in range(cell[2] if len(cell) > 2 else 1):
                    if col < self.width:
                        self.grid[row][col], self.chars[row][col] = attr, cell[0]
                    col += 1
        elif name == "win_viewport":
            self.viewports.append(args)
        elif name == "grid_scroll":
            _, top, bot, left, right, rows = args[:6]
            for grid in (self.grid, self.chars):
                old = [row[:] for row in grid]
                for row in range(top, bot):
                    source = row + rows
                    if top <= source < bot:
                        grid[row][left:right] = old[source][left:right]

    def text(self, row: int, col: int = 1, width: int | None = None) -> str:
        """The characters on screen row ``row`` (1-based) from column ``col``."""
        end = None if width is None else col - 1 + width
        return "".join(self.chars[row - 1][col - 1 : end])

    def draw(self, full: bool = True) -> None:
        """Redraw (everything, else what Neovim's next redraw would draw), and read
        the redraws up to that point."""
        nvim = self.editor.nvim
        nvim.command("redraw!" if full else "redraw")
        nvim.exec_lua("vim.rpcnotify(..., 'acp_screen_drawn')", nvim.channel_id)
        while True:
            message = nvim.next_message()
            if message[0] != "notification":
                continue
            if message[1] == "acp_screen_drawn":
                return
            if message[1] == "redraw":
                for name, *calls in message[2]:
                    for args in calls:
                        self._apply(name, args)

    def window(self, win: int) -> list[str]:
        """The rows ``win`` shows (its winbar first, if any), drawn afresh."""
        self.draw()
        top, left, width, height = self.editor.lua(
            "local i = vim.fn.getwininfo(...)[1] return {i.winrow, i.wincol, i.width, i.height + i.winbar}",
            win,
        )
        return [self.text(top + row, left, width).rstrip() for row in range(height)]

    def _place(self, win: int, lnum: int) -> tuple[int, int, int]:
        """The screen row (1-based, 0 when off screen) of ``lnum``, and ``win``'s first
        column (1-based) and width."""
        row, col, width = self.editor.lua(
            "local win, lnum = ...; local info = vim.fn.getwininfo(win)[1]"
            "; return {vim.fn.screenpos(win, lnum, 1).row, info.wincol, info.width}",
            win,
            lnum,
        )
        return row, col, width

    def groups(self, win: int, lnum: int) -> set[str]:
        """Our groups (Acp*) colouring buffer line ``lnum`` (1-based) of window
        ``win`` on screen (its first screen row); empty when it is not on screen."""
        row, col, width = self._place(win, lnum)
        if row == 0:
            return set()
        names: set[str] = set()
        for attr in self.grid[row - 1][col - 1 : col - 1 + width]:
            names |= {n for n in self.names.get(attr, frozenset()) if n.startswith("Acp")}
        return names

    def edge(self, win: int, lnum: int) -> set[str]:
        """Our groups in the last column of ``win`` on the screen row of ``lnum``."""
        row, col, width = self._place(win, lnum)
        names = self.names.get(self.grid[row - 1][col - 2 + width], frozenset())
        return {n for n in names if n.startswith("Acp")}

    def at(self, win: int, row: int) -> list[str]:
        """Our groups on buffer row ``row`` (0-based) of ``win``, scrolled to for the
        look and back."""
        view = self.editor.lua(
            "local win, row = ...; return vim.api.nvim_win_call(win, function()"
            " local view = vim.fn.winsaveview(); vim.api.nvim_win_set_cursor(win, {row + 1, 0})"
            " return view end)",
            win,
            row,
        )
        try:
            self.draw()
            return sorted(self.groups(win, row + 1))
        finally:
            self.editor.lua(
                "local win, view = ...; vim.api.nvim_win_call(win, function()"
                " vim.fn.winrestview(view) end)",
                win,
                view,
            )

    def rows(self, win: int, first: int, last: int) -> list[list[Any]]:
        """[row, group] for every group of ours on buffer rows [first, last) (0-based)."""
        self.draw()
        return [
            [row, group]
            for row in range(first, last)
            for group in sorted(self.groups(win, row + 1))
        ]
