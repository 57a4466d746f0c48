-- Virtual lines that wrap. Neovim draws a virtual line on one screen row, cut at
-- the window's edge, so a chat's 48 columns hid the end of a hint (the keys it
-- names). These are broken between their pieces to the narrowest window that shows
-- the buffer, and broken again when such a window opens or is resized. One mark per
-- buffer and namespace.
if jit then jit.off(true, true) end -- decision 0068

local M = {}
local api = vim.api

-- A paragraph's lines after its first are indented this much, so each reads as one.
local INDENT = "  "

---@class acp.WrappedText
---@field pieces string[] broken between, never inside
---@field separator string between two pieces on one line

---@class acp.WrappedMark
---@field id integer
---@field paragraphs acp.WrappedText[]
---@field hl string
---@field row? integer its row when its buffer unloaded (M.restore)

--- [buf][ns]: the marks shown.
---@type table<integer, table<integer, acp.WrappedMark>>
local marks = {}

--- `paragraph`'s lines at most `width` columns wide (a longer piece keeps a line of
--- its own).
---@param paragraph acp.WrappedText
---@return string[]
local function wrap(paragraph, width)
  local lines, line = {}, nil
  for _, piece in ipairs(paragraph.pieces) do
    local longer = line and (line .. paragraph.separator .. piece)
    if not line then
      line = piece
    elseif api.nvim_strwidth(longer) <= width then
      line = longer
    else
      table.insert(lines, line)
      line = INDENT .. piece
    end
  end
  table.insert(lines, line)
  return lines
end

--- The text width of the narrowest window showing `buf` (nil when none does).
local function width_of(buf)
  local width
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local info = vim.fn.getwininfo(win)[1]
    width = math.min(width or math.huge, info.width - info.textoff)
  end
  return width
end

--- Draw `mark` of namespace `ns` in `buf` at `row` (its own row when nil).
local function draw(buf, ns, mark, row)
  row = row or api.nvim_buf_get_extmark_by_id(buf, ns, mark.id, {})[1]
  if not row then -- taken away with its line
    marks[buf][ns] = nil
    return
  end
  local width, lines = width_of(buf) or math.huge, {}
  for _, paragraph in ipairs(mark.paragraphs) do
    for _, line in ipairs(wrap(paragraph, width)) do
      table.insert(lines, { { line, mark.hl } })
    end
  end
  mark.id = api.nvim_buf_set_extmark(buf, ns, row, 0, { id = mark.id, virt_lines = lines })
end

--- Show `paragraphs` as virtual lines below `row` of `buf`, in namespace `ns`
--- (replacing the one shown there), highlighted `hl`.
---@param buf integer
---@param ns integer
---@param row integer
---@param paragraphs acp.WrappedText[]
---@param hl string
function M.set(buf, ns, row, paragraphs, hl)
  marks[buf] = marks[buf] or {}
  local mark = marks[buf][ns] or {}
  mark.paragraphs, mark.hl = paragraphs, hl
  marks[buf][ns] = mark
  draw(buf, ns, mark, row)
end

--- `text` as a paragraph broken between its words.
---@param text string
---@return acp.WrappedText
function M.words(text)
  return { pieces = vim.split(text, " ", { trimempty = true }), separator = " " }
end

--- Take away what namespace `ns` shows in `buf`.
---@param buf integer
---@param ns integer
function M.clear(buf, ns)
  if marks[buf] then
    marks[buf][ns] = nil
  end
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
end

--- Wrap again what `buf` shows.
local function redraw(buf)
  for ns, mark in pairs(marks[buf] or {}) do
    draw(buf, ns, mark)
  end
end

--- Show again, where they were, the lines `buf` showed when it unloaded (its text
--- written back: acp.chat.kept).
---@param buf integer
function M.restore(buf)
  for ns, mark in pairs(marks[buf] or {}) do
    draw(buf, ns, mark, mark.row)
  end
end

local group = api.nvim_create_augroup("acp.wrapped", { clear = true })
api.nvim_create_autocmd("BufWinEnter", {
  group = group,
  callback = function(ev)
    redraw(ev.buf)
  end,
})
api.nvim_create_autocmd("WinResized", {
  group = group,
  callback = function()
    for _, win in ipairs(vim.v.event.windows) do
      if api.nvim_win_is_valid(win) then
        redraw(api.nvim_win_get_buf(win))
      end
    end
  end,
})
-- An unloaded buffer (:bdelete, :bunload, :e!) loses its marks, or keeps them on its
-- one empty row: where each was is kept for M.restore.
api.nvim_create_autocmd("BufUnload", {
  group = group,
  callback = function(ev)
    for ns, mark in pairs(marks[ev.buf] or {}) do
      mark.row = api.nvim_buf_get_extmark_by_id(ev.buf, ns, mark.id, {})[1]
    end
  end,
})
api.nvim_create_autocmd("BufWipeout", {
  group = group,
  callback = function(ev)
    marks[ev.buf] = nil
  end,
})

return M
