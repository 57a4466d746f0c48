-- The names of the plugin's buffers (acp://chat/1, acp://review/1, acp://log, ...),
-- and the buffers that hold such a name without being the plugin's. Neovim gives
-- a name to one buffer only: sourcing a session saved with a chat shown made empty
-- buffers of the chat's names (:mksession writes `enew | file acp://chat/1` for a
-- window of a 'nofile' buffer, and its options with "localoptions"), as does
-- `:edit acp://chat/1` typed by hand, and the chat's own buffer then could not take
-- its name (E95). The buffers named here are remembered (by number, which Neovim
-- never hands out again; not a b: variable, which :bdelete drops from a chat's
-- transcript it keeps): one of an acp:// name not among them is a leftover
-- (decision 0084).
-- Terminal buffers are named here too; a terminal is never a leftover.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api

---@type table<integer, true> the buffers named here
local owned = {}

-- The names the plugin gives (acp://chat/1, acp://log, ...) by their first word: a
-- buffer of another acp:// name is some other plugin's, never swept.
local KINDS = { chat = true, input = true, review = true, log = true, terminal = true, baseline = true, proposed = true }

--- Whether `buf` holds a name of the plugin's kind without being the plugin's.
---@param buf integer
---@return boolean
local function leftover(buf)
  return not owned[buf]
    and vim.bo[buf].buftype ~= "terminal"
    and KINDS[api.nvim_buf_get_name(buf):match("^acp://(%a+)") or ""] == true
end

--- Wipe every leftover that holds no text of the user's: its windows close, as
--- with :bwipeout (the last window of all shows another buffer).
function M.sweep()
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_valid(buf) and leftover(buf) and not vim.bo[buf].modified then
      pcall(api.nvim_buf_delete, buf, { force = true })
    end
  end
end

local sweep_pending = false

--- M.sweep once what runs now has run: a session's `doautoall SessionLoadPost`
--- stops at a buffer wiped under it (the buffers after it would miss the event),
--- and fires once for each buffer.
function M.sweep_soon()
  if sweep_pending then
    return
  end
  sweep_pending = true
  vim.schedule(function()
    sweep_pending = false
    M.sweep()
  end)
end

--- The plugin's buffer named `name`, if there is one. Not bufnr(), which takes
--- `acp://review/1` for a pattern (acp://review/12 would do) and finds a leftover.
---@param name string
---@return integer?
function M.find(name)
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(buf) == name and not leftover(buf) then
      return buf
    end
  end
end

--- Name `buf` `name`, once the leftovers are gone (M.sweep). One holding `name`
--- with text typed into it keeps its text and its windows, unnamed.
---@param buf integer
---@param name string
function M.give(buf, name)
  for _, other in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_get_name(other) == name and leftover(other) and vim.bo[other].modified then
      -- Renamed, a buffer leaves its old name to a new unlisted one: a leftover.
      api.nvim_buf_set_name(other, "")
    end
  end
  M.sweep()
  api.nvim_buf_set_name(buf, name)
  owned[buf] = true
end

return M
