-- The window beside the chat: where a file the agent works on, a location or a
-- preview is shown (Editor.show_file of the Python side too), without taking a
-- chat's window.
if jit then jit.off(true, true) end -- decision 0068
local buffers = require("acp.editor.buffers")
local util = require("acp.util")
local M = {}
local api = vim.api

--- A window of the current tab showing no chat (b:acp_chat marks its buffers): the
--- previous one, else any.
---@return integer?
function M.target_window()
  local function usable(win)
    return win ~= 0
      and api.nvim_win_is_valid(win)
      and api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage()
      and api.nvim_win_get_config(win).relative == ""
      and not vim.wo[win].winfixbuf
      and not vim.b[api.nvim_win_get_buf(win)].acp_chat
  end
  local previous = vim.fn.win_getid(vim.fn.winnr("#"))
  if usable(previous) then
    return previous
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if usable(win) then
      return win
    end
  end
end

--- Show `path` at `line` (1-based, clamped) in the non-chat window, splitting one
--- off when there is none; `focus` (the user's own jump) moves the cursor there.
--- Not loaded yet, the file is loaded as the window takes it, Neovim asking about
--- a swap file of it as for :edit; where the agent asks (not `focus`), a file that
--- has one is not shown (see buffers.load): an error says so.
---@param path string
---@param line? integer
---@param focus boolean
---@return integer line the line shown
function M.show(path, line, focus)
  path = vim.fn.fnamemodify(path, ":p")
  local buf, why = buffers.find(path), nil
  if not buf and focus then
    buf = vim.fn.bufadd(path)
  elseif not buf then
    buf, why = buffers.load(path)
  end
  if not buf then
    error(("cannot show %s: %s"):format(path, why), 0)
  end
  vim.bo[buf].buflisted = true
  local win = M.target_window()
  if win then
    api.nvim_win_set_buf(win, buf)
  else
    win = api.nvim_open_win(buf, false, { split = "left", win = -1 })
  end
  local count = api.nvim_buf_line_count(buf)
  local shown = math.max(1, math.min(line or 1, count))
  api.nvim_win_set_cursor(win, { shown, 0 })
  if focus then
    api.nvim_set_current_win(win)
  end
  return shown
end

--- Show `path` at `line` where the agent asks (Editor.show_file), the cursor
--- staying put; returns the line shown, or why it cannot be. In the command-line
--- window, where no window may change (E11), once it closes (returning neither):
--- the agent is not made to wait for the user.
---@param path string
---@param line? integer
---@return {line?: integer, failed?: string}
function M.follow(path, line)
  local result = vim.empty_dict()
  util.outside_cmdwin(function()
    local ok, shown = pcall(M.show, path, line, false)
    result = ok and { line = shown } or { failed = tostring(shown) }
  end)
  return result
end

return M
