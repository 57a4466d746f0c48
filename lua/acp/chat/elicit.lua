-- Elicitation: the agent asks for a few values (a form from its requestedSchema)
-- or to open a page (url). Asked with vim.ui.select / vim.ui.input, one question at
-- a time per chat; a hidden chat notifies and asks when it is shown again. The
-- answer (accept with the values, decline, or cancel when dismissed) goes back to
-- Python (services/elicitations.py).
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local layout = require("acp.chat.layout")
local notice = require("acp.chat.notice")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

--- vim.ui.select / vim.ui.input inside a coroutine: the answer, whenever it comes
--- (a scheduled resume, since a picker may answer before it returns).
local function ui(fn, ...)
  local co = coroutine.running()
  local args = { ... }
  table.insert(args, function(...)
    local answer = { ... }
    vim.schedule(function()
      coroutine.resume(co, unpack(answer))
    end)
  end)
  fn(unpack(args))
  return coroutine.yield()
end

local function select(items, opts)
  return ui(vim.ui.select, items, opts)
end

local function input(opts)
  return ui(vim.ui.input, opts)
end

--- `text` typed for field `f` as its value, or nil and what is wrong with it.
local function parse(f, text)
  if f.type == "number" or f.type == "integer" then
    local n = tonumber(text)
    if not n or (f.type == "integer" and n ~= math.floor(n)) then
      return nil, ("%s: %s expected"):format(f.title, f.type == "integer" and "a whole number" or "a number")
    end
    if (f.minimum ~= vim.NIL and f.minimum and n < f.minimum) or (f.maximum ~= vim.NIL and f.maximum and n > f.maximum) then
      return nil, ("%s: between %s and %s"):format(f.title, tostring(f.minimum or "…"), tostring(f.maximum or "…"))
    end
    return n
  elseif f.type == "array" then
    local allowed, values = {}, {}
    for _, choice in ipairs(f.choices ~= vim.NIL and f.choices or {}) do
      allowed[choice[1]] = true
    end
    for _, part in ipairs(vim.split(text, ",", { trimempty = true })) do
      local value = vim.trim(part)
      if not allowed[value] then
        return nil, ("%s: %q is not one of the choices"):format(f.title, value)
      end
      table.insert(values, value)
    end
    return values
  end
  return text
end

--- Ask one field; returns its value (nil: left empty), and true when dismissed.
local function ask_field(f)
  local description = f.description ~= vim.NIL and f.description or nil
  local label = f.title .. (f.required and " (required)" or "") .. (description and (" — " .. description) or "")
  local default = f.default ~= vim.NIL and f.default or nil
  local choices = f.choices ~= vim.NIL and f.choices or nil
  if f.type == "boolean" then
    local item = select({ "yes", "no" }, { prompt = label })
    return item and item == "yes", item == nil
  elseif choices and f.type ~= "array" then
    local item = select(choices, {
      prompt = label,
      format_item = function(choice)
        return choice[2]
      end,
    })
    return item and item[1], item == nil
  end
  if f.type == "array" then
    local names = vim.tbl_map(function(choice)
      return choice[1]
    end, choices or {})
    label = ("%s [%s, separated by commas]"):format(label, table.concat(names, ", "))
    default = default and table.concat(default, ", ")
  end
  while true do
    local text = input({ prompt = label .. ": ", default = default ~= nil and tostring(default) or nil })
    if text == nil then
      return nil, true
    end
    if text == "" then
      if not f.required then
        return nil, false
      end
      util.notify(f.title .. " is required", "warn")
    else
      local value, problem = parse(f, text)
      if value ~= nil then
        return value, false
      end
      util.notify(problem, "warn")
    end
  end
end

local function show(value)
  return type(value) == "table" and table.concat(value, ", ") or tostring(value)
end

--- Ask the form's fields, then let the user review: send, edit again or decline.
---@return string action, table? content
local function form(name, op)
  local start = select({ "answer", "decline" }, { prompt = ("%s asks: %s"):format(name, op.message) })
  if start ~= "answer" then
    return start == "decline" and "decline" or "cancel"
  end
  while true do
    local content = {}
    for _, f in ipairs(op.fields) do
      local value, dismissed = ask_field(f)
      if dismissed then
        return "cancel"
      end
      content[f.name] = value
    end
    local summary = vim.tbl_map(function(f)
      return ("%s = %s"):format(f.title, content[f.name] == nil and "—" or show(content[f.name]))
    end, op.fields)
    local prompt = ("%s: send %s?"):format(name, table.concat(summary, "; "))
    local action = select({ "send", "edit again", "decline" }, { prompt = prompt })
    if action == "send" then
      return "accept", content
    elseif action ~= "edit again" then
      return action == "decline" and "decline" or "cancel"
    end
  end
end

--- Show the url and its host, and open it only when the user says so.
local function url(name, op)
  if not op.url:match("^https?://") then
    util.notify(("%s asks to open %s: not a web address, declined"):format(name, op.url), "warn")
    return "decline"
  end
  -- A punycode label can spell a look-alike of a known host.
  local warning = op.host:find("xn--", 1, true) and ", an internationalized name: check it" or ""
  local prompt = ("%s asks: %s\nOpen %s (host %s%s)?"):format(name, op.message, op.url, op.host, warning)
  local action = select({ "open " .. op.host, "decline" }, { prompt = prompt })
  if action == nil then
    return "cancel"
  elseif action == "decline" then
    return "decline"
  end
  vim.ui.open(op.url)
  return "accept"
end

local function next_one(chat)
  local op = chat.elicits and chat.elicits[1]
  if not op or chat.eliciting then
    return
  end
  chat.eliciting = true
  coroutine.wrap(function()
    local name = registry.speaker(chat)
    local action, content = (op.mode == "url" and url or form)(name, op)
    table.remove(chat.elicits, 1)
    chat.eliciting = nil
    host.notify("elicit", { chat = chat.id, request = op.id, action = action, content = content })
    M.resume(chat)
  end)()
end

--- An `elicit` render op: ask now where the chat is shown, else say so and ask
--- when it is shown again.
function M.add(chat, op)
  chat.elicits = chat.elicits or {}
  table.insert(chat.elicits, op)
  if layout.shown(chat) then
    -- Asked once the batch that brought it is applied: the default vim.ui.select
    -- waits for the user, and inside a batch Neovim would answer nothing else.
    vim.schedule(function()
      next_one(chat)
    end)
  else
    notice.announce(chat, ("asks: %s (open the chat to answer)"):format(op.message), "warn")
  end
end

--- The chat is shown: ask what waits.
function M.resume(chat)
  if layout.shown(chat) then
    next_one(chat)
  end
end

--- The agent's request was answered `cancel` (its turn ended or was cancelled):
--- not asked any more, unless it is being asked now.
function M.gone(chat, id)
  for i, op in ipairs(chat.elicits or {}) do
    if op.id == id and not (i == 1 and chat.eliciting) then
      table.remove(chat.elicits, i)
      return
    end
  end
end

--- The Python side is gone: what waited cannot be answered any more.
function M.forget(chat)
  chat.elicits = nil
end

return M
