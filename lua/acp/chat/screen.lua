-- The transcript's rows coloured by their block, drawn for the rows on screen only
-- (a decoration provider's ephemeral marks, decision 0050): a tool call's status
-- line, its locations and the +/-/@@ rows of its diffs, and every row of a thought,
-- notice, error or turn end follow from the block (its kind, status, locations,
-- hunks) and the row's text, so none of them is stored. A stored mark costs Neovim
-- ~200 bytes, and a 100k-line transcript had 20k of them. Headers keep a stored
-- line_hl_group mark (acp.chat.render): a closed fold shows its header row with that
-- colour to the window's edge, which no ephemeral mark gives (Neovim draws no
-- line_hl_group from ephemeral marks, neovim#32936; an hl_group reaching the end of
-- the line looks the same on an open row).
if jit then jit.off(true, true) end -- decision 0068
local blocks_of = require("acp.chat.blocks")
local tools = require("acp.chat.tools")
local util = require("acp.util")

local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.screen")

M.header_hl = {
  user = "AcpUserHeader",
  agent = "AcpAgentHeader",
  thought = "AcpThoughtHeader",
  tool = "AcpToolHeader",
  plan = "AcpPlanHeader",
  compaction = "AcpThoughtHeader",
}
local body_hl = {
  thought = "AcpThought",
  error = "AcpError",
  turn = "AcpTurnEnd",
  info = "AcpInfo",
  changes = "AcpInfo",
  compaction = "AcpThought",
}
local status_hl = {
  completed = "AcpToolCompleted",
  failed = "AcpToolFailed",
  cancelled = "AcpToolCancelled",
  in_progress = "AcpToolRunning",
  pending = "AcpToolPending",
}

-- Each transcript's blocks, by buffer (weak: a closed chat's go with it).
local shown = setmetatable({}, { __mode = "v" })
-- Tool blocks' hunks (tools.hunks), found when a block is first drawn and forgotten
-- when its rows change; at most HUNKS_KEPT blocks' at a time.
local HUNKS_KEPT = 64
local hunks, kept = {}, 0

--- `blocks` are what transcript `buf` shows (acp.chat.render, on every block drawn).
function M.attach(buf, blocks)
  shown[buf] = blocks
end

--- The rows of `block` changed: its hunks are found again when next drawn.
function M.changed(block)
  if hunks[block] then
    hunks[block], kept = nil, kept - 1
  end
end

local function hunks_of(buf, block, first, last)
  local found = hunks[block]
  if not found then
    if kept >= HUNKS_KEPT then
      hunks, kept = {}, 0
    end
    found = tools.hunks(api.nvim_buf_get_lines(buf, first, last, false))
    hunks[block], kept = found, kept + 1
  end
  return found
end

local function in_hunk(spans, offset)
  for i = 1, #spans, 2 do
    if offset >= spans[i] and offset < spans[i + 1] then
      return true
    end
  end
  return false
end

--- The group that colours row `row` (0-based, text `line`) of `block` (rows
--- [first, last)), and whether it is a location (coloured to the line's end only).
local function group_at(buf, block, first, last, row, line)
  local offset = row - first
  if offset == 0 and M.header_hl[block.kind] then
    return nil -- a stored mark (acp.chat.render)
  end
  if block.kind ~= "tool" then
    return body_hl[block.kind]
  end
  if offset == 1 and block.status then
    return status_hl[block.status] or "AcpToolPending"
  end
  for _, location in ipairs(block.locations or {}) do
    if location.row == offset then
      return "AcpLocation", true
    end
  end
  if line:find("^[-+@]") and in_hunk(hunks_of(buf, block, first, last), offset) then
    return tools.diff_group(line)
  end
end

-- The window being drawn: its buffer's blocks, and the block of the row drawn last
-- with its rows [first, last) (rows are drawn top down). Emptied when a redraw ends.
local current = {}

local function on_win(_, _, buf)
  local blocks = shown[buf]
  if not blocks or #blocks.order == 0 then
    return false
  end
  current.buf, current.blocks, current.block = buf, blocks, nil
end

local function on_end()
  current.buf, current.blocks, current.block = nil, nil, nil
end

-- Whether a transcript that could not tell a row's block was reported (once).
local reported = false

--- The block of 0-based `row` with its rows [first, last), or nil.
local function find(buf, blocks, row)
  local _, block, first = blocks_of.block_at(buf, blocks, row)
  if block then
    return block, first, select(2, blocks_of.rows(buf, blocks, block))
  end
end

--- `find`, where the blocks cannot tell (a block lost its row) nil: that row is
--- drawn plain, and it is reported once. An error in a decoration provider would
--- stop Neovim at a hit-enter prompt on this redraw, and on the next.
local function locate(buf, blocks, row)
  local ok, block, first, last = pcall(find, buf, blocks, row)
  if ok then
    return block, first, last
  end
  if not reported then
    reported = true
    vim.schedule(function()
      util.notify("the transcript is drawn plain where its blocks are lost: " .. tostring(block), "warn")
    end)
  end
end

local function on_line(_, _, buf, row)
  local c = current
  if c.buf ~= buf then
    return
  end
  if not (c.block and row >= c.first and row < c.last) then
    local block, first, last = locate(buf, c.blocks, row)
    if not block then
      return
    end
    c.block, c.first, c.last = block, first, last
  end
  if row >= c.last then -- the separator row before the next block
    return
  end
  local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  local group, to_text_end = group_at(buf, c.block, c.first, c.last, row, line)
  if to_text_end then
    api.nvim_buf_set_extmark(buf, M.ns, row, 0, { end_col = #line, hl_group = group, ephemeral = true })
  elseif group then
    api.nvim_buf_set_extmark(buf, M.ns, row, 0, { end_row = row + 1, hl_group = group, hl_eol = true, ephemeral = true })
  end
end

api.nvim_set_decoration_provider(M.ns, { on_win = on_win, on_line = on_line, on_end = on_end })

return M
