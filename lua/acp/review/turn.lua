-- :AcpTurnDiff [turn]: every file a turn changed, in one new tab page, one window
-- per file stacked, each showing the turn's hunks inline (the review's marks: the
-- agent's lines highlighted, the lines it removed above them) and decided with the
-- review's hunk keys (|acp-hunks|). One tab, so not Vim's 'diff' mode: that diffs
-- every window of a tab page with every other.
if jit then jit.off(true, true) end -- decision 0068
local hunks = require("acp.review.hunks")
local state = require("acp.review.state")
local util = require("acp.util")

local M = {}
local api = vim.api

--- The lines the turn added and removed: its hunks' own (their rows in the file now
--- also hold a later turn's lines where it changed theirs).
local function counts(file)
  local added, removed = 0, 0
  for _, hunk in ipairs(file.hunks) do
    for _, line in ipairs(hunk.preview) do
      local sign = line:sub(1, 1)
      added, removed = added + (sign == "+" and 1 or 0), removed + (sign == "-" and 1 or 0)
    end
  end
  return ("+%d -%d"):format(added, removed)
end

local function redraw()
  hunks.draw(state.by_chat)
end

-- Its window's turn is the one whose hunks a buffer shows (acp.review.hunks): once no
-- window shows it for that turn, its newest turn's come back; and of two tab pages
-- showing it for different turns, the one entered decides.
local group = api.nvim_create_augroup("acp.review.turn", { clear = true })
api.nvim_create_autocmd("WinClosed", {
  group = group,
  callback = function(args)
    if vim.w[tonumber(args.match)].acp_turn_diff then
      vim.schedule(redraw)
    end
  end,
})
api.nvim_create_autocmd("TabEnter", {
  group = group,
  callback = function()
    if vim.iter(api.nvim_list_wins()):any(function(win) return vim.w[win].acp_turn_diff ~= nil end) then
      redraw()
    end
  end,
})

--- The files `turn` of the current chat changed (default: the latest turn that
--- changed any), and that turn.
---@param turn? integer
---@return acp.ReviewFile[], integer?
function M.files(turn)
  local review = state.by_chat[state.chat_id() or -1]
  local files = {}
  for _, file in ipairs(review and review.files or {}) do
    turn = turn or file.turn -- newest first: the first file's turn is the latest
    if file.turn == turn then
      table.insert(files, file)
    end
  end
  return files, turn
end

--- The winbar of a window :AcpTurnDiff opened: its turn, its file and the
--- lines the turn added and removed there, "decided" once no hunk of it waits, as
--- the review has them now. Once the window shows another buffer, none: the
--- option is taken off the window after this redraw (not while it draws).
function M.label()
  local win = api.nvim_get_current_win() -- %{} draws with its window current
  local shown = vim.w[win].acp_turn_diff
  local buf = api.nvim_win_get_buf(win)
  if not shown or shown.buf ~= buf then
    vim.schedule(function()
      if api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == buf then
        vim.wo[win].winbar, vim.w[win].acp_turn_diff = "", nil
        redraw()
      end
    end)
    return ""
  end
  local review = state.by_chat[shown.chat]
  local name = api.nvim_buf_get_name(buf)
  for _, file in ipairs(review and review.files or {}) do
    if file.turn == shown.turn and (file.source or file.path) == name then
      local open = vim.iter(file.hunks):any(state.is_open)
      local label = ("turn %d · %s · %s%s%s%s"):format(
        shown.turn,
        vim.fn.fnamemodify(file.path, ":~:."),
        counts(file),
        file.created and " · new" or "",
        file.source and " · in the worktree" or "",
        open and "" or " · decided"
      )
      return (label:gsub("%%", "%%%%"))
    end
  end
  return ""
end

---@param turn? integer
function M.open(turn)
  turn = util.turn_number(turn)
  local files, shown = M.files(turn)
  -- The review numbers every turn the chat ran (|:AcpReview|): it bounds [turn], not
  -- the transcript; said as :AcpRestore says it of the transcript's turns.
  local last = (state.by_chat[state.chat_id() or -1] or { turn = 0 }).turn
  if turn and last > 0 and not (1 <= turn and turn <= last) then
    util.user_error(("no turn %d (turns 1 to %d)"):format(turn, last))
  end
  if #files == 0 then
    util.user_error(turn and ("turn %d changed no file"):format(turn) or "the agent changed no file")
  end
  -- Files with no text have no lines to show (decision 0099): named, as deleted ones are.
  local windows, gone, whole = {}, {}, {}
  for _, file in ipairs(files) do
    local name = vim.fn.fnamemodify(file.path, ":~:.")
    if file.binary then
      table.insert(whole, ("%s (%s%s)"):format(name, file.binary.about, file.deleted and ", deleted" or ""))
    elseif file.deleted then
      table.insert(gone, name)
    else
      table.insert(windows, file)
    end
  end
  if #windows > 0 then
    vim.cmd("tabnew")
  end
  for i, file in ipairs(windows) do
    if i > 1 then
      vim.cmd("belowright split")
    end
    -- A worktree chat's file: its hunks wait in the worktree's copy (`source`).
    vim.cmd.edit(vim.fn.fnameescape(file.source or file.path))
    vim.w.acp_turn_diff = { chat = state.chat_id(), turn = shown, buf = api.nvim_get_current_buf() }
    vim.wo.winbar = "%{%v:lua.require'acp.review.turn'.label()%}"
  end
  if #windows > 0 then
    vim.cmd("wincmd =")
    vim.cmd("1wincmd w")
    redraw()
  end
  local told = {}
  if #gone > 0 then
    table.insert(told, ("deleted %s"):format(table.concat(gone, ", ")))
  end
  if #whole > 0 then
    table.insert(told, ("changed files with no text, not shown: %s"):format(table.concat(whole, ", ")))
  end
  if #told > 0 then
    local also = #windows > 0 and "also " or ""
    util.notify(("turn %d %s%s (:AcpReview)"):format(shown, also, table.concat(told, "; ")), "info")
  end
end

return M
