-- Permission prompts in the transcript: keys while a prompt is pending (bare ones
-- in the transcript, prefixed ones in the input: |acp-option-keys.permission|), a
-- picker (vim.ui.select), and a notice when the chat is not on screen. Python owns
-- the requests and assigns the transcript's keys from the same option; this maps
-- them and sends the user's answer.
if jit then jit.off(true, true) end -- decision 0068
local blocks = require("acp.chat.blocks")
local host = require("acp.host")
local notice = require("acp.chat.notice")
local keys = require("acp.keys")
local preview = require("acp.review.preview")
local registry = require("acp.chat.registry")
local util = require("acp.util")
local wrapped = require("acp.chat.wrapped")

local M = {}
local api = vim.api

---@class acp.PermissionOption
---@field id string
---@field name string
---@field kind? string
---@field key? string
---@field row integer offset in the tool block

---@class acp.Permission
---@field id string request id
---@field row integer offset of the prompt in the tool block
---@field title string the tool call's title
---@field pending boolean
---@field options? acp.PermissionOption[]
---@field why? {key: string, option: string, row: integer} reject with that option and say why
---@field preview? {path: string, created: boolean, deleted: boolean, hunks: {row: integer, count: integer, lines: string[], held?: boolean}[]}[] the files the edit would change (acp.review.preview; held: rows the write keeps, lines that wait in the review)

--- Pending prompts of a chat, oldest first: the tool block holding each and its request id.
---@return {block: string, id: string}[]
local function pending(chat)
  chat.prompts = chat.prompts or {}
  return chat.prompts
end

---@return acp.Permission
local function permission_of(chat, entry)
  return chat.blocks.by_id[entry.block].permission
end

---@param permission acp.Permission
---@param option acp.PermissionOption
---@param reason? string why it is rejected, for the agent
function M.answer(chat, permission, option, reason)
  host.notify("answer", { chat = chat.id, request = permission.id, option = option.id, reason = reason })
end

--- Reject `permission` and say why: the reason asked for goes to the agent.
---@param permission acp.Permission
function M.why(chat, permission)
  vim.ui.input({ prompt = ("Why reject %s? "):format(permission.title) }, function(reason)
    if reason and vim.trim(reason) ~= "" then
      M.answer(chat, permission, { id = permission.why.option }, vim.trim(reason))
    end
  end)
end

---@class acp.PermissionChoice: acp.PermissionOption
---@field why? true reject and say why

--- What `permission` offers, in the order its prompt lists them: its options, then
--- "reject and say why" where it has that.
---@param permission acp.Permission
---@return acp.PermissionChoice[]
local function choices(permission)
  local offered = vim.list_extend({}, permission.options)
  local why = permission.why
  if why then
    table.insert(offered, { id = why.option, key = why.key, name = "Reject and say why", row = why.row, why = true })
  end
  return offered
end

--- Pick an option of `permission` with vim.ui.select ("reject and say why" last).
---@param permission acp.Permission
function M.pick(chat, permission)
  vim.ui.select(choices(permission), {
    prompt = ("acp: allow %s?"):format(permission.title),
    kind = "acp.permission",
    format_item = function(option)
      return option.key and ("[%s] %s"):format(option.key, option.name) or option.name
    end,
  }, function(option)
    if option and option.why then
      M.why(chat, permission)
    elseif option then
      M.answer(chat, permission, option)
    end
  end)
end

--- The pending prompt whose tool block holds the cursor (transcript window only).
local function at_cursor(chat)
  if api.nvim_get_current_buf() ~= chat.transcript then
    return nil
  end
  local id = blocks.block_at(chat.transcript, chat.blocks, api.nvim_win_get_cursor(0)[1] - 1)
  for _, entry in ipairs(pending(chat)) do
    if entry.block == id then
      return entry
    end
  end
end

