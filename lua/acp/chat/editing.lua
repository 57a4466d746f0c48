-- An earlier prompt back in the input to edit (|:AcpEdit|, <CR> on one of your
-- messages): sent, it goes from before its turn, files and conversation. A rewind
-- is not to happen unseen: the input says so while the edit lasts, and emptying the
-- input or walking the prompt history off it ends the edit.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api
local util = require("acp.util")
local wrapped = require("acp.chat.wrapped")

M.ns = api.nvim_create_namespace("acp.editing")

--- Stop editing in `chat`: what is sent next is a new prompt.
---@param chat acp.Chat
function M.stop(chat)
  chat.editing = nil
  if api.nvim_buf_is_valid(chat.input) then
    wrapped.clear(chat.input, M.ns)
    pcall(api.nvim_del_augroup_by_name, "acp.editing." .. chat.input)
  end
end

--- The input of `chat` now holds the prompt of `turn`, to edit.
---@param chat acp.Chat
---@param turn integer
function M.start(chat, turn)
  M.stop(chat)
  chat.editing = turn
  -- Under the prompt's last line, wrapped: after its text, on its row, a narrow
  -- input cut the note short, or hid it behind a prompt as wide as the window.
  local said = wrapped.words(("← editing turn %d: sent, it rewinds"):format(turn))
  local function note()
    wrapped.set(chat.input, M.ns, api.nvim_buf_line_count(chat.input) - 1, { said }, "AcpHint")
  end
  note()
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = api.nvim_create_augroup("acp.editing." .. chat.input, { clear = true }),
    buffer = chat.input,
    callback = function()
      local lines = api.nvim_buf_get_lines(chat.input, 0, -1, false)
      if #lines == 1 and lines[1] == "" then
        M.stop(chat)
      else
        note()
      end
    end,
  })
end

--- The turns shown changed from turn `since` on (a rewind, a branch switch): an edit
--- of one of them ends, as sent it would rewind a turn the user never edited (its
--- text stays in the input).
---@param chat acp.Chat
---@param since integer
function M.changed(chat, since)
  local turn = chat.editing
  if turn and turn >= since then
    M.stop(chat)
    util.notify(("turn %d is no longer shown: the input is no longer its edit"):format(turn), "info")
  end
end

--- The turn the input's text edits, if any, ending the edit: it is being sent.
---@param chat acp.Chat
---@return integer?
function M.take(chat)
  local turn = chat.editing
  M.stop(chat)
  return turn
end

return M
