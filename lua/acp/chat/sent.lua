-- The prompts a chat sent that the Python side has not shown yet: as a turn's (the
-- user's block), queued (the status' queue) or given back to the input. A Python
-- side that dies first never shows them: they go back to the input (acp.chat's
-- fail), else they were only in the prompt history (<Up>).
if jit then jit.off(true, true) end -- decision 0068

local M = {}

--- `chat` sent `text` to the Python side.
---@param chat acp.Chat
---@param text string
function M.add(chat, text)
  chat.unshown = chat.unshown or {}
  table.insert(chat.unshown, text)
  chat.sends = (chat.sends or 0) + 1
end

--- `chat` drew user block `id`, new in its transcript. The user blocks drawn
--- before a send are earlier prompts': drawn again (the whole transcript again, a
--- rewind, an acknowledgment) they show none sent then, even with the same text. A
--- prompt's own block is one never drawn before. Each is known by the sends before
--- its first draw, so a send looks at none of them (a long chat has hundreds).
---@param chat acp.Chat
---@param id string
function M.drawn(chat, id)
  chat.prompt_blocks = chat.prompt_blocks or {}
  chat.prompt_blocks[id] = chat.prompt_blocks[id] or chat.sends or 0
end

-- Whether user block `id` was drawn before the last prompt `chat` sent.
local function earlier(chat, id)
  local sends = chat.prompt_blocks and chat.prompt_blocks[id]
  return sends ~= nil and sends < chat.sends
end

-- Whether `shown` (a user block's text, attachments after it) shows prompt `text`.
local function shows(shown, text)
  return shown == text or vim.startswith(shown, text .. "\n")
end

local function seen(chat, shown)
  for i, text in ipairs(chat.unshown) do
    if shows(shown, text) then
      table.remove(chat.unshown, i)
      return
    end
  end
end

--- The render ops of one batch for `chat`: the prompts they show are shown.
---@param chat acp.Chat
---@param ops table[]
function M.render(chat, ops)
  if not (chat.unshown and chat.unshown[1]) then
    return
  end
  for _, op in ipairs(ops) do
    if op.op == "block" and op.kind == "user" and not earlier(chat, op.id) then
      seen(chat, table.concat(op.lines, "\n", 2)) -- after the "## You" header
    elseif op.op == "input" then
      seen(chat, op.text)
    elseif op.op == "status" and type(op.queue) == "table" then
      for _, text in ipairs(op.queue) do
        seen(chat, text)
      end
    end
  end
end

--- The prompts `chat` sent that were never shown, oldest first; forgotten.
---@param chat acp.Chat
---@return string[]
function M.take(chat)
  local unshown = chat.unshown or {}
  chat.unshown = nil
  return unshown
end

return M
