-- :AcpLog — the Python side's stderr, then the bounded protocol log (both
-- directions and agent stderr).
if jit then jit.off(true, true) end -- decision 0068
local bufnames = require("acp.bufnames")
local host = require("acp.host")
local util = require("acp.util")

local M = {}

function M.open()
  local lines = host.stderr_lines()
  if host.running() then
    -- A Python side that does not answer is what the user may be looking into.
    local ok, log = pcall(host.request, "log")
    vim.list_extend(lines, ok and log or { tostring(log) })
  end
  local name = "acp://log"
  local buf = bufnames.find(name)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    bufnames.give(buf, name)
    vim.bo[buf].filetype = "acplog"
    util.map_close(buf, "log")
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, #lines > 0 and lines or { "(the protocol log is empty)" })
  vim.bo[buf].modifiable = false
  util.focus_or_tab(buf)
  vim.cmd("normal! G")
  return buf
end

return M
