-- Going back in a chat's conversation: the pickers of |:AcpRewind| (a turn of the
-- branch shown) and |:AcpBranches| (another branch). Python owns the turns and the
-- branches (status fields `turns` and `branches`) and does the work.
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local util = require("acp.util")

local M = {}

-- The most of a prompt a branch's entry shows: it may show two.
local PROMPT_WIDTH = 40

local function short(text)
  local line = util.one_row(text)
  return vim.fn.strchars(line) > PROMPT_WIDTH and vim.fn.strcharpart(line, 0, PROMPT_WIDTH - 1) .. "…" or line
end

--- A branch in the :AcpBranches picker: where it leaves, its turns, its first
--- prompt from there and, where it went on, its newest (`first → newest`): two
--- branches leaving at the same turn with the same prompt (one regenerated)
--- differ there.
local function branch_entry(branch)
  local prompts = short(branch.prompt)
  if branch.turns > branch.leaves_at then
    prompts = prompts .. " → " .. short(branch.last_prompt)
  end
  return ("branch %d · leaves at turn %d · %d turns · %s"):format(branch.id, branch.leaves_at, branch.turns, prompts)
end

--- Rewind `chat` to before turn `turn`; without one, pick the turn.
---@param chat acp.Chat
---@param turn? integer
function M.rewind(chat, turn)
  if turn then
    host.notify("rewind", { chat = chat.id, turn = turn })
    return
  end
  local turns = chat.status.turns or {}
  if #turns == 0 then
    util.notify("no turn to rewind to in this chat", "info")
    return
  elseif chat.status.state == "starting" then
    -- The turn picked could not be rewound to (a chat without an agent starts it).
    util.notify(require("acp.chat.registry").unstarted(chat), "warn")
    return
  end
  -- Newest first, as its completion and :AcpRestore's: the turns most often taken
  -- back are the last. "turn N": a picker's own numbers are not the turns'.
  local items = {}
  for i = #turns, 1, -1 do
    table.insert(items, { turn = i, prompt = turns[i] })
  end
  vim.ui.select(items, {
    prompt = "Rewind to before turn",
    format_item = function(item)
      return ("turn %d · %s"):format(item.turn, util.one_row(item.prompt))
    end,
  }, function(item)
    if item then
      host.notify("rewind", { chat = chat.id, turn = item.turn })
    end
  end)
end

--- Completion of |:AcpRewind| and |:AcpEdit|: the turns of the current chat's
--- shown branch, newest first.
---@return string[]
function M.turns()
  local chat = require("acp.chat.registry").get()
  local words = {}
  for turn = #(chat and chat.status.turns or {}), 1, -1 do
    table.insert(words, tostring(turn))
  end
  return words
end

--- The branches of `chat` as plain tables (acp.branches()).
---@param chat acp.Chat
---@return table[]
function M.list(chat)
  return vim.deepcopy(chat.status.branches or {})
end

--- :AcpBranches: pick another branch of `chat` to show and go on in.
---@param chat acp.Chat
function M.pick(chat)
  local others = vim.tbl_filter(function(branch)
    return not branch.current
  end, M.list(chat))
  if #others == 0 then
    util.notify("this chat has no other branch (:AcpRewind makes one)", "info")
    return
  end
  vim.ui.select(others, {
    prompt = "Branches",
    format_item = branch_entry,
  }, function(branch)
    if branch then
      host.notify("branch", { chat = chat.id, branch = branch.id })
    end
  end)
end

return M