--- A prompt key: answer the prompt at the cursor, else the oldest one with that
--- key; no prompt offers it: say which keys they do.
function M.press(chat, key)
  local first = at_cursor(chat)
  local entries = { first }
  vim.list_extend(entries, pending(chat))
  local offered = {}
  for _, entry in ipairs(entries) do
    local permission = permission_of(chat, entry)
    for _, choice in ipairs(choices(permission)) do
      if choice.key == key and choice.why then
        return M.why(chat, permission)
      elseif choice.key == key then
        return M.answer(chat, permission, choice)
      end
      if choice.key and not vim.tbl_contains(offered, choice.key) then
        table.insert(offered, choice.key)
      end
    end
  end
  util.notify(("the permission prompt takes %s (or :AcpPermission)"):format(table.concat(offered, " ")), "info")
end

--- <CR> on a pending prompt (`offset` in its tool block) opens the picker: a key
--- answers in one stroke, <CR> never does (it also moves the cursor down).
---@return boolean handled
function M.enter(chat, block, offset)
  local permission = block.permission
  if not (permission and permission.pending and offset >= permission.row) then
    return false
  end
  M.pick(chat, permission)
  return true
end

--- :AcpPermission: the picker for the prompt at the cursor, else the current
--- chat's oldest, else any chat's.
function M.open()
  local current = registry.get()
  local order = { current }
  for _, chat in pairs(registry.chats) do
    if chat ~= current then
      table.insert(order, chat)
    end
  end
  for _, chat in ipairs(order) do
    local entry = at_cursor(chat) or pending(chat)[1]
    if entry then
      return M.pick(chat, permission_of(chat, entry))
    end
  end
  util.notify("no permission request is pending", "info")
end

-- Option kinds, whose keys (keys.permission) are all taken in the transcript while
-- a prompt waits, offered or not: `R` must not start Replace mode there.
local KINDS = { "allow_once", "allow_always", "reject_once", "reject_always" }
local hint_ns = api.nvim_create_namespace("acp.permission.hint")

--- The oldest pending prompt of `chat` offering an option of `kind`, answered so.
local function answer_kind(chat, kind)
  for _, entry in ipairs(pending(chat)) do
    local permission = permission_of(chat, entry)
    for _, option in ipairs(permission.options) do
      if option.kind == kind then
        return M.answer(chat, permission, option)
      end
    end
  end
end

--- While a prompt waits its keys are mapped in Normal mode: in the read-only
--- transcript the bare ones (keys.permission), in the input (where the cursor stays
--- after a send, and `a` must append) the `buffer_` ones, named by virtual text.
--- Again when the input is made anew, or a :bdelete took the transcript's keys
--- (acp.chat, acp.chat.kept).
---@param chat acp.Chat
function M.map_keys(chat)
  local transcript, input, hint = {}, {}, ""
  local entries = pending(chat)
  if #entries > 0 then
    local function press(lhs)
      return {
        function()
          M.press(chat, lhs)
        end,
        "acp: answer the permission prompt",
      }
    end
    for _, kind in ipairs(KINDS) do
      local lhs = keys.lhs("permission", kind)
      if lhs then
        transcript[lhs] = press(lhs)
      end
    end
    local options = {}
    for _, entry in ipairs(entries) do
      local permission = permission_of(chat, entry)
      for _, choice in ipairs(choices(permission)) do
        if choice.key and not transcript[choice.key] then
          transcript[choice.key] = press(choice.key) -- a digit, or reject and say why
        end
      end
      vim.list_extend(options, permission.options)
    end
    input, hint = keys.prompt_keys(options, function(option)
      answer_kind(chat, option.kind)
    end)
  end
  keys.set(chat.transcript, "permission", transcript)
  keys.set(chat.input, "permission", input)
  if hint == "" then
    wrapped.clear(chat.input, hint_ns)
  else
    -- Under what is typed, wrapped between the keys: after the text, on its row, a
    -- narrow input cut it short.
    local pieces = vim.split("permission: " .. hint, " · ", { plain = true })
    local paragraph = { pieces = pieces, separator = " · " }
    wrapped.set(chat.input, hint_ns, api.nvim_buf_line_count(chat.input) - 1, { paragraph }, "AcpPermissionKey")
  end
