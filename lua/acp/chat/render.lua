-- Applies one batch of transcript render ops to a chat buffer.
--
-- Each block (message, tool call, plan, notice) starts at an extmark in our
-- namespace; a blank separator line precedes every block but the first.
-- Streaming appends touch only the block's last line; replacing a block
-- rewrites only its rows. Old text is never rewritten, so the cost of a chunk
-- does not grow with the transcript.
local M = {}

M.ns = vim.api.nvim_create_namespace("acp.blocks")
M.ns_hl = vim.api.nvim_create_namespace("acp.highlights")

local api = vim.api

local header_hl = {
  user = "AcpUserHeader",
  agent = "AcpAgentHeader",
  thought = "AcpThoughtHeader",
  tool = "AcpToolHeader",
  plan = "AcpPlanHeader",
  compaction = "AcpThoughtHeader",
}
local body_hl = { thought = "AcpThought", error = "AcpError", turn = "AcpTurnEnd", info = "AcpInfo", compaction = "AcpThought" }
local status_hl = {
  completed = "AcpToolCompleted",
  failed = "AcpToolFailed",
  cancelled = "AcpToolCancelled",
  in_progress = "AcpToolRunning",
  pending = "AcpToolPending",
}

---@class acp.Block
---@field mark? integer extmark id of the first row
---@field first? integer the first row while the block is being inserted (no mark yet)
---@field kind string
---@field prefix string prepended to streamed lines
---@field index integer position in the transcript
---@field status? string
---@field permission? table a tool call's permission prompt (rows are offsets in the block)
---@field locations? table[] a tool call's locations {row, path, line?}
---@field turn? integer a user's message that begins that turn of the shown branch
---@field id? string its id, while it is out of view (M.cut)
---@field lines? string[] its lines, while it is out of view

---@class acp.Blocks
---@field order string[]
---@field by_id table<string, acp.Block>
---@field tail_first? integer the last block's first row, while known (see M.block_at)
---@field hidden? table<string, acp.Block[]> blocks out of view, by the key of their turn

---@return acp.Blocks
function M.new_blocks()
  return { order = {}, by_id = {} }
end

local function start_row(buf, block)
  return block.first or api.nvim_buf_get_extmark_by_id(buf, M.ns, block.mark, {})[1]
end
M.start_row = start_row

--- Rows [first, last) of a block (last exclusive, before the next separator).
local function rows(buf, blocks, block)
  local first = start_row(buf, block)
  local next_id = blocks.order[block.index + 1]
  local last = next_id and (start_row(buf, blocks.by_id[next_id]) - 1) or api.nvim_buf_line_count(buf)
  return first, last
end

local function highlight(buf, block, first, last)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, first, last)
  if block.kind == "tool" then
    require("acp.chat.tools").highlight(buf, M.ns_hl, block, first, last)
  end
  local group = header_hl[block.kind]
  if group then
    api.nvim_buf_set_extmark(buf, M.ns_hl, first, 0, { line_hl_group = group })
    first = first + 1
  end
  if block.kind == "tool" and block.status and first < last then
    api.nvim_buf_set_extmark(buf, M.ns_hl, first, 0, { line_hl_group = status_hl[block.status] or "AcpToolPending" })
  end
  group = body_hl[block.kind]
  if group then
    for row = first, last - 1 do
      api.nvim_buf_set_extmark(buf, M.ns_hl, row, 0, { line_hl_group = group })
    end
  end
end

--- Rows [op.start, op.end) of a tool block replaced by op.lines (offsets from its
--- first row): an update resends only the parts of the block it changed. Locations
--- are kept unless the op carries them; only the block's changed rows are rewritten,
--- and when they are just its header and status line, only those are highlighted.
local function put_rows(buf, blocks, block, op)
  local first = start_row(buf, block)
  blocks.tail_first = nil
  block.status, block.permission = op.status, op.permission
  if op.locations then
    block.locations = op.locations
  end
  -- Cleared first: marks of replaced rows would otherwise move onto the rows after them.
  api.nvim_buf_clear_namespace(buf, M.ns_hl, first + op.start, first + op["end"])
  api.nvim_buf_set_lines(buf, first + op.start, first + op["end"], false, op.lines)
  if op.start == 0 and op["end"] == 2 and #op.lines == 2 and block.kind == "tool" then
    api.nvim_buf_set_extmark(buf, M.ns_hl, first, 0, { line_hl_group = header_hl.tool })
    local group = status_hl[block.status] or "AcpToolPending"
    api.nvim_buf_set_extmark(buf, M.ns_hl, first + 1, 0, { line_hl_group = group })
    return
  end
  local _, last = rows(buf, blocks, block)
  highlight(buf, block, first, last)
