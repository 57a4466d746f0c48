-- Telling the user about a chat they may not be looking at: its turn ended, it
-- failed, it needs an answer. The `notify` option decides: "hidden" (a chat not
-- shown in the current tab page), "always", or false (never).
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local layout = require("acp.chat.layout")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

--- Whether the user is to be told about `chat` now.
---@param chat acp.Chat
function M.wanted(chat)
  local when = config.options.notify
  return when == "always" or (when == "hidden" and not layout.shown(chat))
end

--- Tell the user `what` about `chat` (named first), when the option wants it.
---@param chat acp.Chat
---@param what string
---@param level? "error"|"warn"|"info"
function M.announce(chat, what, level)
  if M.wanted(chat) then
    util.notify(("%s %s"):format(registry.speaker(chat), what), level or "info")
  end
end

--- After a render batch set `status` on `chat` (whose state was `before`): a turn
--- that ended or a chat that failed is announced. A failure of the Python side is
--- not: the host says so once for every chat.
---@param chat acp.Chat
---@param before string
---@param status table
function M.after(chat, before, status)
  if before == "running" and status.state == "ready" and status.stop_reason then
    M.announce(chat, ("ended its turn (%s)"):format(status.stop_reason))
  elseif status.state == "error" and before ~= "error" and not chat.host_failed then
    M.announce(chat, ("failed: %s"):format(status.error or "see its transcript"), "error")
  end
end

return M