end

local function shown_in(chat)
  local tab = api.nvim_get_current_tabpage()
  return vim.tbl_filter(function(win)
    return api.nvim_win_get_tabpage(win) == tab
  end, vim.fn.win_findbuf(chat.transcript))
end

--- A new prompt: open its fold where the chat is shown, else tell the user.
local function announce(chat, entry)
  local permission = permission_of(chat, entry)
  notice.announce(chat, ("asks permission: %s (:AcpPermission)"):format(permission.title), "warn")
  local wins = shown_in(chat)
  local lnum = blocks.start_row(chat.transcript, chat.blocks.by_id[entry.block]) + permission.row + 1
  for _, win in ipairs(wins) do
    api.nvim_win_call(win, function()
      if vim.fn.foldclosed(lnum) ~= -1 then
        vim.cmd(lnum .. "foldopen!")
      end
    end)
  end
end

--- Ops that put `outcome` where each pending prompt of `chat` lists its keys, as the
--- Python side shows an answered one: for a host that died, which can draw no more.
---@return table[]
function M.unanswered(chat, outcome)
  local ops = {}
  for _, entry in ipairs(pending(chat)) do
    local block = chat.blocks.by_id[entry.block]
    if block and (block.mark or block.first) then -- not out of view
      local first, last = blocks.rows(chat.transcript, chat.blocks, block)
      table.insert(ops, {
        op = "block",
        id = entry.block,
        start = block.permission.row,
        ["end"] = last - first,
        status = block.status,
        lines = { "**Permission:** " .. outcome },
      })
    end
  end
  return ops
end

--- The Python host is gone, and the requests with it: forget every prompt and unmap
--- its keys (a key press would otherwise start a new host that knows nothing of it).
function M.forget_all(chat)
  chat.prompts = {}
  M.map_keys(chat)
  preview.sync(chat, {}, M.answer)
end

--- After a render batch: track the prompts its tool call block ops showed or resolved.
function M.update(chat, ops)
  local entries, changed, new = pending(chat), false, {}
  for _, op in ipairs(ops) do
    local permission = op.permission
    local request = permission and permission.pending and permission.id or nil
    local known = false
    for i = #entries, 1, -1 do
      if entries[i].block == op.id then
        if entries[i].id == request then
          known = true
        else
          table.remove(entries, i)
          changed = true
        end
      end
    end
    if request and not known then
      local entry = { block = op.id, id = request }
      table.insert(entries, entry)
      table.insert(new, entry)
      changed = true
    end
  end
  if changed then
    M.map_keys(chat)
    preview.sync(chat, entries, M.answer)
  end
  for _, entry in ipairs(new) do
    announce(chat, entry)
  end
end

--- Highlights of a tool block's prompt; `lines` are the block's rows from `first`.
function M.highlight(buf, ns, block, first, lines)
  local permission = block.permission
  if not permission then
    return
  end
  local row = first + permission.row
  if not permission.pending then
    api.nvim_buf_set_extmark(buf, ns, row, 0, { line_hl_group = "AcpPermissionAnswer" })
    return
  end
  api.nvim_buf_set_extmark(buf, ns, row, 0, { line_hl_group = "AcpPermission" })
  for _, option in ipairs(choices(permission)) do
    local line = lines[option.row + 1]
    local from, to = nil, nil
    if line and option.key then
      from, to = line:find("`" .. option.key .. "`", 1, true)
    end
    if from then
      api.nvim_buf_set_extmark(buf, ns, first + option.row, from - 1, { end_col = to, hl_group = "AcpPermissionKey" })
    end
  end
end

return M
