-- The open chats, by id, and the current one. A leaf: the modules that act on
-- "the chat" (pickers, completion, prompts, the review's API) read it instead of
-- acp.chat, which requires them. acp.chat adds and removes the chats.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api

---@class acp.Chat
---@field id integer
---@field transcript integer buffer
---@field input integer buffer
---@field blocks acp.Blocks
---@field status table
---@field prompts? {block: string, id: string}[] pending permission prompts (acp.chat.permission)
---@field followed? table<string, string> last location followed per tool call (acp.chat.tools)
---@field opened {agent?: string, session_id?: string, fork?: integer, history?: integer, handoff?: integer, cwd_given?: boolean, roots?: string[], worktree?: boolean, within?: integer, took_over?: integer} what the chat was opened with (took_over: the chat whose windows it took)
---@field host_failed? boolean the Python side failed under this chat (acp.chat.fail)
---@field sent_starting? boolean a prompt was sent to it while it started (acp.chat withdraw)
---@field unshown? string[] prompts sent that the Python side has not shown yet (acp.chat.sent)
---@field sends? integer the prompts sent so far (acp.chat.sent)
---@field prompt_blocks? table<string, integer> the user blocks drawn, each by the sends before its first draw (acp.chat.sent)
---@field failures? integer failures shown in the transcript
---@field layout? string the `chat.position` its windows were opened with (acp.chat.layout)
---@field closed_at_end? boolean its last transcript window closed at the end: a new one opens there
---@field closed_top? integer the top line of its last transcript window as it closed: a new one shows it there
---@field cwd string the directory the chat was opened in, a reopened one's the stored chat's (its session's is status.cwd)
---@field active_at integer when Python last drew in it (os.time(); the chat picker)
---@field history? table the input's prompt history (acp.chat.prompt_history)
---@field editing? integer the input holds that turn's prompt again (|:AcpEdit|): sent, it rewinds there
---@field elicits? table[] the agent's questions waiting to be asked (acp.chat.elicit)
---@field eliciting? boolean one of them is being asked
---@field queue_mark? integer the extmark drawing the queued prompts (acp.chat.queue)
---@field given_back? table<integer, integer> queued prompts given back to the input: their rank by extmark (acp.chat.prompt_history)

---@type table<integer, acp.Chat>
M.chats = {}
---@type integer? the chat :AcpChat focuses
M.current = nil

--- Whether both buffers of `chat` still exist.
---@param chat? acp.Chat
function M.valid(chat)
  return chat ~= nil and api.nvim_buf_is_valid(chat.transcript) and api.nvim_buf_is_valid(chat.input)
end

--- The chat whose transcript or input is `buf`.
---@return acp.Chat?
function M.of_buffer(buf)
  for _, chat in pairs(M.chats) do
    if chat.transcript == buf or chat.input == buf then
      return chat
    end
  end
end

--- The chat of the current buffer, else the last opened one.
---@return acp.Chat?
function M.get()
  local own = M.of_buffer(api.nvim_get_current_buf())
  if own then
    return own
  end
  local chat = M.current and M.chats[M.current]
  return M.valid(chat) and chat or nil
end

--- What `chat`'s input holds, lines joined; nil when it holds nothing but blanks
--- (or is gone).
---@param chat acp.Chat
---@return string?
function M.typed(chat)
  if not api.nvim_buf_is_valid(chat.input) then
    return nil
  end
  local text = table.concat(api.nvim_buf_get_lines(chat.input, 0, -1, false), "\n")
  return text:find("%S") and text or nil
end

--- The open chat on stored chat `id` of the history (|acp-chat-history|): one
--- that keeps it, or one opened on it.
---@param id integer
---@return acp.Chat?
function M.of_history(id)
  for _, chat in pairs(M.chats) do
    if M.valid(chat) and (chat.status.history == id or chat.opened.history == id) then
      return chat
    end
  end
end

--- The directory `chat`'s agent works in (for a worktree chat, in its worktree):
--- the base of its `@` mentions.
---@param chat acp.Chat
---@return string
function M.cwd(chat)
  return chat.status.cwd or chat.cwd
end

--- The directories of `chat`: its own, then its workspace roots (|acp-workspaces|).
---@param chat acp.Chat
---@return string[]
function M.dirs(chat)
  return { M.cwd(chat), unpack(chat.status.roots or {}) }
end

--- The chat's name for the user: the one given with :AcpChats or :AcpHistory
--- (status.name), else the session's title, else its agent and id.
---@param chat acp.Chat
---@return string
function M.title(chat)
  local s = chat.status
  return s.name or s.title or ("%s #%d"):format(s.agent or "?", chat.id)
end

--- Why what asks `chat`'s agent cannot be done now, or nil: it is still starting,
--- or the chat has no agent (a chat reopened from the history before its first
--- prompt, one whose start failed or whose agent exited). In the words the Python
--- side says it in (AgentPool.unavailable).
---@param chat acp.Chat
---@return string?
function M.unstarted(chat)
  local state = chat.status.state
  if state == "starting" then
    return require("acp.defaults").starting
  elseif not chat.status.connected and (state == "ready" or state == "error") then
    return require("acp.defaults").no_agent
  end
end

--- Who speaks in a notice about `chat`: its agent, and in which chat
--- (`demo in "refactor"`, `demo in chat #2`).
---@param chat acp.Chat
---@return string
function M.speaker(chat)
  local named = chat.status.name or chat.status.title
  return ("%s in %s"):format(chat.status.agent or "?", named and ('"%s"'):format(named) or ("chat #" .. chat.id))
end

return M
