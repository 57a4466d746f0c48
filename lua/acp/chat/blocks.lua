-- Where the transcript's blocks are: each block (message, tool call, plan, notice)
-- starts at an extmark in our namespace, and blocks are only appended, so their
-- first rows grow with their order. acp.chat.render writes them; the modules that
-- act on a row (folds, prompts, <CR>) ask here which block holds it.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.blocks")

-- Kinds of block that fold under their header line (acp.chat's foldexpr).
M.folds = { thought = true, tool = true, compaction = true }

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
---@field id? string its id, while it is out of view (acp.chat.render cut)
---@field lines? string[] its lines, while it is out of view
---@field end_col? integer its last row's length in bytes, as its last append left it
---@field end_tick? integer the transcript's changedtick after that append

---@class acp.Blocks
---@field order string[]
---@field by_id table<string, acp.Block>
---@field tail_first? integer the last block's first row, while known (see M.block_at)
---@field near? acp.Near the block M.block_at found last, before the last one
---@field hidden? table<string, acp.Block[]> blocks out of view, by the key of their turn

---@class acp.Near
---@field index integer
---@field first integer its first row
---@field next_first integer the next block's first row

---@return acp.Blocks
function M.new()
  return { order = {}, by_id = {} }
end

--- The first row (0-based) of a block. A block whose mark is gone is an error that
--- names it (seen once, from the screen's decoration provider: see acp.chat.screen).
local NO_OPTS = {} -- one table, not one a lookup: foldexpr and every render op ask
local function start_row(buf, block)
  local row = block.first or api.nvim_buf_get_extmark_by_id(buf, M.ns, block.mark, NO_OPTS)[1]
  if not row then
    error(("transcript block #%d (%s, mark %s) has no row"):format(block.index, block.kind, block.mark), 0)
  end
  return row
end
M.start_row = start_row

--- Rows [first, last) of a block (last exclusive, before the next separator).
function M.rows(buf, blocks, block)
  local first = start_row(buf, block)
  local next_id = blocks.order[block.index + 1]
  local last = next_id and (start_row(buf, blocks.by_id[next_id]) - 1) or api.nvim_buf_line_count(buf)
  return first, last
end

--- Rows of the transcript moved, or a block was added or removed: forget the rows
--- M.block_at keeps (acp.chat.render, which writes the transcript, calls this;
--- acp.chat.kept after any change, the user's in a transcript made modifiable).
function M.moved(blocks)
  blocks.tail_first, blocks.near = nil, nil
end

--- The block at `index` (not the last), kept as the one M.block_at found last.
local function keep(blocks, index, first, next_first)
  blocks.near = { index = index, first = first, next_first = next_first }
  local id = blocks.order[index]
  return id, blocks.by_id[id], first
end

--- The block holding a 0-based row.
---
--- foldexpr asks this for each line, top to bottom over the whole transcript when
--- a window opens on it: the block found last is kept with the next one's first
--- row, and a row past it tries the next block before a binary search over the
--- blocks' first rows. (A reverse nvim_buf_get_extmarks walks every mark before
--- the row: quadratic in the transcript.)
---@return string? id, acp.Block? block, integer? first_row
function M.block_at(buf, blocks, row)
  local count = #blocks.order
  if count == 0 then
    return nil
  end
  -- A stream grows the last block, and foldexpr asks for each row it adds: its first
  -- row is kept (the extmark lookup is half of foldexpr's cost) until M.moved.
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
  local near = blocks.near
  if near and near.first <= row then
    if row < near.next_first then
      local id = blocks.order[near.index]
      return id, blocks.by_id[id], near.first
    end
    -- The next block is not the last: rows from the last one's first were answered above.
    local index = near.index + 1
    local next_first = start_row(buf, blocks.by_id[blocks.order[index + 1]])
    if row < next_first then
      return keep(blocks, index, near.next_first, next_first)
    end
  end
  local lo, hi, index, first = 1, count - 1, nil, nil
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local start = start_row(buf, blocks.by_id[blocks.order[mid]])
    if start <= row then
      lo, index, first = mid + 1, mid, start
    else
      hi = mid - 1
    end
  end
  if not index then
    return nil
  end
  return keep(blocks, index, first, start_row(buf, blocks.by_id[blocks.order[index + 1]]))
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
