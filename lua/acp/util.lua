-- Messages to the user: one helper, fixed prefix, safe from fast events.
local M = {}

local levels = {
  error = vim.log.levels.ERROR,
  warn = vim.log.levels.WARN,
  info = vim.log.levels.INFO,
}

---@param message string
---@param level? "error"|"warn"|"info"
function M.notify(message, level)
  local function show()
    vim.notify("acp: " .. message, levels[level or "error"] or vim.log.levels.ERROR)
  end
  if vim.in_fast_event() then
    vim.schedule(show)
  else
    show()
  end
end

--- Raise a user error without file:line noise.
---@param message string
function M.user_error(message)
  error("acp: " .. message, 0)
end

--- The plugin's root directory (holding lua/, plugin/, acp_nvim/).
function M.root()
  local source = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

return M
