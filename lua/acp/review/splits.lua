-- The :AcpDiff splits open now, by baseline buffer (acp.review.diff opens and
-- closes them): which file buffers are diffed, and the hunk at a row of a
-- baseline, for the hunk keys (acp.review.hunks).
if jit then jit.off(true, true) end -- decision 0068
local state = require("acp.review.state")

local M = {}
local api = vim.api

---@class acp.DiffView
---@field chat integer
---@field path string
---@field turn integer
---@field file_win integer
---@field file_buf integer
---@field winbar? string the file window's winbar, set while the split is open

---@type table<integer, acp.DiffView> by baseline buffer
M.views = {}

--- Whether an :AcpDiff split shows `buf` against its baseline.
function M.active(buf)
  for _, view in pairs(M.views) do
    if view.file_buf == buf then
      return true
    end
  end
  return false
end

--- In a baseline buffer: the open hunk of its turn whose baseline rows hold `row`
--- (as acp.review.hunks draws them), false for none; nil when `buf` is no baseline buffer.
function M.hunk_at(buf, row)
  local view = M.views[buf]
  if not view then
    return nil
  end
  local review = state.by_chat[view.chat]
  for _, file in ipairs(review and review.files or {}) do
    if file.path == view.path and file.turn == view.turn then
      local count = api.nvim_buf_line_count(buf)
      for _, hunk in ipairs(file.hunks) do
        -- Lines added where none were show as filler beside the row after them.
        local first = math.min(hunk.base_start, count - 1)
        local last = first + math.max(hunk.base_count, 1) - 1
        if hunk.status == "pending" and row >= first and row <= last then
          return { chat = view.chat, turn = view.turn, path = view.path, hunk = hunk }
        end
      end
    end
  end
  return false
end

return M
