-- acp.nvim public API. Everything else under lua/acp is private.
local M = {}

local function chat_module()
  return require("acp.chat")
end

--- Configure the plugin (options are validated by the Python side when it starts).
---@param opts? acp.Options
function M.setup(opts)
  if opts ~= nil and type(opts) ~= "table" then
    require("acp.util").user_error("setup() takes a table of options")
  end
  require("acp.config").set(opts)
  require("acp.highlights").setup()
  require("acp.host").reconfigure()
end

local function require_chat()
  local chat = chat_module().get()
  if not chat then
    require("acp.util").user_error("no chat is open (:AcpChat)")
  end
  return chat
end

--- Open (or focus) the chat; `new` starts a new session.
---@param opts? {agent?: string, new?: boolean}
---@return integer chat id
function M.open(opts)
  -- The Python host starts first, so its start-up overlaps drawing the chat.
  require("acp.host").ensure()
  require("acp.highlights").setup()
  M._ensure_autocmds()
  return chat_module().open(opts or {}).id
end

--- Hide the current chat's windows when the current tab page shows them, else
--- show the chat (opening one when there is none), like |:AcpChat|.
function M.toggle()
  local chat = chat_module().get()
  local layout = require("acp.layout")
  if chat and layout.shown(chat) then
    layout.hide(chat)
  else
    M.open()
  end
end

--- Send a message to the current chat's agent.
---@param text string
function M.send(text)
  chat_module().send(require_chat(), text)
end

--- Cancel the current turn (the turn ends with stop reason "cancelled").
function M.cancel()
  chat_module().cancel(require_chat())
end

--- Close the current chat; its agent stops when no other chat uses it.
function M.close()
  local chat = chat_module().get()
  if chat then
    chat_module().close(chat)
  end
end

--- Pick an answer for the pending permission request (the one at the cursor, else
--- the current chat's oldest, else any chat's) with vim.ui.select.
function M.permission()
  require("acp.prompt").open()
end

--- Open the review of the agent's changes (latest turn first, then earlier turns).
function M.review()
  require("acp.highlights").setup()
  require("acp.review").open()
end

--- Files and hunks the agent changed in the current chat's latest turn (every
--- turn with `{all = true}`), as plain tables: see |acp.changes()|.
---@param opts? {all?: boolean}
---@return acp.ReviewFile[]
function M.changes(opts)
  return require("acp.review").changes(opts)
end

--- Accept the agent's changes: one hunk of `file`, all of `file`, or (no
--- arguments) everything. Accepting leaves the text as the agent made it.
---@param file? string
---@param hunk? integer hunk id from |acp.changes()|
function M.accept(file, hunk)
  local review = require("acp.review")
  review.decide(review.chat_id(), "accept", file, hunk)
end

--- Reject the agent's changes (same arguments as |acp.accept()|): the hunk's
--- previous text comes back in the buffer and on disk.
---@param file? string
---@param hunk? integer
function M.reject(file, hunk)
  local review = require("acp.review")
  review.decide(review.chat_id(), "reject", file, hunk)
end

--- Change a session setting (ACP v2 config options: mode, model, thinking, ...).
--- Without arguments, pick the setting and its value with vim.ui.select.
---@param id? string the setting's id (`configId`)
---@param value? string|boolean
function M.config(id, value)
  require("acp.session").config(require_chat(), id, value)
end

--- Pick one of the agent's saved sessions and resume it in a new chat (ACP v2).
function M.sessions()
  require("acp.session").sessions(require_chat())
end

--- Resume session `session_id` of the current chat's agent in a new chat; its
--- history is replayed into the transcript (ACP v2).
---@param session_id string
---@return integer chat id
function M.resume(session_id)
  return require("acp.session").resume(require_chat().status.agent, session_id).id
end

--- Delete one of the agent's saved sessions (when the agent offers it).
---@param session_id string
function M.delete_session(session_id)
  require("acp.session").delete(require_chat(), session_id)
end

--- Log in to the current chat's agent (`method`: a method id; default the first).
---@param method? string
function M.login(method)
  require("acp.session").login(require_chat(), method)
end

--- Log out of the current chat's agent.
function M.logout()
  require("acp.session").logout(require_chat())
end

---@class acp.Status
---@field chat integer
---@field agent string
---@field session_id? string
---@field protocol_version? integer
---@field state "starting"|"ready"|"running"|"error"|"closed"
---@field stop_reason? string
---@field turn_state? "running"|"requires_action"|"idle"|string the agent's report (ACP v2)
---@field mode? string
---@field model? string
---@field thought_level? string
---@field config_options? table[] the session's settings: {id, name, type, category, current, choices}
---@field transcript_buf integer
---@field input_buf integer

--- State of the current chat, or nil when none is open.
---@return acp.Status?
function M.status()
  local chat = chat_module().get()
  if not chat then
    return nil
  end
  local s = chat.status
  return {
    chat = chat.id,
    agent = s.agent,
    agent_title = s.agent_title,
    session_id = s.session_id,
    protocol_version = s.protocol_version,
    state = s.state,
    stop_reason = s.stop_reason,
    error = s.error,
    mode = s.mode,
    model = s.model,
    thought_level = s.thought_level,
    turn_state = s.turn_state,
    config_options = s.config_options,
    transcript_buf = chat.transcript,
    input_buf = chat.input,
  }
end

local autocmds = false
function M._ensure_autocmds()
  if autocmds then
    return
  end
  autocmds = true
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("acp.shutdown", { clear = true }),
    callback = function()
      require("acp.host").stop()
    end,
  })
end

return M
