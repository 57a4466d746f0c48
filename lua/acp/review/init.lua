-- Review of the agent's file changes: the :AcpReview buffer, and where the review
-- state Python pushes whole ({turn, files}) arrives: kept in acp.review.state, it
-- redraws the marks in edited buffers (acp.review.hunks), the :AcpDiff splits
-- (acp.review.diff) and the review buffers. Decisions go back through
-- acp.review.state.
if jit then jit.off(true, true) end -- decision 0068
local bufnames = require("acp.bufnames")
local diff = require("acp.review.diff")
local host = require("acp.host")
local hunks = require("acp.review.hunks")
local keys = require("acp.keys")
local registry = require("acp.chat.registry")
local state = require("acp.review.state")
local util = require("acp.util")

local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.review")

local views = {} ---@type table<integer, {chat: integer, rows: table<integer, table>}> by review buffer

--- Redraw the marks of every open hunk in its buffer (acp.review.hunks).
local function mark_buffers()
  hunks.draw(state.by_chat)
end

-- The review buffer -------------------------------------------------------------

local function relative(path)
  return vim.fn.fnamemodify(path, ":~:.")
end

--- The review buffer's first line: how many hunks are open, and its keys.
local function heading(open)
  local parts = { ("acp review · %d open hunk%s"):format(open, open == 1 and "" or "s") }
  for _, group in ipairs({
    { "accept/reject", "accept", "reject" },
    { "all", "accept_all", "reject_all" },
    { "", "next", "prev" },
    { "open", "open" },
    { "", "close" },
  }) do
    local shown = {}
    for i = 2, #group do
      local lhs = keys.lhs("review", group[i])
      if lhs then
        table.insert(shown, keys.typed(lhs))
      end
    end
    if #shown > 0 then
      table.insert(parts, vim.trim(table.concat(shown, "/") .. " " .. group[1]))
    end
  end
  return table.concat(parts, " · ")
end

--- A turn's heading: the review numbers every turn the chat ran; once a turn was
--- rewound, it says which of them the transcript shows, and as which turn.
local function turn_heading(turn, review)
  local text = ("Turn %d%s"):format(turn, turn == review.turn and " (latest)" or "")
  local shown = review.shown
  if type(shown) ~= "table" then
    return text
  end
  local number = shown[turn]
  if number == nil or number == vim.NIL then
    return text .. " · on another branch (:AcpBranches)"
  end
  return number == turn and text or ("%s · turn %d of the transcript"):format(text, number)
end

