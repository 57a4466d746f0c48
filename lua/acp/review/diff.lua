-- :AcpDiff: a file against its baseline for a turn (the text rejecting that
-- turn's open hunks would leave), side by side with 'diff' on: the baseline in a
-- read-only scratch buffer beside the file's window. Python sends the baseline
-- (and again after each review change, so the split stays true); decisions from
-- either side go through the review like any other (acp.review.hunks).
if jit then jit.off(true, true) end -- decision 0068
local buffers = require("acp.editor.buffers")
local host = require("acp.host")
local hunks = require("acp.review.hunks")
local keys = require("acp.keys")
local side = require("acp.review.side")
local splits = require("acp.review.splits")
local state = require("acp.review.state")
local util = require("acp.util")
local windows = require("acp.editor.windows")

local M = {}
local api = vim.api

local views = splits.views

local function relative(path)
  return vim.fn.fnamemodify(path, ":~:.")
end

--- The review's entries for `path` (a chat's own file, or a worktree chat's
--- source), each with its chat: the current chat's first.
---@param path string
---@return {chat: integer, changed: table}[]
local function changes_to(path)
  local order = { state.chat_id() }
  for id in pairs(state.by_chat) do
    table.insert(order, id)
  end
  local found = {}
  for _, chat in ipairs(order) do
    for _, changed in ipairs(state.by_chat[chat] and state.by_chat[chat].files or {}) do
      if changed.path == path or changed.source == path then
        table.insert(found, { chat = chat, changed = changed })
      end
    end
  end
  return found
end

--- Ask for `file` (default: the current buffer's) against its baseline for `turn`
--- (default: the latest turn whose changes to it still wait); the split opens when
--- it arrives.
---@param file? string
---@param turn? integer what is not a whole number is a user error
function M.open(file, turn)
  turn = util.turn_number(turn)
  local path = file and file ~= "" and vim.fn.fnamemodify(file, ":p") or api.nvim_buf_get_name(0)
  if path == "" then
    util.user_error(":AcpDiff compares a file: name one, or run it in a file's buffer")
  end
  local decided
  for _, change in ipairs(changes_to(path)) do
    local changed = change.changed
    if not turn or changed.turn == turn then
      -- All decided, the baseline is the text as it is: two equal sides.
      if changed.open then
        -- A worktree chat's file is compared where its hunks are (its source).
        -- Its own turn: with none asked for, the newest with open hunks.
        host.notify("baseline", { chat = change.chat, path = changed.source or path, turn = changed.turn })
        return
      end
      decided = decided or changed.turn
    end
  end
  if decided then
    util.notify(("the agent's changes to %s in turn %d are all decided: nothing to compare"):format(relative(path), decided), "info")
    return
  end
  util.user_error(("no agent changes to %s%s"):format(relative(path), turn and (" in turn " .. turn) or ""))
end

--- Completion of :AcpDiff after `args`: the paths with agent changes (escaped as
--- Neovim escapes the file names it completes), then the turns that changed the
--- path named, newest first.
---@param args string[]
---@return string[]
function M.complete(args)
  if #args == 0 then
    local found = {}
    for _, review in pairs(state.by_chat) do
      for _, file in ipairs(review.files) do
        local name = vim.fn.fnameescape(relative(file.path)) -- inserted as it is
        if not vim.tbl_contains(found, name) then
          table.insert(found, name)
        end
      end
    end
    return found
  end
  local turns = {}
  if #args == 1 and not tonumber(args[1]) then
    for _, change in ipairs(changes_to(vim.fn.fnamemodify(args[1], ":p"))) do
      if not vim.tbl_contains(turns, change.changed.turn) then
        table.insert(turns, change.changed.turn)
      end
    end
  end
  table.sort(turns, function(a, b)
    return a > b
  end)
  return vim.tbl_map(tostring, turns)
end

local function redraw_marks()
  hunks.draw(state.by_chat)
end

local function close(base)
  local view = views[base]
  views[base] = nil
  if api.nvim_win_is_valid(view.file_win) then
    if api.nvim_win_get_buf(view.file_win) == view.file_buf then
      api.nvim_win_call(view.file_win, function()
        vim.cmd("diffoff")
      end)
    end
    if view.winbar and vim.wo[view.file_win].winbar == view.winbar then
      vim.wo[view.file_win].winbar = ""
    end
  end
  redraw_marks()
end

--- The window to diff `path` in: the current one when it shows the file, else one
--- of this tab, else the file opened in the non-chat window.
local function file_window(path)
  local buf = buffers.find(path)
  if buf and api.nvim_get_current_buf() == buf then
    return api.nvim_get_current_win()
  end
  local tab = api.nvim_get_current_tabpage()
  for _, win in ipairs(buf and vim.fn.win_findbuf(buf) or {}) do
    if api.nvim_win_get_tabpage(win) == tab then
      api.nvim_set_current_win(win)
      return win
    end
  end
  windows.show(path, nil, true)
  return api.nvim_get_current_win()
end

--- A baseline from Python (`data`: {path, turn, lines}): open the split, or bring
--- an open one up to date.
---@param chat integer
---@param data {path: string, turn: integer, lines: string[]}
function M.show(chat, data)
  for base, view in pairs(views) do
    if view.chat == chat and view.path == data.path and view.turn == data.turn then
      if api.nvim_buf_is_valid(base) then
        side.set(base, data.lines)
        for _, win in ipairs(vim.fn.win_findbuf(base)) do
          api.nvim_win_call(win, function()
            vim.cmd("diffupdate")
          end)
        end
      end
      return
    end
  end
  local file_win = file_window(data.path)
  local file_buf = api.nvim_win_get_buf(file_win)
  local base =
    side.create(("acp://baseline/%d/%s"):format(data.turn, data.path), vim.bo[file_buf].filetype, data.lines)
  local view = { chat = chat, path = data.path, turn = data.turn, file_win = file_win, file_buf = file_buf }
  views[base] = view
  local name = relative(data.path):gsub("%%", "%%%%")
  local base_win = api.nvim_open_win(base, false, { split = "left", win = file_win })
  vim.wo[base_win].winbar = ("baseline of %s before turn %d"):format(name, data.turn)
  -- A winbar takes a row: the file's side needs one too, or each line sits one
  -- row below its pair. The user's own stays; ours goes with the baseline.
  if vim.wo[file_win].winbar == "" then
    view.winbar = name .. " now"
    vim.wo[file_win].winbar = view.winbar
  end
  for _, win in ipairs({ base_win, file_win }) do
    api.nvim_win_call(win, function()
      vim.cmd("diffthis")
    end)
  end
  local map = hunks.keymap(true)
  local close_key = keys.lhs("review", "close")
  if close_key then
    map[close_key] = {
      function()
        api.nvim_buf_delete(base, { force = true })
      end,
      "acp: close the baseline",
    }
  end
  keys.set(base, "hunks", map)
  api.nvim_create_autocmd("BufWipeout", {
    buffer = base,
    once = true,
    callback = function()
      close(base)
    end,
  })
  redraw_marks() -- without the removed lines: the baseline shows them
end

--- The review of `chat` changed: ask for the baselines its splits show again.
function M.refresh(chat)
  for _, view in pairs(views) do
    if view.chat == chat then
      host.notify("baseline", { chat = chat, path = view.path, turn = view.turn })
    end
  end
end

host.handle("baseline", function(item)
  M.show(item.chat, item.baseline)
end)

return M
