-- The side of a diff split whose text the plugin sets (:AcpDiff's baseline, a
-- split preview's proposed text): a read-only scratch buffer, wiped once hidden,
-- so :bdelete and :bunload close it as its window closing does. :e! empties it,
-- and then its keys acted on text it no longer showed, diffed against nothing: its
-- BufReadCmd writes back what it showed, as a file's reads the disk (decision 0085).
if jit then jit.off(true, true) end -- decision 0068
local bufnames = require("acp.bufnames")
local util = require("acp.util")

local M = {}
local api = vim.api

---@type table<integer, string[]> the text each side shows, by buffer
local texts = {}

--- Put `lines` in side `buf`, read-only to the user: both flags are lifted for our
--- own change, which would otherwise warn (W10) when it is the current buffer.
---@param buf integer
---@param lines string[]
function M.set(buf, lines)
  texts[buf] = lines
  local bo = vim.bo[buf]
  bo.modifiable, bo.readonly = true, false
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  bo.modifiable, bo.readonly = false, true
end

--- A new side named `name` showing `lines` with `filetype` (the file's, for its
--- highlighting).
---@param name string
---@param filetype string
---@param lines string[]
---@return integer buf
function M.create(name, filetype, lines)
  local buf = api.nvim_create_buf(false, true)
  M.set(buf, lines)
  pcall(bufnames.give, buf, name)
  local bo = vim.bo[buf]
  bo.bufhidden, bo.swapfile, bo.filetype = "wipe", false, filetype
  util.drawn_again_on_edit(buf, function()
    M.set(buf, texts[buf])
  end, function()
    texts[buf] = nil
  end)
  return buf
end

return M
