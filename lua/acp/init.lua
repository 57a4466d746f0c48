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
  require("acp.highlights").setup()
  M._ensure_autocmds()
  return chat_module().open(opts or {}).id
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

---@class acp.Status
---@field chat integer
---@field agent string
---@field session_id? string
---@field protocol_version? integer
---@field state "starting"|"ready"|"running"|"error"|"closed"
---@field stop_reason? string
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
