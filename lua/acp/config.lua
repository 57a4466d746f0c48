-- The user's options over their defaults. The options are defined once, in
-- acp_nvim/client/config.py (which validates the whole table when the host starts;
-- wrong keys are reported by their dotted name); their types, defaults and the
-- built-in agents reach Lua through the generated lua/acp/defaults.lua.
local defaults = require("acp.defaults")

local M = {}

---@type acp.Options
M.options = vim.deepcopy(defaults.options)

---@param opts? acp.Options
function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(defaults.options), opts or {})
end

--- Names for :AcpChat completion.
function M.agent_names()
  local names = vim.deepcopy(defaults.agents)
  for name in pairs(M.options.agents or {}) do
    if not vim.tbl_contains(names, name) then
      table.insert(names, name)
    end
  end
  table.sort(names)
  return names
end

return M
