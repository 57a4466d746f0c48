-- Moving around a long transcript: to the next or previous prompt of yours (a turn's
-- start) or tool call, by the blocks' first rows (acp.chat.blocks), with a count and
-- the jumplist like Vim's own section motions.
local blocks_of = require("acp.chat.blocks")

local M = {}
local api = vim.api

--- The first row of the block of `kind` after (`dir` 1) or before (-1) `row`.
local function next_row(chat, kind, dir, row)
  local order, by_id = chat.blocks.order, chat.blocks.by_id
  local from, to = 1, #order
  if dir < 0 then
    from, to = to, from
  end
  for i = from, to, dir do
    local block = by_id[order[i]]
    if block.kind == kind then
      local first = blocks_of.start_row(chat.transcript, block)
      if (dir > 0 and first > row) or (dir < 0 and first < row) then
        return first
      end
    end
  end
end

--- Move the current window's cursor `vim.v.count1` blocks of `kind` in `dir`.
---@param chat acp.Chat
---@param kind "user"|"tool"
---@param dir 1|-1
function M.jump(chat, kind, dir)
  local win = api.nvim_get_current_win()
  local row, target = api.nvim_win_get_cursor(win)[1] - 1, nil
  for _ = 1, vim.v.count1 do
    local found = next_row(chat, kind, dir, row)
    if not found then
      break
    end
    row, target = found, found
  end
  if target then
    vim.cmd("normal! m'")
    api.nvim_win_set_cursor(win, { target + 1, 0 })
  end
end

--- Map the motions in `chat`'s transcript.
---@param chat acp.Chat
function M.map(chat)
  local motions = {
    { "]]", "user", 1, "go to your next prompt" },
    { "[[", "user", -1, "go to your previous prompt" },
    { "]t", "tool", 1, "go to the next tool call" },
    { "[t", "tool", -1, "go to the previous tool call" },
  }
  for _, m in ipairs(motions) do
    vim.keymap.set({ "n", "x", "o" }, m[1], function()
      M.jump(chat, m[2], m[3])
    end, { buffer = chat.transcript, desc = "acp: " .. m[4] })
  end
end

return M
