"""The transcript's winbar as a user sees it on screen: the state drawn in every
window that shows the chat, fitted to each, and no other window drawn for it
(decision 0096)."""

from __future__ import annotations

from tests.nvim.conftest import Editor
from tests.nvim.screen import Screen

# After `...` (Lua, run first, then what it scheduled), Neovim's own redraw (no
# forced one): the winbar row on screen of each window of the current tab page
# that shows the transcript, with its width. Read in the same request, so no batch
# the Python side sends after can draw it meanwhile.
DRAWN = """
local after = ...
if after ~= vim.NIL then
  assert(loadstring(after))()
  vim.wait(0) -- what it scheduled (a winbar's redraw waits for Neovim's own first)
end
vim.cmd('redraw')
local rows = {}
for _, win in ipairs(vim.fn.win_findbuf(require('acp').status().transcript_buf)) do
  local info = vim.fn.getwininfo(win)[1]
  if info.tabnr == vim.fn.tabpagenr() then
    local cells = {}
    for col = info.wincol, info.wincol + info.width - 1 do
      table.insert(cells, vim.fn.screenstring(info.winrow, col))
    end
    table.insert(rows, {info.width, vim.trim(table.concat(cells))})
  end
end
return rows
"""


def winbar_rows(editor: Editor, after: str | None = None) -> list[tuple[int, str]]:
    """The winbar rows drawn (``DRAWN``), each without its leading space."""
    return [(width, text) for width, text in editor.lua(DRAWN, after)]


def test_a_state_change_shows_in_every_window_of_the_chat_and_tab_page(editor: Editor) -> None:
    """The chat's transcript in its own window, a split 20 columns wide, and a second
    tab page: each winbar shows the state and the name as they change, fitted to its
    window (the narrow one keeps the state and agent), with no redraw forced."""
    editor.setup(agents={"fake": editor.fake_agent("permission")})
    status = editor.open_chat("fake")
    Screen.of(editor)  # a UI attached: Neovim draws its screen
    editor.lua(
        """
        local buf = ...
        vim.api.nvim_set_current_win(vim.fn.win_findbuf(buf)[1])
        vim.cmd('20vsplit')
        vim.cmd('tab sbuffer ' .. buf)
        vim.cmd('tabprevious')
        -- Scrolled up, no window follows the stream: nothing else redraws their winbars.
        for _, win in ipairs(vim.fn.win_findbuf(buf)) do
          vim.api.nvim_win_set_cursor(win, {1, 0})
        end
        """,
        status["transcript_buf"],
    )
    widths = editor.lua(
        "return vim.tbl_map(vim.api.nvim_win_get_width, vim.fn.win_findbuf(...))",
        status["transcript_buf"],
    )
    wide = max(width for width in widths if width != 20 and width != 100)
    assert sorted(width for width, _ in winbar_rows(editor)) == sorted([20, wide])

    editor.lua("require('acp').send('execute')")
    editor.wait("require('acp').status().turn_state == 'requires_action'")
    rows = dict(winbar_rows(editor))
    assert rows[20] == "waiting for you · >"  # its end cut, not its start
    assert rows[wide].startswith("waiting for you · fake · ")

    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", status["transcript_buf"])
    editor.nvim.input("r")
    editor.wait_event("AcpTurnEnd")
    rows = dict(winbar_rows(editor))
    assert rows[20] == "ready · fake"
    assert rows[wide].startswith("ready · fake · ")
    # A name given with :AcpChats changes the winbar and nothing in the transcript.
    rows = dict(winbar_rows(
        editor,
        """
        vim.ui.select = function(items, opts, choice) choice(opts.prompt == 'Chats' and items[1] or 'rename') end
        vim.ui.input = function(opts, done) done('Zoo') end
        vim.cmd('AcpChats')
        """,
    ))
    assert rows[20] == "ready · fake · Zoo"
    assert rows[wide].startswith("ready · fake · ") and rows[wide].endswith(" · Zoo")
    editor.nvim.command("tabnext")
    [(_, other_tab)] = winbar_rows(editor)
    assert other_tab.startswith("ready · fake · ") and other_tab.endswith(" · Zoo")


def test_a_split_of_the_transcript_shows_its_winbar_at_once(editor: Editor) -> None:
    """:split copies the window's 'winbar' to the new window before any event of
    ours: its first draw already shows the chat's state."""
    editor.setup()
    status = editor.open_chat()
    Screen.of(editor)
    editor.lua("vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])", status["transcript_buf"])
    rows = winbar_rows(editor, "vim.cmd('split')")
    assert len(rows) == 2
    assert all(text.startswith("ready · demo · ") for _, text in rows), rows


def test_the_chats_winbar_redraws_no_other_window(editor: Editor) -> None:
    """A turn changes the chat's winbar twice (running, then ready): a file's window
    beside it does not evaluate its status line again for that (setting the
    'winbar' option redrew every window's status line)."""
    editor.setup()
    status = editor.open_chat()
    Screen.of(editor)
    editor.lua(
        """
        _G.acp_test_drawn = 0
        function _G.acp_test_statusline()
          _G.acp_test_drawn = _G.acp_test_drawn + 1
          return 'mine'
        end
        vim.cmd('topleft new')
        vim.wo.statusline = '%!v:lua.acp_test_statusline()'
        vim.api.nvim_set_current_win(vim.fn.win_findbuf(...)[1])
        vim.cmd('redraw')
        _G.acp_test_drawn = 0
        """,
        status["input_buf"],
    )
    editor.lua("require('acp').send('hello')")
    editor.wait_event("AcpTurnEnd")
    editor.nvim.command("redraw")
    assert editor.lua("return require('acp').status().state") == "ready"
    assert editor.lua("return _G.acp_test_drawn") == 0
