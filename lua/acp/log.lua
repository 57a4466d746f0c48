-- :AcpLog — the Python side's stderr, then the bounded protocol log (both
-- directions and agent stderr).
if jit then jit.off(true, true) end -- decision 0068
local bufnames = require("acp.bufnames")
local host = require("acp.host")
local util = require("acp.util")

local M = {}

--- Show `lines` in the log's buffer (none: says the log is empty).
local function fill(buf, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, #lines > 0 and lines or { "(the protocol log is empty)" })
  vim.bo[buf].modifiable = false
end

--- Open the log: the host's stderr at once, the protocol log once the Python
--- side gives it (or the line saying it does not answer, the case to look into).
function M.open()
  local stderr = host.stderr_lines()
  local name = "acp://log"
  local buf = bufnames.find(name)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    bufnames.give(buf, name)
    vim.bo[buf].filetype = "acplog"
    util.map_close(buf, "log")
  end
  local asking = host.running()
  fill(buf, asking and vim.list_extend(vim.list_slice(stderr), { "(asking the Python side for the protocol log)" }) or stderr)
  util.focus_or_tab(buf)
  vim.cmd("normal! G")
  if asking then
    host.ask("log", {}, function(log, error)
      if vim.api.nvim_buf_is_valid(buf) then
        fill(buf, vim.list_extend(stderr, log or { error }))
        for _, win in ipairs(vim.fn.win_findbuf(buf)) do
          vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
        end
      end
    end)
  end
  return buf
end

return M
