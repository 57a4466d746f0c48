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

local last_mark = 0

--- nvim_buf_set_extmark with an id never given before. Undo puts a mark back
--- where it was by its id, so a mark drawn with the id of a deleted one (Neovim
--- reuses them) would jump to where that one was.
---@return integer id
function M.extmark(buf, ns, row, col, opts)
  last_mark = last_mark + 1
  opts.id = last_mark
  return vim.api.nvim_buf_set_extmark(buf, ns, row, col, opts)
end

--- The plugin's root directory (holding lua/, plugin/, acp_nvim/).
function M.root()
  local source = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

return M
