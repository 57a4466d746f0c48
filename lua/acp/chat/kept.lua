-- The transcript kept whole through Neovim's buffer commands (decision 0085).
-- :bdelete, :bunload and :e! unload it, which empties it (and :bdelete takes its
-- options, variables, keys and marks too), and nothing can refuse them. What it
-- shows is copied as it unloads and written back as it loads again: inside :e!,
-- whose BufReadCmd reads the copy as a file's reads the disk, and at once after the
-- others, so the transcript stays loaded and hidden, as when its window closes.
-- (:bwipeout closes the chat: acp.chat.) Text the user changed after setting
-- 'modifiable' moves the blocks' rows. Not the input's: acp.chat.
if jit then jit.off(true, true) end -- decision 0068
local blocks_of = require("acp.chat.blocks")
local permission = require("acp.chat.permission")
local queue = require("acp.chat.queue")
local registry = require("acp.chat.registry")
local render = require("acp.chat.render")
local wrapped = require("acp.chat.wrapped")

local M = {}
local api = vim.api

--- Load `chat`'s transcript where Neovim unloaded it, before drawing in it.
---@param chat acp.Chat
function M.load(chat)
  if not api.nvim_buf_is_loaded(chat.transcript) then
    vim.fn.bufload(chat.transcript)
  end
end

--- Write `chat`'s transcript back from `copy` (render.copy) after `dress` set
--- again what it holds besides its text: with its options back first, the text
--- makes no swap file and no undo history.
local function restore(chat, dress, copy)
  local buf = chat.transcript
  dress(chat)
  if copy then
    render.restore(buf, chat.blocks, copy)
  else -- unloaded unseen (:noautocmd): what it showed is gone, what comes is drawn
    chat.blocks = render.reset(buf)
  end
  wrapped.restore(buf)
  queue.draw(chat)
  permission.map_keys(chat)
end

--- Keep `chat`'s transcript whole through :bdelete, :bunload and :e!; `dress(chat)`
--- sets its options, variables and keys.
---@param chat acp.Chat
---@param dress fun(chat: acp.Chat)
function M.attach(chat, dress)
  local buf, copy = chat.transcript, nil
  api.nvim_create_autocmd("BufUnload", {
    buffer = buf,
    callback = function()
      if vim.v.exiting ~= vim.NIL or not registry.chats[chat.id] then -- nothing to keep
        return -- Neovim quits, or the chat closed
      end
      local ok, copied = pcall(render.copy, buf, chat.blocks)
      copy = ok and copied or nil
      vim.schedule(function()
        if registry.chats[chat.id] and api.nvim_buf_is_valid(buf) then
          M.load(chat)
        end
      end)
    end,
  })
  api.nvim_create_autocmd("BufReadCmd", {
    buffer = buf,
    callback = function()
      restore(chat, dress, copy)
      copy = nil
    end,
  })
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    buffer = buf,
    callback = function()
      -- Rows render.lua did not write moved (the user's edit), or ours did: the
      -- rows blocks_of.block_at keeps are forgotten either way.
      blocks_of.moved(chat.blocks)
    end,
  })
end

return M
