-- Where a chat's agent works (|acp-workspaces|): Python owns it and pushes it in
-- the chat's status (cwd, roots, worktree). Here: what the winbar and the chat
-- list show of it, :AcpRoot, and asking before closing a worktree chat removes a
-- worktree that holds changes not yet brought into the user's files.
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local registry = require("acp.chat.registry")
local state = require("acp.review.state")
local util = require("acp.util")

local M = {}

--- The worktree of `chat` ({path, branch, project}), or nil.
---@param chat acp.Chat
---@return {path: string, branch: string, project: string}?
function M.worktree(chat)
  local worktree = chat.status.worktree
  return type(worktree) == "table" and worktree or nil
end

--- Whether `chat`'s worktree was removed outside Neovim (its directory gone, as
--- the close counts it): the chat can only be closed, and reopened from the history.
---@param chat acp.Chat
---@return boolean
function M.gone(chat)
  local worktree = M.worktree(chat)
  return worktree ~= nil and vim.fn.isdirectory(worktree.path) == 0
end

--- How many hunks wait in `chat`'s worktree: neither brought into the user's files
--- nor dropped (the review's files that have a `source` in the worktree). None once
--- it is gone: they went with it.
---@param chat acp.Chat
---@return integer
function M.waiting(chat)
  if M.gone(chat) then
    return 0
  end
  return state.open_hunks(chat.id, function(file)
    return file.source
  end)
end

--- `path` as a file name of `chat`: `~` and variables expanded, a relative one in
--- the chat's directory (not Neovim's: chats work in directories of their own).
---@param chat acp.Chat
---@param path string
---@return string
function M.absolute(chat, path)
  path = vim.fs.normalize(path)
  if not vim.startswith(path, "/") then
    path = vim.fs.normalize(vim.fs.joinpath(registry.cwd(chat), path))
  end
  return path
end

--- `path` relative to directory `dir` inside it, else with `~` for the home directory.
local function shortened(path, dir)
  if vim.startswith(path, dir .. "/") then
    return path:sub(#dir + 2)
  end
  return vim.fn.fnamemodify(path, ":~")
end

--- How to mention the file `path` in `chat`'s input: relative to the chat's
--- directory inside it, else with `~` for the home directory. In a worktree chat
--- a file of your project is its copy in the worktree, which the agent works on
--- (named by your path, it would edit yours, outside the worktree).
---@param chat acp.Chat
---@param path string
---@return string
function M.mention(chat, path)
  path = vim.fs.normalize(path)
  local worktree = M.worktree(chat)
  local theirs = worktree and vim.startswith(path, worktree.path .. "/")
  if worktree and not theirs and vim.startswith(path, worktree.project .. "/") then
    path = worktree.path .. path:sub(#worktree.project + 1)
  end
  return shortened(path, registry.cwd(chat))
end

--- Where `chat` works, for a window whose directory is `cwd`: nil when it is that
--- directory, or a worktree (whose branch names it); else relative to `cwd` inside
--- it, else with `~`. Two chats of one agent in different directories differ by it.
---@param chat acp.Chat
---@param cwd string
---@return string?
function M.directory(chat, cwd)
  local dir = registry.cwd(chat)
  if not dir or dir == cwd or M.worktree(chat) then
    return nil
  end
  return shortened(dir, cwd)
end

--- What the winbar shows of the workspace: the worktree's branch and the roots' names.
---@param chat acp.Chat
---@return string[]
function M.label(chat)
  local parts = {}
  local worktree = M.worktree(chat)
  if worktree then
    table.insert(parts, "worktree " .. worktree.branch .. (M.gone(chat) and " gone" or ""))
  end
  local roots = chat.status.roots or {}
  if #roots > 0 then
    table.insert(parts, "+ " .. table.concat(vim.tbl_map(vim.fs.basename, roots), ", "))
  end
  return parts
end

--- :AcpRoot add|remove [dir]: add a workspace root to the current chat (default:
--- Neovim's directory), or remove one. A relative `dir` is Neovim's directory's.
---@param action string
---@param dir? string
function M.root(action, dir)
  if action ~= "add" and action ~= "remove" then
    util.user_error(":AcpRoot takes add or remove, then a directory")
  end
  local chat = registry.get()
  if not chat then
    util.user_error("no chat is open (:AcpChat)")
  end
  local path = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(dir and dir ~= "" and dir or "."), ":p"))
  host.notify("root", { chat = chat.id, action = action, path = path })
end

--- Completion of :AcpRoot after `args`: the action, then directories (to remove:
--- the chat's roots).
---@param args string[]
---@return string[]|string
function M.complete(args)
  if #args == 0 then
    return { "add", "remove" }
  end
  if #args > 1 then -- one directory at a time
    return {}
  end
  local chat = registry.get()
  if args[1] == "remove" and chat then
    return chat.status.roots or {}
  end
  return "dir"
end

--- Whether another open chat works in `chat`'s worktree (a fork, a hand-over).
---@param chat acp.Chat
---@param worktree {path: string}
local function shared(chat, worktree)
  for id, other in pairs(registry.chats) do
    local theirs = id ~= chat.id and registry.valid(other) and M.worktree(other)
    if theirs and theirs.path == worktree.path then
      return true
    end
  end
  return false
end

--- Ask whether to remove `worktree` (and its branch) or keep it, `prompt` saying
--- what waits there; `close(keep)` runs with the answer, cancelling keeps the chat.
---@param worktree {path: string}
---@param prompt string
---@param close fun(keep?: boolean, looked?: boolean)
local function ask(worktree, prompt, close)
  local choices = { "remove the worktree and its branch", "keep the worktree (" .. worktree.path .. ")" }
  vim.ui.select(choices, { prompt = prompt }, function(_, index)
    if index then
      close(index == 2)
    end
  end)
end

--- Before `chat` closes: while work waits in its worktree (hunks, or an execute bit
--- the agent changed alone, which no hunk lists: Python looks, with git) and no
--- other chat works there, ask whether to remove the worktree (and its branch) or
--- keep it; `close(keep, looked)` runs with the answer (nil without a question:
--- Python removes a worktree that holds no work, and keeps one another chat works
--- in; `looked`: it need not look at the execute bits again). Cancelling keeps the
--- chat open.
---@param chat acp.Chat
---@param close fun(keep?: boolean, looked?: boolean)
function M.confirm_close(chat, close)
  local worktree = M.worktree(chat)
  if not worktree or shared(chat, worktree) or not host.running() then
    return close()
  end
  -- Python words the work (hunks and execute bits, both named where both wait), as
  -- it does for a worktree kept without asking. Where it could not look, it looks
  -- again as the chat closes: what waits keeps the worktree, named.
  host.ask("worktree_work", { chat = chat.id }, function(what, error)
    if error or what == "" then
      return close(nil, not error)
    end
    ask(worktree, ("%s in the worktree of %s"):format(what, registry.title(chat)), close)
  end)
end

return M
