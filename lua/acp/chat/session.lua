-- Session surface pickers: settings (mode, model, thinking, ...), saved sessions,
-- login. Thin glue over vim.ui.select; the Python side does the work and reports
-- back through the chat status (settings) or the AcpSessionList event (sessions).
if jit then jit.off(true, true) end -- decision 0068
local chats = require("acp.chat")
local host = require("acp.host")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

-- The choices Python left out of a setting's status entry (past 10,000 choices in
-- all, view.SENT_CHOICES), asked for once: by the entry, gone with it.
local asked = setmetatable({}, { __mode = "k" })

--- The choices ({value, name}) of setting `option` of `chat`: its own, else those
--- Python left out of it, asked for.
---@return table[]
function M.choices(chat, option)
  if option.choices or option.type ~= "select" then
    return option.choices or {}
  end
  if not asked[option] then
    -- A Python side that is gone has no choices to give (status() must not fail).
    local ok, choices = pcall(host.request, "choices", { chat = chat.id, id = option.id })
    asked[option] = ok and choices or nil
  end
  return asked[option] or {}
end

local function option_label(option)
  local current = option.current
  if type(current) == "boolean" then
    current = current and "on" or "off"
  end
  if option.current_name ~= nil and option.current_name ~= vim.NIL then
    current = option.current_name
  end
  for _, choice in ipairs(option.choices or {}) do
    if choice.value == current then
      current = choice.name
    end
  end
  local category = option.category ~= vim.NIL and option.category or nil
  local suffix = category and (" (" .. category .. ")") or ""
  return ("%s: %s%s"):format(option.name, tostring(current), suffix)
end

--- Change `option` of `chat` as picked: an on/off setting flips, a choice is
--- picked with vim.ui.select.
local function change(chat, option)
  if option.type == "boolean" then
    M.config(chat, option.id, not option.current)
  elseif option.type == "select" then
    vim.ui.select(M.choices(chat, option), {
      prompt = option.name,
      format_item = function(choice)
        return choice.value == option.current and choice.name .. " (current)" or choice.name
      end,
    }, function(choice)
      if choice then
        M.config(chat, option.id, choice.value)
      end
    end)
  else
    util.notify(("cannot change %s (a %s setting)"):format(option.name, option.type))
  end
end

