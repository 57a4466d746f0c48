-- Prompts waiting to be sent (|acp-queue|): drawn under the transcript as
-- virtual lines, so a copy of the transcript never takes them and the blocks
-- above stay as render.lua wrote them; picked with :AcpQueue to edit or remove.
-- Python owns the queue: it arrives as the chat's `queue` status field.
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local layout = require("acp.chat.layout")
local util = require("acp.util")

local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.queue")

-- A long prompt shows its first lines; the rest is counted.
local MAX_LINES = 3

--- The virtual lines for `queue`: a blank separator (as between blocks), then
--- each prompt marked "queued i/n", its further lines under its first.
local function virt_lines(queue)
  local hl = "AcpQueued"
  local out = { { { "", hl } } }
  for i, text in ipairs(queue) do
    local label = ("queued %d/%d · "):format(i, #queue)
    local indent = (" "):rep(vim.fn.strdisplaywidth(label))
    local lines = vim.split(text, "\n", { plain = true })
    for j = 1, math.min(#lines, MAX_LINES) do
      table.insert(out, { { (j == 1 and label or indent) .. lines[j], hl } })
    end
    if #lines > MAX_LINES then
      table.insert(out, { { ("%s… %d more lines"):format(indent, #lines - MAX_LINES), hl } })
    end
  end
  return out
end

--- Scroll `win` so the lines under its last buffer line show, when its cursor is
--- on that line (a window following the transcript): Neovim scrolls only as far
--- as the cursor's line.
local function reveal(win, buf)
  local last = api.nvim_buf_line_count(buf)
  if api.nvim_win_get_cursor(win)[1] ~= last then
    return
  end
  local info = vim.fn.getwininfo(win)[1]
  local height, top = info.height - info.winbar, info.topline
  while top < last and api.nvim_win_text_height(win, { start_row = top - 1 }).all > height do
    top = top + 1
  end
  if top ~= info.topline then
    api.nvim_win_call(win, function()
      vim.fn.winrestview({ topline = top })
    end)
  end
end

--- Draw `chat`'s queued prompts under the last line of its transcript, or take
--- them away when none waits. Called after each batch while some wait: lines
--- added below the mark's row would otherwise come after them.
---@param chat acp.Chat
function M.draw(chat)
  local buf, queue = chat.transcript, chat.status.queue or {}
  if #queue == 0 then
    if chat.queue_mark then
      api.nvim_buf_del_extmark(buf, M.ns, chat.queue_mark)
      chat.queue_mark = nil
    end
    return
  end
  local row = api.nvim_buf_line_count(buf) - 1
  chat.queue_mark = api.nvim_buf_set_extmark(buf, M.ns, row, 0, { id = chat.queue_mark, virt_lines = virt_lines(queue) })
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    reveal(win, buf)
  end
end

--- `chat`'s queued prompts; none: nil, and the user is told.
local function queued(chat)
  local queue = chat.status.queue or {}
  if #queue == 0 then
    util.notify("no prompt is queued", "info")
    return nil
  end
  return queue
end

--- Take `chat`'s last queued prompt back into the input, no longer queued
--- (keys.queue.edit_last).
---@param chat acp.Chat
function M.edit_last(chat)
  local queue = queued(chat)
  if queue then
    -- The text says which prompt it is should the ones before it go meanwhile.
    host.notify("dequeue", { chat = chat.id, index = #queue - 1, text = queue[#queue], edit = true })
  end
end

--- :AcpQueue: pick a queued prompt, then edit it (its text goes back to the
--- input, no longer queued), remove it or send it now (|acp-steer|).
---@param chat acp.Chat
function M.pick(chat)
  local queue = queued(chat)
  if not queue then
    return
  end
  vim.ui.select(queue, {
    prompt = "Queued prompt",
    format_item = util.one_row,
  }, function(text, index)
    if not index then
      return
    end
    vim.ui.select({ "edit", "remove", "send now" }, { prompt = "Queued prompt " .. index }, function(action)
      if not action then
        return
      end
      -- The text says which prompt was picked should the ones before it go meanwhile.
      local params = { chat = chat.id, index = index - 1, text = text }
      params.edit, params.now = action == "edit", action == "send now"
      host.notify("dequeue", params)
      if action == "edit" then
        layout.show(chat)
      end
    end)
  end)
end

return M
