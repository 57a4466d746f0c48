-- Writes the transcript: blocks (acp.chat.blocks knows where they are) drawn new or
-- again, and text streamed onto them. A blank separator line precedes every block
-- but the first. Streaming appends touch only the block's last line; replacing a
-- block rewrites only its rows. Old text is never rewritten, so the cost of a chunk
-- does not grow with the transcript. acp.chat dispatches the render ops here.
if jit then jit.off(true, true) end -- decision 0068
local blocks_of = require("acp.chat.blocks")
local permission = require("acp.chat.permission")
local screen = require("acp.chat.screen")

local M = {}

-- Stored highlights: headers and permission prompts. Every other row's colour
-- follows from its block and is drawn on screen only (acp.chat.screen).
M.ns_hl = vim.api.nvim_create_namespace("acp.highlights")

local api = vim.api
local start_row, rows = blocks_of.start_row, blocks_of.rows

--- A window's option. Not vim.wo[win]: each index builds an accessor table and its
--- closures (~0.5 KB of Lua heap), and these run at every render batch. Buffer
--- options are set with nvim_set_option_value for the same reason.
local function win_option(win, name)
  return api.nvim_get_option_value(name, { win = win })
end

-- Transcripts written in insert mode, by buffer: the first row written since, and
-- the blocks created. In insert mode Neovim leaves expr folds as they were (its
-- foldUpdate returns at once, and so does vim._foldupdate), and on leaving it
-- updates the current window's only, the input's: a turn drawn while the user
-- typed got no folds. `settle` makes them once, when the mode leaves insert.
---@type table<integer, {from: integer, created: acp.Block[]}>
local unsettled = {}

--- Row `row` of transcript `buf` is written to (and those below it may move).
local function wrote(buf, row)
  local pending = unsettled[buf]
  if pending and row < pending.from then
    pending.from = row
  end
end

local function mark_header(buf, block, first)
  local group = screen.header_hl[block.kind]
  if group then
    api.nvim_buf_set_extmark(buf, M.ns_hl, first, 0, { line_hl_group = group })
  end
end

local function highlight(buf, block, first, last)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, first, last)
  screen.changed(block)
  mark_header(buf, block, first)
  if block.permission then
    permission.highlight(buf, M.ns_hl, block, first, api.nvim_buf_get_lines(buf, first, last, false))
  end
end

--- Rows [first, last) of a folding block whose first row was just written over,
--- the rows below the write left as they were: Neovim then shortens the block's
--- fold, its last rows (one more than the write added) left out of every fold
--- (`zx` would find them; a whole-buffer `zx` costs what doc/decisions/0074
--- measured). In each window, the rows at the block's end that no fold holds have
--- their levels asked again, and the fold takes them back: a few rows, not the
--- block.
local function refold_end(buf, blocks, block, first, last)
  if not blocks_of.folds[block.kind] then
    return
  end
  -- The fold's last row: the separator before the next block, else the transcript's last.
  local fold_end = block.index < #blocks.order and last or last - 1
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win_option(win, "foldenable") and win_option(win, "foldmethod") == "expr" then
      local top = api.nvim_win_call(win, function()
        local row = fold_end
        while row > first and vim.fn.foldlevel(row + 1) == 0 do
          row = row - 1
        end
        return row + 1
      end)
      if top <= fold_end then
        vim._foldupdate(win, top, fold_end + 1)
      end
    end
  end
end

--- Rows [op.start, op.end) of a tool block replaced by op.lines (offsets from its
--- first row): an update resends only the parts of the block it changed. Locations
--- are kept unless the op carries them; only the block's changed rows are rewritten,
--- and when they are just its header and status line, only those are highlighted.
local function put_rows(buf, blocks, block, op)
  local first = start_row(buf, block)
  blocks_of.moved(blocks)
  block.status, block.permission = op.status, op.permission
  if op.locations then
    block.locations = op.locations
  end
  -- Cleared first: marks of replaced rows would otherwise move onto the rows after them.
  api.nvim_buf_clear_namespace(buf, M.ns_hl, first + op.start, first + op["end"])
  wrote(buf, first + op.start)
  api.nvim_buf_set_lines(buf, first + op.start, first + op["end"], false, op.lines)
  local _, last = rows(buf, blocks, block)
  if op.start == 0 and not unsettled[buf] then -- in insert mode `settle` refolds it
    refold_end(buf, blocks, block, first, last)
  end
  if op.start == 0 and op["end"] == 2 and #op.lines == 2 and block.kind == "tool" then
    mark_header(buf, block, first) -- its status line is coloured on screen, by block.status
    return
  end
  highlight(buf, block, first, last)
