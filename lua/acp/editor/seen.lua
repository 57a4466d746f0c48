-- What each file buffer's file was (size, modification time) when Neovim last
-- read or wrote it. Neovim asks "changed since reading it" at :write when the file
-- differs from then; a change we make behind a buffer's unsaved edits, which the
-- buffer gets too, is answered for it (acp.editor.buffers) only where the file was
-- still as Neovim saw it. plugin/acp.lua records from the start, so buffers read
-- before the first chat count too.
if jit then jit.off(true, true) end -- decision 0068

local M = {}

--- {size, mtime seconds, mtime nanoseconds} of `path`, or nil when it is no file.
---@param path string
---@return integer[]?
function M.stat(path)
  local st = vim.uv.fs_stat(path)
  return st and st.type == "file" and { st.size, st.mtime.sec, st.mtime.nsec } or nil
end

--- Record the file of `buf` as Neovim has it now (it read or wrote it).
---@param buf integer
function M.record(buf)
  if vim.bo[buf].buftype == "" then
    vim.b[buf].acp_seen = M.stat(vim.api.nvim_buf_get_name(buf))
  end
end

--- Whether `stat` (M.stat's) is the file of `buf` as Neovim last read or wrote it.
---@param buf integer
---@param stat integer[]
function M.was(buf, stat)
  return vim.deep_equal(vim.b[buf].acp_seen, stat)
end

return M