end

--- Draw a block, new or again; true when it is new.
local function put_block(buf, blocks, op)
  local block = blocks.by_id[op.id]
  if op.start then
    if block then
      put_rows(buf, blocks, block, op)
    end
    return
  end
  if block then
    local first, last = rows(buf, blocks, block)
    blocks.tail_first = nil
    block.status, block.permission, block.locations = op.status, op.permission, op.locations
    api.nvim_buf_set_lines(buf, first, last, false, op.lines)
    highlight(buf, block, first, first + #op.lines)
    return false
  end
  local count = api.nvim_buf_line_count(buf)
  local empty = count == 1 and api.nvim_buf_get_lines(buf, 0, 1, false)[1] == "" and #blocks.order == 0
  local first = empty and 0 or count + 1
  -- Known before its lines exist: foldexpr runs while they are inserted, and a row
  -- it places in the previous block keeps that fold level.
  block = { first = first, kind = op.kind, prefix = op.prefix or "", index = #blocks.order + 1, status = op.status }
  block.permission, block.locations, block.turn = op.permission, op.locations, op.turn
  table.insert(blocks.order, op.id)
  blocks.by_id[op.id] = block
  blocks.tail_first = first
  if empty then
    api.nvim_buf_set_lines(buf, 0, 1, false, op.lines)
  else
    local lines = { "" }
    vim.list_extend(lines, op.lines)
    api.nvim_buf_set_lines(buf, count, count, false, lines)
  end
  block.mark = api.nvim_buf_set_extmark(buf, M.ns, first, 0, { right_gravity = false })
  block.first = nil
  highlight(buf, block, first, first + #op.lines)
  return true
end

local function append(buf, blocks, op)
  local block = blocks.by_id[op.id]
  if not block then
    return
  end
  local _, last = rows(buf, blocks, block)
  if block.index < #blocks.order then
    blocks.tail_first = nil
  end
  local row = last - 1
  local col = #api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  local parts = vim.split(op.text, "\n", { plain = true })
  for i = 2, #parts do
    parts[i] = block.prefix .. parts[i]
  end
  api.nvim_buf_set_text(buf, row, col, row, col, parts)
  local group = body_hl[block.kind]
  if group and #parts > 1 then
    for r = row + 1, row + #parts - 1 do
      api.nvim_buf_set_extmark(buf, M.ns_hl, r, 0, { line_hl_group = group })
    end
  end
end

--- Copy every block of transcript `from` to the end of transcript `buf`, ids
--- prefixed with `prefix`: the same lines, kinds, statuses and locations. Permission
--- prompts stay behind (they are answered where they were asked).
---@return table status, acp.Block[] created (as M.apply)
function M.copy(from, from_blocks, buf, blocks, prefix)
  local ops = {}
  for _, id in ipairs(from_blocks.order) do
    local block = from_blocks.by_id[id]
    local first, last = rows(from, from_blocks, block)
    table.insert(ops, {
      op = "block",
      id = prefix .. id,
      kind = block.kind,
      prefix = block.prefix,
      status = block.status,
      locations = block.locations,
      lines = api.nvim_buf_get_lines(from, first, last, false),
    })
  end
  return M.apply(buf, blocks, ops)
end

--- Take the blocks from the first of `turns` to the end out of view, kept in
--- `blocks.hidden` by turn: each `{key, block}` names the block a turn begins with.
local function cut(buf, blocks, turns)
  local first = turns[1] and blocks.by_id[turns[1].block]
  if not first then
    return
  end
  local begins = {}
  for _, turn in ipairs(turns) do
    begins[turn.block] = turn.key
  end
  -- From the separator before the first block (or the top) to the end.
  local at = first.index > 1 and start_row(buf, first) - 1 or 0
  blocks.hidden = blocks.hidden or {}
  local group = {}
  for index = first.index, #blocks.order do
    local id = blocks.order[index]
    if begins[id] then
      group = {}
      blocks.hidden[begins[id]] = group
    end
    local block = blocks.by_id[id]
    local from, to = rows(buf, blocks, block)
    block.id, block.lines = id, api.nvim_buf_get_lines(buf, from, to, false)
    table.insert(group, block)
  end
  for index = #blocks.order, first.index, -1 do
    local block = blocks.by_id[blocks.order[index]]
    block.mark = nil
    blocks.by_id[blocks.order[index]], blocks.order[index] = nil, nil
  end
  blocks.tail_first = nil
  api.nvim_buf_clear_namespace(buf, M.ns, at, -1)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, at, -1)
  api.nvim_buf_set_lines(buf, at, -1, false, {})
end

--- Put the blocks kept for `keys` (turn keys, as M.cut stored them) back at the end.
---@return acp.Block[] created
local function uncut(buf, blocks, keys)
  local created = {}
  for _, key in ipairs(keys) do
    for _, kept in ipairs((blocks.hidden or {})[key] or {}) do
      local op = { op = "block", id = kept.id, kind = kept.kind, prefix = kept.prefix, status = kept.status }
      op.permission, op.locations, op.turn, op.lines = kept.permission, kept.locations, kept.turn, kept.lines
      if put_block(buf, blocks, op) then
        table.insert(created, blocks.by_id[kept.id])
      end
    end
    blocks.hidden[key] = nil
  end
  return created
end

--- Empty a transcript; returns its new (empty) blocks.
---@param buf integer
---@return acp.Blocks
function M.reset(buf)
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, {})
  vim.bo[buf].modifiable = false
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, 0, -1)
  return M.new_blocks()
