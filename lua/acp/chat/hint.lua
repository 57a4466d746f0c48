-- The first screen of a new chat: what to type and where help is, as virtual lines
-- over the empty transcript (never transcript text: the history, a copy or an export
-- of the chat holds none of it), wrapped to the chat's window. The keys named are the
-- user's (|acp-keys|); a key turned off is not named. The first block drawn takes it
-- away.
if jit then jit.off(true, true) end -- decision 0068
local keys = require("acp.keys")
local wrapped = require("acp.chat.wrapped")

local M = {}
local api = vim.api
local ns = api.nvim_create_namespace("acp.first_screen")

--- `text` with the typed form of key `name` of `where` put in for `%s`; nil when
--- the user turned the key off.
local function with_key(where, name, text)
  local lhs = keys.lhs(where, name)
  return lhs and text:format(keys.typed(lhs)) or nil
end

--- The hint's paragraphs.
local function paragraphs()
  local send = vim.tbl_filter(function(part)
    return part ~= nil
  end, {
    with_key("input", "send", "%s (Normal mode)"),
    with_key("input", "send_insert", "%s (Insert mode too)"),
  })
  local chat = vim.tbl_filter(function(part)
    return part ~= nil
  end, {
    with_key("chat", "hide", "%s hides the chat"),
    with_key("chat", "cancel", "%s cancels a turn"),
    with_key("chat", "help", "%s lists the chat's keys"),
  })
  return {
    #send > 0 and ("Type your prompt in the input below; send it with %s."):format(table.concat(send, " or "))
      or "Type your prompt in the input below; send it with :AcpSend.",
    "@ attaches a file, a directory, the selection, diagnostics… (completion offers them).",
    "/ runs one of the agent's commands" .. (#chat > 0 and "; " .. table.concat(chat, ", ") or "") .. ".",
    ":help acp for everything else.",
  }
end

--- Show the hint over `chat`'s empty transcript.
---@param chat acp.Chat
function M.show(chat)
  wrapped.set(chat.transcript, ns, 0, vim.tbl_map(wrapped.words, paragraphs()), "AcpHint")
end

--- Take the hint away (the transcript has its first block).
---@param chat acp.Chat
function M.clear(chat)
  wrapped.clear(chat.transcript, ns)
end

return M