--- Change a setting of `chat`: with `id` and `value` directly; with `id` alone, as
--- if that setting were picked; else with pickers. Options of a type this client
--- does not know are listed but not editable.
function M.config(chat, id, value)
  if id and value ~= nil then
    host.notify("set_config", { chat = chat.id, id = id, value = value })
    return
  end
  local options = chat.status.config_options or {}
  local refusal = registry.unstarted(chat) or (#options == 0 and "the agent offers no settings")
  if refusal then
    util.notify(refusal, "warn")
    return
  end
  if id then
    for _, option in ipairs(options) do
      if option.id == id then
        change(chat, option)
        return
      end
    end
    -- As Python says it of `:AcpConfig {id} {value}` (client/app/_settings.py).
    local ids = vim.tbl_map(function(option)
      return option.id
    end, options)
    util.user_error(("no setting '%s' (offered: %s)"):format(id, table.concat(ids, ", ")))
  end
  vim.ui.select(options, { prompt = "Setting", format_item = option_label }, function(option)
    if option then
      change(chat, option)
    end
  end)
end

--- The setting of `category` ("mode", "model") among the chat's settings.
function M.setting(chat, category)
  for _, option in ipairs(chat.status.config_options or {}) do
    if option.category == category then
      return option
    end
  end
end

--- Switch `chat`'s mode or model (`category`) to `value` (an id or a name), else
--- pick one with vim.ui.select.
function M.choose(chat, category, value)
  if value then
    host.notify("set_" .. category, { chat = chat.id, value = value })
    return
  end
  local refusal = registry.unstarted(chat)
  local option = not refusal and M.setting(chat, category)
  local choices = option and M.choices(chat, option) or {}
  refusal = refusal or (#choices == 0 and ("the agent offers no %s to choose"):format(category))
  if refusal then
    util.notify(refusal, "warn")
    return
  end
  vim.ui.select(choices, {
    prompt = option.name,
    format_item = function(choice)
      return choice.name .. (choice.value == option.current and " (current)" or "")
    end,
  }, function(choice)
    if choice then
      M.choose(chat, category, choice.value)
    end
  end)
end

--- :AcpConfig completion: the ids of the current chat's settings, then the
--- values of the setting named (`args`: the arguments typed before).
---@param args string[]
---@return string[]
function M.complete(args)
  local chat = registry.get()
  local items = {}
  for _, option in ipairs(chat and chat.status.config_options or {}) do
    if #args == 0 then
      table.insert(items, option.id)
    elseif #args == 1 and option.id == args[1] then
      items = option.type == "boolean" and { "on", "off" } or {}
      for _, choice in ipairs(M.choices(chat, option)) do
        table.insert(items, choice.value)
      end
    end
  end
  return items
end

---@type table<string, string[]> by agent: the session ids of its last list
local listed = {}
local group = vim.api.nvim_create_augroup("acp.sessions", { clear = true })
vim.api.nvim_create_autocmd("User", {
  pattern = "AcpSessionList",
  group = group,
  callback = function(ev)
    listed[ev.data.agent] = vim.tbl_map(function(s)
      return s.session_id
    end, ev.data.sessions or {})
  end,
})
vim.api.nvim_create_autocmd("User", {
  pattern = "AcpSessionDeleted",
  group = group,
  callback = function(ev)
    local ids = listed[ev.data.agent]
    if ids then -- none listed yet: the next <Tab> asks for the list
      listed[ev.data.agent] = vim.tbl_filter(function(id)
        return id ~= ev.data.session_id
      end, ids)
    end
  end,
})

--- Session ids of the current chat's agent (:AcpResume completion): its open
--- chats' and those of its last list. No list yet: one is asked for, for the next
--- <Tab>.
---@return string[]
function M.complete_ids()
  local chat = registry.get()
  if not chat then
    return {}
  end
  local agent = chat.status.agent
  if not listed[agent] and host.running() then
    -- Quiet: a chat without a running agent tells the user nothing while they type.
    host.notify("list_sessions", { chat = chat.id, quiet = true })
  end
  local ids = vim.deepcopy(listed[agent] or {})
  for _, open in pairs(registry.chats) do
    local id = open.status.session_id
    if open.status.agent == agent and id and not vim.tbl_contains(ids, id) then
      table.insert(ids, id)
    end
  end
  return ids
end

--- A listed session's title, else (none, or only white space) its id.
---@param s table a session of an AcpSessionList event
local function title_of(s)
  local title = type(s.title) == "string" and util.one_line(s.title) or ""
  return title ~= "" and title or s.session_id
end

--- Resume session `s` of `data`'s list (see M.resume).
local function resume_listed(chat, data, s)
  -- With the roots the agent lists it with: a resume that does not name them
  -- again takes them away (one that is no directory any more would refuse it).
  local roots = vim.tbl_filter(function(root)
    return vim.fn.isdirectory(root) == 1
  end, s.roots ~= vim.NIL and s.roots or {})
  M.resume(data.agent, s.session_id, chat, roots)
end

--- Offer the sessions of `chat`'s AcpSessionList event; the one picked opens in a
--- new chat in the same directory, or, where the agent deletes sessions, is
--- resumed or deleted as the user then picks (decision 0106).
local function pick(chat, data)
  local sessions = data.sessions or {}
  if #sessions == 0 then
    util.notify("the agent has no saved sessions", "info")
    return
  end
  vim.ui.select(sessions, {
    prompt = data.can_delete and "Resume or delete a session" or "Resume session",
    format_item = function(s)
      local parts = { title_of(s), data.agent }
      if s.cwd ~= vim.NIL and s.cwd then
        table.insert(parts, vim.fn.fnamemodify(s.cwd, ":~"))
      end
      if s.updated ~= vim.NIL and s.updated then
        table.insert(parts, util.age(s.updated))
      end
      if s.turns ~= vim.NIL and s.turns then
        table.insert(parts, s.turns == 1 and "1 turn" or (s.turns .. " turns"))
      end
      local open = M.chat_of(data.agent, s.session_id)
      if open then
        table.insert(parts, ("open in chat #%d"):format(open.id))
      end
      return table.concat(parts, " · ")
    end,
  }, function(s)
    if not s then
      return
    end
    -- A session a chat here is on is only shown: that chat goes on in it.
    if not data.can_delete or M.chat_of(data.agent, s.session_id) then
      resume_listed(chat, data, s)
      return
    end
    vim.ui.select({ "resume", "delete" }, { prompt = title_of(s) }, function(action)
      if action == "resume" then
        resume_listed(chat, data, s)
      elseif action == "delete" then
        M.delete(chat, s.session_id)
      end
    end)
  end)
end

-- The autocmd waiting for each chat's session list: a list that fails never
-- comes, so the next request replaces the wait instead of adding a second picker.
local waiting = {}

--- List the agent's sessions and resume the one picked in a new chat.
function M.sessions(chat)
  if waiting[chat.id] then
    pcall(vim.api.nvim_del_autocmd, waiting[chat.id])
  end
  waiting[chat.id] = vim.api.nvim_create_autocmd("User", {
    pattern = "AcpSessionList",
    callback = function(ev)
      if ev.data.chat ~= chat.id then
        return
      end
      waiting[chat.id] = nil
      -- Not inside the batch that brought the list: the default vim.ui.select waits
      -- there for the user, and Neovim would answer nothing else meanwhile.
      vim.schedule(function()
        pick(chat, ev.data)
      end)
      return true -- answered: this autocmd is done
    end,
  })
  host.notify("list_sessions", { chat = chat.id })
end

--- The open chat on session `session_id` of `agent`, if any.
---@return acp.Chat?
function M.chat_of(agent, session_id)
  for _, chat in pairs(registry.chats) do
    if registry.valid(chat) and chat.status.agent == agent and chat.status.session_id == session_id then
      return chat
    end
  end
end

--- Show the chat on session `session_id` of `agent`; none: open a new chat on
--- it, its history replayed, where chat `from` works (the one the sessions were
--- listed for: in its directory, in its worktree too) with the workspace `roots`
--- (those the agent listed it with).
---@param from acp.Chat
---@param roots string[]?
function M.resume(agent, session_id, from, roots)
  local open = M.chat_of(agent, session_id)
  if open then
    chats.switch(open)
    return open
  end
  roots = roots and #roots > 0 and roots or nil
  local cwd = registry.cwd(from)
  return chats.open({ agent = agent, new = true, session_id = session_id, cwd = cwd, roots = roots, within = from })
end

function M.delete(chat, session_id)
  host.notify("delete_session", { chat = chat.id, session_id = session_id })
end

--- Completion of :AcpLogin: the ids of the login methods the current chat's agent
--- offers.
---@return string[]
function M.complete_logins()
  local chat = registry.get()
  return vim.tbl_map(function(m)
    return m.id
  end, chat and chat.status.login_methods or {})
end

--- Log in to `chat`'s agent with `method` (an id), else the only one, else a pick.
--- A method that takes variables asks for their values without showing them; the
--- values go only into the agent's environment.
function M.login(chat, method)
  local methods = chat.status.login_methods or {}
  local function run(chosen)
    local values = nil
    if chosen.kind == "env" then
      values = {}
      for _, var in ipairs(chosen.vars or {}) do
        local value = vim.fn.inputsecret(var .. ": ")
        if value == "" then
          return
        end
        values[var] = value
      end
    end
    host.notify("login", { chat = chat.id, method = chosen.id, values = values })
  end
  if method or #methods <= 1 then
    local chosen = { id = method } -- an id the agent does not offer: the Python side says so
    for _, m in ipairs(methods) do
      if m.id == method or not method then
        chosen = m
        break
      end
    end
    run(chosen)
    return
  end
  vim.ui.select(methods, {
    prompt = "Log in with",
    format_item = function(m)
      return ("%s (%s)"):format(m.name, m.kind)
    end,
  }, function(chosen)
    if chosen then
      run(chosen)
    end
  end)
end

function M.logout(chat)
  host.notify("logout", { chat = chat.id })
end

return M