end

--- Draw a block op (acp_nvim/client/editor.py BlockOp), new or again; true when
--- it is new. Inside M.writing.
function M.block(buf, blocks, op)
  screen.attach(buf, blocks)
  local block = blocks.by_id[op.id]
  if op.start then
    if block then
      put_rows(buf, blocks, block, op)
    end
    return
  end
  if block then
    local first, last = rows(buf, blocks, block)
    blocks_of.moved(blocks)
    block.status, block.permission, block.locations = op.status, op.permission, op.locations
    block.turn = op.turn or block.turn -- a replayed prompt is numbered once replayed
    wrote(buf, first)
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
  blocks_of.moved(blocks)
  blocks.tail_first = first
  wrote(buf, count - 1) -- the row above the separator, whose fold takes it
  if empty then
    api.nvim_buf_set_lines(buf, 0, 1, false, op.lines)
  else
    local lines = { "" }
    vim.list_extend(lines, op.lines)
    api.nvim_buf_set_lines(buf, count, count, false, lines)
  end
  block.mark = api.nvim_buf_set_extmark(buf, blocks_of.ns, first, 0, { right_gravity = false })
  block.first = nil
  highlight(buf, block, first, first + #op.lines)
  return true
end

--- After op `op` raised: a block it was making, known before its lines were written
--- (M.block), has no rows and is forgotten, so that the ops after it (and the op
--- sent again) draw as if it never came.
function M.unmade(blocks, op)
  local block = op.op == "block" and blocks.by_id[op.id]
  if block and not block.mark then
    blocks.by_id[op.id] = nil
    table.remove(blocks.order, block.index)
    blocks_of.moved(blocks)
  end
end

--- The lines of `text`, each after the first with `prefix` before it. Not
--- vim.split: its options table and iterator closures cost ~0.9 KB of Lua heap
--- an append, garbage that brings the collector sooner.
---@param text string
---@param prefix string
---@return string[]
local function lines_of(text, prefix)
  local lines, from = {}, 1
  while true do
    local newline = text:find("\n", from, true)
    local line = text:sub(from, (newline or 0) - 1)
    lines[#lines + 1] = from == 1 and line or prefix .. line
    if not newline then
      return lines
    end
    from = newline + 1
  end
end

--- Stream an append op's text onto its block. Inside M.writing.
function M.append(buf, blocks, op)
  local block = blocks.by_id[op.id]
  if not block then
    return
  end
  local _, last = rows(buf, blocks, block)
  if block.index < #blocks.order then
    blocks_of.moved(blocks)
  end
  local row = last - 1
  -- The row's length as this block's last append left it, while nothing else wrote
  -- the transcript since: reading the row copies all of it, and a paragraph that
  -- streams as one line grows with every chunk (its appends grew quadratic).
  local col = block.end_tick == api.nvim_buf_get_changedtick(buf) and block.end_col
    or #api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  local lines = lines_of(op.text, block.prefix)
  wrote(buf, row)
  api.nvim_buf_set_text(buf, row, col, row, col, lines)
  block.end_col = (#lines == 1 and col or 0) + #lines[#lines]
  block.end_tick = api.nvim_buf_get_changedtick(buf)
end

--- Take the blocks from `first` to the end out of the transcript.
local function take_from(buf, blocks, first)
  -- From the separator before the first block (or the top) to the end.
  local at = first.index > 1 and start_row(buf, first) - 1 or 0
  for index = #blocks.order, first.index, -1 do
    local id = blocks.order[index]
    blocks.by_id[id].mark = nil
    blocks.by_id[id], blocks.order[index] = nil, nil
  end
  blocks_of.moved(blocks)
  api.nvim_buf_clear_namespace(buf, blocks_of.ns, at, -1)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, at, -1)
  wrote(buf, at)
  api.nvim_buf_set_lines(buf, at, -1, false, {})
end

--- Take the blocks from the first of `turns` to the end out of view (a cut op,
--- acp_nvim/client/editor.py CutOp), kept in `blocks.hidden` by turn: each `{key,
--- block}` names the block a turn begins with. Inside M.writing.
function M.cut(buf, blocks, turns)
  local first = turns[1] and blocks.by_id[turns[1].block]
  if not first then
    return
  end
  local begins = {}
  for _, turn in ipairs(turns) do
    begins[turn.block] = turn.key
  end
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
  take_from(buf, blocks, first)
end

--- Take blocks `ids` out of the transcript for good, wherever they are (a drop op:
--- the notes of a view left before a turn was sent in it, the mark of a place no
--- branch leaves any more). Inside M.writing.
function M.drop(buf, blocks, ids)
  local indexes = {}
  for _, id in ipairs(ids) do
    local block = blocks.by_id[id]
    if block then
      table.insert(indexes, block.index)
    end
  end
  if #indexes == 0 then
    return
  end
  -- The last first: the rows of the blocks before it stay where they are.
  table.sort(indexes, function(a, b)
    return a > b
  end)
  for _, index in ipairs(indexes) do
    local id = blocks.order[index]
    local block = blocks.by_id[id]
    local from, to = rows(buf, blocks, block)
    -- With the separator before it; the first block takes the next one's instead.
    if index > 1 then
      from = from - 1
    elseif index < #blocks.order then
      to = to + 1
    end
    api.nvim_buf_del_extmark(buf, blocks_of.ns, block.mark)
    api.nvim_buf_clear_namespace(buf, M.ns_hl, from, to)
    wrote(buf, from)
    api.nvim_buf_set_lines(buf, from, to, false, {})
    block.mark = nil
    table.remove(blocks.order, index)
    blocks.by_id[id] = nil
  end
  for index = indexes[#indexes], #blocks.order do
    blocks.by_id[blocks.order[index]].index = index
  end
  blocks_of.moved(blocks)
end

--- Put the blocks kept for `keys` (turn keys, as M.cut stored them) back at the end
--- (an uncut op); returns the blocks it created. Inside M.writing.
---@return acp.Block[] created
function M.uncut(buf, blocks, keys)
  local created = {}
  for _, key in ipairs(keys) do
    for _, kept in ipairs((blocks.hidden or {})[key] or {}) do
      local op = { op = "block", id = kept.id, kind = kept.kind, prefix = kept.prefix, status = kept.status }
      op.permission, op.locations, op.turn, op.lines = kept.permission, kept.locations, kept.turn, kept.lines
      if M.block(buf, blocks, op) then
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
  api.nvim_set_option_value("modifiable", true, { buf = buf })
  api.nvim_buf_set_lines(buf, 0, -1, false, {})
  api.nvim_set_option_value("modifiable", false, { buf = buf })
  api.nvim_buf_clear_namespace(buf, blocks_of.ns, 0, -1)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, 0, -1)
  if unsettled[buf] then -- its blocks are gone
    unsettled[buf] = { from = 0, created = {} }
  end
  local blocks = blocks_of.new()
  screen.attach(buf, blocks)
  return blocks
end

--- Transcript `buf` as it stands: its lines, and the first row of each of `blocks`
--- by index (acp.chat.kept keeps them while Neovim unloads the buffer).
---@param buf integer
---@param blocks acp.Blocks
---@return {lines: string[], rows: integer[]}
function M.copy(buf, blocks)
  local rows = {}
  for index, id in ipairs(blocks.order) do
    rows[index] = start_row(buf, blocks.by_id[id])
  end
  return { lines = api.nvim_buf_get_lines(buf, 0, -1, false), rows = rows }
end

--- Write transcript `buf` again from M.copy's `copy` (Neovim emptied it): its
--- lines, its blocks' marks and their stored highlights.
---@param buf integer
---@param blocks acp.Blocks
---@param copy {lines: string[], rows: integer[]}
function M.restore(buf, blocks, copy)
  screen.attach(buf, blocks)
  api.nvim_buf_clear_namespace(buf, blocks_of.ns, 0, -1)
  api.nvim_buf_clear_namespace(buf, M.ns_hl, 0, -1)
  -- Known before the lines exist, as in M.block: foldexpr runs while they are written.
  for index, id in ipairs(blocks.order) do
    local block = blocks.by_id[id]
    block.first, block.mark = copy.rows[index], nil
  end
  blocks_of.moved(blocks)
  wrote(buf, 0)
  api.nvim_set_option_value("modifiable", true, { buf = buf })
  api.nvim_buf_set_lines(buf, 0, -1, false, copy.lines)
  api.nvim_set_option_value("modifiable", false, { buf = buf })
  for _, id in ipairs(blocks.order) do
    local block = blocks.by_id[id]
    block.mark = api.nvim_buf_set_extmark(buf, blocks_of.ns, block.first, 0, { right_gravity = false })
    block.first = nil
  end
  for _, id in ipairs(blocks.order) do
    local block = blocks.by_id[id]
    highlight(buf, block, rows(buf, blocks, block))
  end
end

--- Whether window `win` is at the end of transcript `buf`, which it shows: it
--- follows what is written there.
---@param win integer
---@param buf integer
function M.at_end(win, buf)
  return api.nvim_win_get_cursor(win)[1] >= api.nvim_buf_line_count(buf)
end

--- Blocks `created` in transcript `buf` arrive open, unless 'foldlevel' closes them
--- (zM): once the user closed a fold (zc), Vim creates every new fold of the
--- window closed. In insert mode they have no fold yet: `settle` opens them.
---@param buf integer
---@param created acp.Block[]
function M.open_folds(buf, created)
  local pending = unsettled[buf]
  if pending then
    vim.list_extend(pending.created, created)
    return
  end
  if #created == 0 then -- most batches: no table for them
    return
  end
  local lnums = {}
  for _, block in ipairs(created) do
    -- A block taken out of view since (M.cut) has no mark.
    if blocks_of.folds[block.kind] and block.mark then
      table.insert(lnums, start_row(buf, block) + 1)
    end
  end
  if #lnums == 0 then
    return
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win_option(win, "foldlevel") > 0 then
      api.nvim_win_call(win, function()
        for _, lnum in ipairs(lnums) do
          if vim.fn.foldclosed(lnum) ~= -1 then
            vim.cmd(lnum .. "foldopen")
          end
        end
      end)
    end
  end
end

--- The mode left insert: in each window on a transcript written meanwhile,
--- Neovim asks the fold levels from the first row written to the end, once (not
--- per chunk, nor the whole buffer as `zx` would), and the blocks created
--- meanwhile arrive open.
local function settle()
  for buf, pending in pairs(unsettled) do
    unsettled[buf] = nil
    if api.nvim_buf_is_valid(buf) then
      local count = api.nvim_buf_line_count(buf)
      -- At least the last row: rows cut from the end leave none below it written.
      local from = math.min(pending.from, count - 1)
      for _, win in ipairs(vim.fn.win_findbuf(buf)) do
        if win_option(win, "foldmethod") == "expr" then
          vim._foldupdate(win, from, count)
        end
      end
      M.open_folds(buf, pending.created)
    end
  end
end

--- Make the transcript writable for M.block and M.append.
---@param buf integer
---@return {rows: integer, [integer]: integer} following the windows at its end (and its rows now), for M.done
function M.begin(buf)
  if not unsettled[buf] and vim.fn.mode():find("^[iR]") then -- mode(): no table a batch
    if not next(unsettled) then
      -- Into any mode but insert and replace (normal, <C-o>'s, visual, the
      -- command line): Neovim updates folds there again, and fold commands work
      -- only there. Not InsertLeave, which leaving with <C-c> does not fire, nor
      -- WinEnter on the transcript, which can come in insert mode.
      api.nvim_create_autocmd("ModeChanged", { pattern = "*:[^iR]*", once = true, callback = settle })
    end
    unsettled[buf] = { from = math.huge, created = {} }
  end
  local following = { rows = api.nvim_buf_line_count(buf) }
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if M.at_end(win, buf) then
      table.insert(following, win)
    end
  end
  api.nvim_set_option_value("modifiable", true, { buf = buf })
  return following
end

--- Done writing: the transcript is read-only again, and windows that were at its
--- end follow it. When rows were taken away (M.cut: a rewind, a branch switch),
--- Neovim keeps a window's top line: its end would show high above empty rows, what
--- is left above out of view. Each window now at the end (following, or its rows
--- cut) shows as much as fits, the end at its bottom.
---@param buf integer
---@param following {rows: integer, [integer]: integer} from M.begin
function M.done(buf, following)
  api.nvim_set_option_value("modifiable", false, { buf = buf })
  local last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(following) do
    api.nvim_win_set_cursor(win, { last, 0 })
  end
  if last < following.rows then
    M.keep_end(buf)
  end
end

--- Each window at the end of transcript `buf` shows as much as fits, the end at its
--- bottom: Neovim keeps a window's top line when rows go (M.done) or a virtual line
--- above the end comes (the review's keys), and the end then sat out of view.
---@param buf integer
function M.keep_end(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if M.at_end(win, buf) then
      api.nvim_win_call(win, function()
        vim.cmd("normal! zb")
      end)
    end
  end
end

return M
