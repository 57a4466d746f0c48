-- The chat's own keys (|acp-keys|: keys.chat, keys.input, keys.queue): mapped on
-- the transcript and the input when a chat is made (the transcript's again after a
-- :bdelete), each with its `desc`, which the help key lists. Also the motions
-- between turns and tool calls, and the keys named under a turn's change summary.
-- What a key does to the chat itself (send, cancel, hide) acp.chat hands in: this
-- module does not require it.
if jit then jit.off(true, true) end -- decision 0068
local blocks = require("acp.chat.blocks")
local keys = require("acp.keys")
local queue = require("acp.chat.queue")
local render = require("acp.chat.render")
local review = require("acp.review")
local review_state = require("acp.review.state")
local tools = require("acp.chat.tools")
local util = require("acp.util")
local wrapped = require("acp.chat.wrapped")

local M = {}
local api = vim.api

local hint_ns = api.nvim_create_namespace("acp.changes.hint")

--- Move the cursor to the `step`-th next (`step` > 0) or previous block of `kind`
--- in the transcript (`v:count1` of them).
local function jump(chat, kind, step)
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local starts = {}
  for _, id in ipairs(chat.blocks.order) do
    local block = chat.blocks.by_id[id]
    if block.kind == kind then
      table.insert(starts, blocks.start_row(chat.transcript, block))
    end
  end
  local target
  for _ = 1, vim.v.count1 do
    local found
    for i = step > 0 and 1 or #starts, step > 0 and #starts or 1, step do
      local first = starts[i]
      if (step > 0 and first > (target or row)) or (step < 0 and first < (target or row)) then
        found = first
        break
      end
    end
    if not found then
      break
    end
    target = found
  end
  if target then
    vim.cmd("normal! m'") -- a jump: `` and <C-o> come back
    api.nvim_win_set_cursor(0, { target + 1, 0 })
  end
end

--- The keys of `buf` this plugin maps, as help lines (`  lhs  what it does`). Its
--- Insert-mode ones only where it can be edited: the transcript can not, unless
--- made 'modifiable' (acp.chat.kept).
local function described(buf)
  local lines = {}
  for _, mode in ipairs(vim.bo[buf].modifiable and { "n", "i" } or { "n" }) do
    for _, map in ipairs(api.nvim_buf_get_keymap(buf, mode)) do
      local desc = map.desc and map.desc:match("^acp: (.*)")
      if desc then
        local lhs = map.lhs:gsub("^ ", "<Space>")
        table.insert(lines, ("  %-8s %s%s"):format(lhs, desc, mode == "i" and " (Insert mode)" or ""))
      end
    end
  end
  table.sort(lines)
  return lines
end

--- The help key: the keys of the transcript and of the input, in a float over
--- the editor with the cursor in it (`q` or <Esc> closes it). A hover at the
--- cursor got only the chat window's height: 1 line of ~30 in a bottom chat, and
--- `q` then hid the chat instead of the help.
local function help(chat)
  local lines = { "# Keys of the chat (:help acp-keys)", "", "Transcript:" }
  vim.list_extend(lines, described(chat.transcript))
  vim.list_extend(lines, { "", "Input:" })
  vim.list_extend(lines, described(chat.input))
  local buf = api.nvim_create_buf(false, true)
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable, vim.bo[buf].bufhidden, vim.bo[buf].filetype = false, "wipe", "markdown"
  local widest = math.max(unpack(vim.tbl_map(api.nvim_strwidth, lines)))
  local rows = vim.o.lines - vim.o.cmdheight
  local width, height = math.min(widest + 1, vim.o.columns - 2), math.min(#lines, rows - 2)
  local win = api.nvim_open_win(buf, true, {
    relative = "editor",
    row = math.floor((rows - height - 2) / 2),
    col = math.floor((vim.o.columns - width - 2) / 2),
    width = width,
    height = height,
    border = "rounded",
    style = "minimal",
  })
  util.map_close(buf, "keys' help")
  vim.keymap.set("n", "<Esc>", "q", { buffer = buf, remap = true, desc = "acp: close the keys' help" })
  api.nvim_create_autocmd("WinLeave", {
    buffer = buf,
    once = true,
    callback = function()
      vim.schedule(function()
        pcall(api.nvim_win_close, win, true)
      end)
    end,
  })
end

---@alias acp.ChatActions {send: fun(), send_now: fun(), cancel: fun(), hide: fun(), edit_at_cursor: fun(): boolean}

--- The keys both of the chat's buffers have.
local function map_either(chat, buf, actions)
  keys.map(buf, { "n", "i" }, "chat", "cancel", actions.cancel, "cancel the turn")
  keys.map(buf, "n", "chat", "hide", actions.hide, "hide the chat")
  keys.map(buf, "n", "queue", "pick", function()
    queue.pick(chat)
  end, "pick a queued prompt to edit or remove")
  keys.map(buf, "n", "queue", "edit_last", function()
    queue.edit_last(chat)
  end, "the last queued prompt back into the input")
end

--- Map the chat's keys on its input (made again after a buffer command took it:
--- acp.chat). `actions`: what acp.chat does for them (see M.map_transcript).
---@param chat acp.Chat
---@param actions acp.ChatActions
function M.map_input(chat, actions)
  local input = chat.input
  keys.map(input, "n", "input", "send", actions.send, "send")
  keys.map(input, { "n", "i" }, "input", "send_insert", actions.send, "send")
  keys.map(input, { "n", "i" }, "input", "send_now", actions.send_now, "send now, into the running turn")
  map_either(chat, input, actions)