end

--- Apply ops to the transcript buffer; windows at the end keep following it.
---@param buf integer
---@param blocks acp.Blocks
---@param ops table[]
---@return table status fields seen in this batch
---@return acp.Block[] created the blocks this batch created
function M.apply(buf, blocks, ops)
  local following = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_cursor(win)[1] >= api.nvim_buf_line_count(buf) then
      table.insert(following, win)
    end
  end
  local status, created = {}, {}
  vim.bo[buf].modifiable = true
  for _, op in ipairs(ops) do
    if op.op == "append" then
      append(buf, blocks, op)
    elseif op.op == "block" then
      if put_block(buf, blocks, op) then
        table.insert(created, blocks.by_id[op.id])
      end
    elseif op.op == "cut" then
      cut(buf, blocks, op.turns)
    elseif op.op == "uncut" then
      vim.list_extend(created, uncut(buf, blocks, op.turns))
    elseif op.op == "status" then
      for key, value in pairs(op) do
        if key ~= "op" then
          status[key] = value
        end
      end
    end
  end
  vim.bo[buf].modifiable = false
  local last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(following) do
    api.nvim_win_set_cursor(win, { last, 0 })
  end
  return status, created
end

--- The block holding a 0-based row.
---
--- Blocks are only appended, so their start rows grow with their order: a binary
--- search over them. (A reverse nvim_buf_get_extmarks walks every mark before the
--- row, and foldexpr asks this for each line: quadratic in the transcript.)
---@return string? id, acp.Block? block, integer? first_row
function M.block_at(buf, blocks, row)
  local count = #blocks.order
  if count == 0 then
    return nil
  end
  -- A stream grows the last block, and foldexpr asks for each row it adds: its first
  -- row is kept (the extmark lookup is half of foldexpr's cost) until rows before it
  -- change (only this module writes the transcript).
  local last_id = blocks.order[count]
  local last = blocks.by_id[last_id]
  local last_first = blocks.tail_first
  if not last_first then
    last_first = start_row(buf, last)
    blocks.tail_first = last_first
  end
  if last_first <= row then
    return last_id, last, last_first
  end
  local lo, hi, id, first = 1, count - 1, nil, nil
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local start = start_row(buf, blocks.by_id[blocks.order[mid]])
    if start <= row then
      lo, id, first = mid + 1, blocks.order[mid], start
    else
      hi = mid - 1
    end
  end
  return id, id and blocks.by_id[id], first
end

--- The block kind at a 1-based line, for folding.
---@return string? kind, boolean? is_first_row
function M.kind_at(buf, blocks, lnum)
  local _, block, first = M.block_at(buf, blocks, lnum - 1)
  if not block then
    return nil
  end
  return block.kind, first == lnum - 1
end

return M