local function compose(chat)
  local review = state.by_chat[chat] or { turn = 0, files = {} }
  local lines, hls, rows = {}, {}, {}
  local function add(text, group, entry)
    table.insert(lines, text)
    if group then
      table.insert(hls, { #lines - 1, group })
    end
    rows[#lines] = entry
  end
  add(heading(state.open_hunks(chat)), "AcpReviewHunk")
  if not registry.chats[chat] then
    local said = #review.files > 0 and "Chat #%d is closed: accept or reject what waits, as before."
      or "Chat #%d is closed and nothing of it waits any more."
    add(said:format(chat), "AcpReviewDecided")
  elseif #review.files == 0 then
    add("No changes by the agent yet.", "AcpReviewDecided")
  end
  local turn
  for _, file in ipairs(review.files) do
    if file.turn ~= turn then
      turn = file.turn
      add("")
      add(turn_heading(turn, review), "AcpReviewFile")
    end
    local flag = file.created and "A" or (file.deleted and "D" or "M")
    -- A worktree chat's file is listed by your path, decided (and opened) where its
    -- hunks are: in the worktree (`source`).
    local entry = { path = file.source or file.path, turn = file.turn }
    local where = file.source and "  in the worktree" or ""
    add(("%s %s  [%s]%s%s"):format(flag, relative(file.path), file.kind, where, file.open and "" or "  reviewed"), "AcpReviewFile", entry)
    local binary = file.binary
    if binary then -- no hunks: the whole file is one decision (decision 0099)
      local unkept = binary.restorable and "" or " · its bytes before were not kept: a reject cannot restore it"
      local whole = vim.tbl_extend("force", entry, { header = true })
      add(("  %s, whole file %s%s"):format(binary.about, binary.status, unkept), binary.status == "pending" and "AcpReviewHunk" or "AcpReviewDecided", whole)
    end
    for _, hunk in ipairs(file.hunks) do
      local hunk_entry = { path = entry.path, turn = file.turn, hunk = hunk.id, row = hunk.new_start, header = true }
      local decided = not state.is_open(hunk)
      add(("  %s %s"):format(hunk.header, hunk.status), decided and "AcpReviewDecided" or "AcpReviewHunk", hunk_entry)
      local body = vim.tbl_extend("force", hunk_entry, { header = false })
      for _, line in ipairs(hunk.preview) do
        local group = decided and "AcpReviewDecided"
          or (line:sub(1, 1) == "+" and (hunk.status == "conflict" and "AcpReviewConflict" or "AcpReviewAdd") or "AcpReviewDelete")
        add("  " .. line, group, body)
      end
    end
  end
  return lines, hls, rows
end

local function draw(buf)
  local view = views[buf]
  local lines, hls, rows = compose(view.chat)
  view.rows = rows
  vim.bo[buf].modifiable = true
  api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  api.nvim_buf_clear_namespace(buf, M.ns, 0, -1)
  for _, hl in ipairs(hls) do
    api.nvim_buf_set_extmark(buf, M.ns, hl[1], 0, { line_hl_group = hl[2] })
  end
end

local function entry_at(buf)
  return views[buf].rows[api.nvim_win_get_cursor(0)[1]]
end

local function jump(buf, step)
  local row = api.nvim_win_get_cursor(0)[1]
  local last = api.nvim_buf_line_count(buf)
  local r = row + step
  while r >= 1 and r <= last do
    local e = views[buf].rows[r]
    if e and e.header then
      api.nvim_win_set_cursor(0, { r, 0 })
      return
    end
    r = r + step
  end
end

local function map(buf)
  local view = views[buf]
  local function key(name, fn, desc)
    keys.map(buf, "n", "review", name, fn, "review: " .. desc)
  end
  local function on_entry(decision)
    return function()
      local e = entry_at(buf)
      if e then
        state.decide(view.chat, decision, e.path, e.hunk, e.turn)
      end
    end
  end
  key("accept", on_entry("accept"), "accept the hunk (or file) at the cursor")
  key("reject", on_entry("reject"), "reject the hunk (or file) at the cursor")
  key("accept_all", function()
    state.decide(view.chat, "accept")
  end, "accept all")
  key("reject_all", function()
    state.decide(view.chat, "reject")
  end, "reject all")
  key("next", function()
    jump(buf, 1)
  end, "next hunk")
  key("prev", function()
    jump(buf, -1)
  end, "previous hunk")
  key("open", function()
    local e = entry_at(buf)
    if e then
      vim.cmd("aboveleft split " .. vim.fn.fnameescape(e.path))
      local row = math.min((e.row or 0) + 1, api.nvim_buf_line_count(0))
      api.nvim_win_set_cursor(0, { row, 0 })
    end
  end, "open the file at the hunk")
  key("close", function()
    util.close_window(api.nvim_get_current_win())
  end, "close the review")
end

--- Open the review of the current chat's changes in a new tab page, or go to
--- the window that shows it; when none of them waits, the newest closed chat's
--- whose hunks still wait (decision 0081).
function M.open()
  local chat = state.chat_id()
  if not chat or state.open_hunks(chat) == 0 then
    chat = state.closed_waiting() or chat
  end
  if not chat then
    util.user_error("no chat has changes to review (:AcpChat)")
  end
  local name = "acp://review/" .. chat
  local buf = bufnames.find(name)
  if not (buf and views[buf]) then
    buf = api.nvim_create_buf(false, true)
    bufnames.give(buf, name)
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = "acpreview"
    views[buf] = { chat = chat, rows = {} }
    map(buf)
    util.drawn_again_on_edit(buf, function()
      draw(buf)
    end, function()
      views[buf] = nil
    end)
  end
  if util.focus_or_tab(buf) then
    util.set_local(0, { number = false, relativenumber = false })
  end
  draw(buf)
  jump(buf, 1)
  return buf
end

--- Who else draws from a chat's review state (acp.chat: the keys named at its
--- change summary), told its id after each update.
---@type fun(chat: integer)[]
local listeners = {}

---@param listener fun(chat: integer)
function M.on_update(listener)
  table.insert(listeners, listener)
end

--- New review state from Python for chat `chat`.
function M.update(chat, summary)
  state.set(chat, summary)
  mark_buffers()
  diff.refresh(chat)
  for _, listener in ipairs(listeners) do
    listener(chat)
  end
  for buf, view in pairs(views) do
    if view.chat == chat and api.nvim_buf_is_valid(buf) then
      local wins = vim.fn.win_findbuf(buf)
      local cursors = vim.tbl_map(api.nvim_win_get_cursor, wins)
      draw(buf)
      for i, win in ipairs(wins) do
        local row = math.min(cursors[i][1], api.nvim_buf_line_count(buf))
        api.nvim_win_set_cursor(win, { row, 0 })
      end
    end
  end
end

--- Files (and hunks) the agent changed: the latest turn's, or every turn's with `all`.
---@param opts? {all?: boolean}
---@return acp.ReviewFile[]
function M.changes(opts)
  local review = state.by_chat[state.chat_id() or -1]
  if not review then
    return {}
  end
  local all = opts and opts.all
  return vim.deepcopy(vim.tbl_filter(function(file)
    return all or file.turn == review.turn
  end, review.files))
end

host.handle("review", function(item)
  M.update(item.chat, item.summary)
end)

--- The turns of the current chat that changed files, newest first, as text
--- (:AcpTurnDiff completion).
---@return string[]
function M.turns_changed()
  local review = state.by_chat[state.chat_id() or -1]
  local turns = {}
  for _, file in ipairs(review and review.files or {}) do
    local turn = tostring(file.turn)
    if not vim.tbl_contains(turns, turn) then
      table.insert(turns, turn)
    end
  end
  table.sort(turns, function(a, b)
    return tonumber(a) > tonumber(b)
  end)
  return turns
end

--- The turns of the current chat's shown branch that changed files, newest first,
--- as text (:AcpRestore completion). Numbered as the transcript shows them: the
--- review's numbers (M.turns_changed) go on across a rewind, the branch's start
--- again.
---@return string[]
function M.turns_to_restore()
  local chat = state.chat_id()
  if not (chat and host.running()) then
    return {}
  end
  return vim.tbl_map(tostring, host.request("restorable", { chat = chat }))
end

-- A buffer loaded after the review state arrived gets its marks too.
api.nvim_create_autocmd("BufReadPost", {
  group = api.nvim_create_augroup("acp.review", { clear = true }),
  callback = function()
    if next(state.by_chat) then
      vim.schedule(mark_buffers)
    end
  end,
})

return M
