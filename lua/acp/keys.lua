-- The keys of the `keys` option (|acp-keys|), mapped where they act: M.map for
-- the plugin's own buffers; M.set and M.clear for keys that come and go with what
-- they act on (a permission prompt, a preview, agent hunks), putting back a
-- buffer-local mapping the buffer had for the same key when ours goes.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api

--- The lhs of key `name` of table `where` of the `keys` option; nil when the
--- user turned it off (false).
---@param where "chat"|"input"|"permission"|"review"|"queue"
---@param name string
---@return string?
function M.lhs(where, name)
  return require("acp.config").options.keys[where][name] or nil
end

--- Map key `name` of table `where` in `buf` (nothing when it is off).
---@param buf integer
---@param modes string|string[]
---@param where "chat"|"input"|"permission"|"review"|"queue"
---@param name string
---@param fn function
---@param desc string
function M.map(buf, modes, where, name, fn, desc)
  local lhs = M.lhs(where, name)
  if lhs then
    vim.keymap.set(modes, lhs, fn, { buffer = buf, nowait = true, desc = "acp: " .. desc })
  end
end

--- How to type `lhs` (`<localleader>y` is `\y` unless set otherwise).
---@param lhs string
---@return string
function M.typed(lhs)
  return vim.fn.keytrans(vim.keycode(lhs))
end

--- The keys that answer a permission prompt's `options` in a buffer you type in
--- (the `buffer_` keys of keys.permission, by option kind), each calling
--- `answer(option)`, and a hint naming them (`\y Allow once · \n Reject`).
---@param options {name: string, kind?: string}[]
---@param answer fun(option: table)
---@return table<string, {[1]: function, [2]: string}> map, string hint
function M.prompt_keys(options, answer)
  local map, hint = {}, {}
  for _, option in ipairs(options or {}) do
    local lhs = option.kind and M.lhs("permission", "buffer_" .. option.kind)
    if lhs and not map[lhs] then
      map[lhs] = {
        function()
          answer(option)
        end,
        "acp: answer the permission prompt: " .. option.name,
      }
      table.insert(hint, ("%s %s"):format(M.typed(lhs), option.name))
    end
  end
  return map, table.concat(hint, " · ")
end

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

--- The keys of the `keys` option `options` that are one key in one kind of buffer
--- they are mapped in together (acp.defaults.key_places, from each key's option:
--- the permission keys are left out, decision 0019), each as "keys.chat.hide and
--- keys.chat.cancel are both 'q' in the chat's input".
---@param options table
---@return string[]
function M.clashes(options)
  local found, said = {}, {}
  for _, place in ipairs(require("acp.defaults").key_places) do
    local seen = {} -- the key as typed -> the option that maps it first
    for _, key in ipairs(place.keys) do
      local where, name = key:match("^(%w+)%.(.+)$")
      local lhs, path = options[where][name], "keys." .. key
      local typed = lhs and M.typed(lhs)
      local first = typed and seen[typed]
      if first and not said[first .. path] then
        said[first .. path] = true
        table.insert(found, ("%s and %s are both '%s' in %s"):format(first, path, lhs, place.name))
      elseif typed then
        seen[typed] = path
      end
    end
  end
  return found
end

api.nvim_create_autocmd("BufWipeout", {
  group = api.nvim_create_augroup("acp.keys", { clear = true }),
  callback = function(ev)
    owned[ev.buf] = nil
  end,
})

return M
