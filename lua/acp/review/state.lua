-- The review state Python pushes whole for each chat ({turn, files}: the agent's
-- changes and their hunks), and the user's decisions sent back. The review buffer,
-- the marks in edited buffers and :AcpDiff all draw from it.
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

---@class acp.ReviewHunk
---@field id integer
---@field status "pending"|"accepted"|"rejected"|"conflict"|"reverted"
---@field base_start integer 0-based
---@field base_count integer
---@field new_start integer 0-based row in the file now
---@field new_count integer
---@field header string
---@field preview string[] "-" and "+" lines
---@field proposed? string[] the agent's lines of a conflict

---@class acp.ReviewFile
---@field path string
---@field source? string a worktree chat's: the worktree's copy, where the hunks wait
---@field kind "write"|"disk"|"patch"
---@field turn integer
---@field created boolean
---@field deleted boolean
---@field open boolean
---@field hunks acp.ReviewHunk[] none for a file with no text (`binary`)
---@field binary? acp.ReviewBinary

--- A file with no text, reviewed as a whole (decision 0099).
---@class acp.ReviewBinary
---@field status "pending"|"accepted"|"rejected"
---@field size? integer bytes now (nil: deleted)
---@field before_size? integer bytes before the turn (nil: unknown or no file)
---@field restorable boolean whether a reject can put it back as it was
---@field about string "binary, 2.1 KB"

---@type table<integer, {turn: integer, files: acp.ReviewFile[]}> by chat id
M.by_chat = {}

--- Whether a hunk still waits for a decision.
---@param hunk acp.ReviewHunk
function M.is_open(hunk)
  return hunk.status == "pending" or hunk.status == "conflict"
end

--- How many hunks of chat `chat`'s review wait for a decision: of every file, or of
--- those `of_file` keeps.
---@param chat integer
---@param of_file? fun(file: acp.ReviewFile): any
---@return integer
function M.open_hunks(chat, of_file)
  local review = M.by_chat[chat]
  local count = 0
  for _, file in ipairs(review and review.files or {}) do
    if (not of_file or of_file(file)) and file.binary then
      count = count + (file.binary.status == "pending" and 1 or 0) -- counts as one hunk
    elseif not of_file or of_file(file) then
      for _, hunk in ipairs(file.hunks) do
        count = count + (M.is_open(hunk) and 1 or 0)
      end
    end
  end
  return count
end

--- Take chat `chat`'s review state from Python. A closed chat's is kept only while
--- hunks of it wait for a decision (decision 0081): Python sends an empty one when
--- it lets go of it.
---@param chat integer
---@param summary {turn: integer, files: acp.ReviewFile[]}
function M.set(chat, summary)
  M.by_chat[chat] = summary
  if not registry.chats[chat] and M.open_hunks(chat) == 0 then
    M.by_chat[chat] = nil
  end
end

--- The newest closed chat whose review still has hunks waiting (see M.set).
---@return integer?
function M.closed_waiting()
  local newest
  for id in pairs(M.by_chat) do
    if not registry.chats[id] and (not newest or id > newest) then
      newest = id
    end
  end
  return newest
end

--- The chat the API acts on: the current one, else the newest with changes.
---@return integer?
function M.chat_id()
  local chat = registry.get()
  if chat then
    return chat.id
  end
  local newest
  for id in pairs(M.by_chat) do
    newest = math.max(newest or id, id)
  end
  return newest
end

--- Send a decision for chat `chat`: on hunk `hunk` of `path` in `turn`, on all of
--- `path`, or (neither) on everything. `reason`: why it is rejected, for the agent.
---@param decision "accept"|"reject"
---@param reason? string
function M.decide(chat, decision, path, hunk, turn, reason)
  if not chat then
    util.user_error("no chat has changes to review")
  end
  if hunk and not path then -- hunk ids are a file's own: every file has a hunk 1
    util.user_error("a hunk is named with its file: (file, hunk)")
  elseif path ~= nil and type(path) ~= "string" then
    util.user_error(("a file is named by its path, not %s"):format(vim.inspect(path)))
  end
  path = path and vim.fn.fnamemodify(path, ":p") or nil
  if path then
    local listed = vim.iter((M.by_chat[chat] or {}).files or {}):any(function(file)
      return file.path == path or file.source == path
    end)
    if not listed then
      util.user_error(("no agent changes to %s"):format(vim.fn.fnamemodify(path, ":~:.")))
    end
  end
  host.notify("review", {
    chat = chat,
    decision = decision,
    path = path,
    hunk = hunk,
    turn = turn,
    reason = reason,
  })
end

return M