end

--- Map the chat's keys on its transcript: when it is made, and again when a
--- :bdelete took them (acp.chat.kept). `actions`: what acp.chat does for `send`,
--- `send_now`, `cancel`, `hide`, and `edit_at_cursor` (one of your messages at the
--- cursor back in the input; false when there is none).
---@param chat acp.Chat
---@param actions acp.ChatActions
function M.map_transcript(chat, actions)
  local transcript = chat.transcript
  map_either(chat, transcript, actions)
  -- One key for the transcript: one of your messages to edit, else
  -- (acp.chat.tools.enter) a permission prompt's picker, a location's file, a
  -- terminal, a branch mark's picker, else what the key does anyway.
  local open = keys.lhs("chat", "open")
  keys.map(transcript, "n", "chat", "open", function()
    if not actions.edit_at_cursor() then
      tools.enter(chat, open)
    end
  end, "edit your message, answer the prompt, open the location or terminal, pick a branch")
  keys.map(transcript, "n", "chat", "help", function()
    help(chat)
  end, "show the chat's keys")
  for name, motion in pairs({
    next_turn = { "user", 1, "next prompt" },
    prev_turn = { "user", -1, "previous prompt" },
    next_tool = { "tool", 1, "next tool call" },
    prev_tool = { "tool", -1, "previous tool call" },
  }) do
    keys.map(transcript, { "n", "x", "o" }, "chat", name, function()
      jump(chat, motion[1], motion[2])
    end, motion[3])
  end
  keys.map(transcript, "n", "chat", "review", review.open, "review the agent's changes")
  for name, decision in pairs({ accept_all = "accept", reject_all = "reject" }) do
    keys.map(transcript, "n", "chat", name, function()
      if review_state.open_hunks(chat.id) == 0 then -- as the hint under the summary
        util.notify("no hunk waits for a decision (:AcpReview)", "info")
      end
      -- Still sent: a worktree chat's execute bits changed alone have no hunk.
      review_state.decide(chat.id, decision)
    end, decision .. " every open change")
  end
end

--- The newest change summary (a `changes` block) in view in `chat`'s transcript.
---@param chat acp.Chat
---@return acp.Block?
local function newest_summary(chat)
  for index = #chat.blocks.order, 1, -1 do
    local block = chat.blocks.by_id[chat.blocks.order[index]]
    if block.kind == "changes" then
      return block
    end
  end
end

--- Name the review's keys under the newest change summary the transcript shows,
--- while the chat's review has a hunk open: the keys act on every open change, so
--- one summary names them, and none once all are decided (accepted, rejected, a
--- restore). A virtual line, which a copy of the transcript does not take.
---@param chat acp.Chat
function M.hint_review(chat)
  wrapped.clear(chat.transcript, hint_ns)
  local summary = review_state.open_hunks(chat.id) > 0 and newest_summary(chat)
  if not summary then
    return
  end
  local hint = {}
  for _, key in ipairs({ { "review", "review" }, { "accept_all", "accept all" }, { "reject_all", "reject all" } }) do
    local lhs = keys.lhs("chat", key[1])
    if lhs then
      table.insert(hint, ("%s %s"):format(keys.typed(lhs), key[2]))
    end
  end
  if #hint == 0 then
    return
  end
  local row = blocks.start_row(chat.transcript, summary)
  wrapped.set(chat.transcript, hint_ns, row, { { pieces = hint, separator = " · " } }, "AcpInfo")
  render.keep_end(chat.transcript) -- the line pushed the turn's end down
end

return M
