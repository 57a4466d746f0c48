-- Buffer-local normal-mode keys that come and go with what they act on (a
-- permission preview, agent hunks) in the user's own buffers: a buffer-local
-- mapping the buffer had for the same key is put back when ours goes.
local M = {}
local api = vim.api

---@type table<integer, table<string, table<string, table|false>>> buf -> owner -> lhs -> the buffer's own mapping
local owned = {}

--- Remove the keys `owner` mapped in `buf`, putting back what they covered.
---@param buf integer
---@param owner string
function M.clear(buf, owner)
  local mine = owned[buf] and owned[buf][owner]
  if not mine then
    return
  end
  owned[buf][owner] = nil
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  for lhs, saved in pairs(mine) do
    pcall(vim.keymap.del, "n", lhs, { buffer = buf })
    if saved then
      api.nvim_buf_call(buf, function()
        vim.fn.mapset("n", false, saved)
      end)
    end
  end
end

--- Map `keys` ({[lhs] = {fn, desc}}) in `buf` for `owner`, instead of what `owner`
--- mapped there before.
---@param buf integer
---@param owner string
---@param keys table<string, {[1]: function, [2]: string}>
function M.set(buf, owner, keys)
  M.clear(buf, owner)
  if not next(keys) then
    return
  end
  local mine = {}
  for lhs, spec in pairs(keys) do
    local own = api.nvim_buf_call(buf, function()
      return vim.fn.maparg(lhs, "n", false, true)
    end)
    mine[lhs] = own.buffer == 1 and own or false
    vim.keymap.set("n", lhs, spec[1], { buffer = buf, nowait = true, desc = spec[2] })
  end
  owned[buf] = owned[buf] or {}
  owned[buf][owner] = mine
end

api.nvim_create_autocmd("BufWipeout", {
  group = api.nvim_create_augroup("acp.keys", { clear = true }),
  callback = function(ev)
    owned[ev.buf] = nil
  end,
})

return M
