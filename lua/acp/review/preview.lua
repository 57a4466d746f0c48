-- Edits waiting for permission, shown in the files they would change, per the
-- `diff_preview` option: "inline" (the lines the edit removes highlighted where
-- they are, the lines it adds as virtual lines below them) or "split" (a diff
-- split against the proposed text). The file's text is not touched: the agent
-- writes it once allowed. A file no window shows is shown in a window of its own
-- that does not take the cursor. The prompt's keys for buffers you type in
-- (prefixed, named at the preview) answer from those buffers too; the answer (or
-- the prompt going away) removes it all.
--
-- Python computes each preview (acp_nvim/client/services/changes.py) and sends it
-- with the prompt in the tool block's render op: rows of the file now, and the
-- lines to put there. Nothing here reads a diff.
if jit then jit.off(true, true) end -- decision 0068
local buffers = require("acp.editor.buffers")
local config = require("acp.config")
local hunks = require("acp.review.hunks")
local keys = require("acp.keys")
local side = require("acp.review.side")
local util = require("acp.util")
local windows = require("acp.editor.windows")

local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.preview")

---@class acp.PreviewFile
---@field buf integer
---@field marks integer[]
---@field file? table the preview drawn inline (Python's), drawn again for another gutter
---@field gutter? string the gutter its added lines were drawn after ("": none)
---@field inline? integer how many of `marks` (the first) draw it
---@field scratch_win? integer the proposed text, in split mode
---@field diff_win? integer the window diffed against it

---@class acp.PreviewView
---@field chat table
---@field permission acp.Permission
---@field answer fun(chat: table, permission: acp.Permission, option: acp.PermissionOption) what a prompt key does
---@field files acp.PreviewFile[]
---@field win? integer the window opened to show a file
---@field created? integer the buffer loaded for that window, wiped after

---@type table<string, acp.PreviewView> by request id
local shown = {}
local order = {} ---@type string[] request ids, oldest first
local hooked = {} ---@type table<integer, true> chats whose transcript wipe ends their previews

--- A window of the current tab showing `buf`.
local function window_of(buf)
  local tab = api.nvim_get_current_tabpage()
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if api.nvim_win_get_tabpage(win) == tab then
      return win
    end
  end
end

--- The lines a hunk adds, as virtual lines: each starts with `gutter` (a chunk as
--- wide as the window's gutter, `+` where a sign stands), when the window has one.
--- A virtual line has no sign of its own, and a sign on a real row beside them
--- said that row was added.
local function added_lines(lines, gutter)
  local out = {}
  for i, line in ipairs(lines) do
    out[i] = gutter and { gutter, { line, "AcpReviewAdd" } } or { { line, "AcpReviewAdd" } }
  end
  return out
end

--- A held hunk's lines (the agent's, which the write leaves waiting in the review
--- where your lines stay), under a line saying so; `gutter` as above, blank.
local function held_lines(lines, gutter)
  local pad = gutter and { string.rep(" ", #gutter[1]), "AcpReviewSignConflict" }
  local function line(text, hl)
    return pad and { pad, { text, hl } } or { { text, hl } }
  end
  local says = #lines > 0 and "your lines stay; the agent's wait in :AcpReview:"
    or "your lines stay; their deletion waits in :AcpReview"
  local out = { line(says, "AcpReviewSignConflict") }
  for _, text in ipairs(lines) do
    table.insert(out, line(text, "AcpReviewConflict"))
  end
  return out
end

--- The chunk the added lines of a preview in `buf` start with, for window `win`'s
--- gutter (hunks.gutter); nil where it has none.
local function gutter_of(buf, win)
  hunks.keep_sign_column(buf) -- first: the gutter measured next has its sign column
  return hunks.gutter(win, "+", "AcpReviewSignAdd")
end

--- Draw `file`'s hunks in `buf`: the lines an edit replaces, the ones it adds below
--- them, each after `gutter` (gutter_of's); a held hunk's rows (your unsaved lines,
--- which the write keeps) marked as a conflict, the agent's lines that will wait in
--- the review below them.
local function draw_inline(buf, gutter, file)
  local leftcol = gutter ~= nil
  local marks = {}
  local count = api.nvim_buf_line_count(buf)
  for _, hunk in ipairs(file.hunks) do
    local added = hunk.held and held_lines(hunk.lines, gutter) or added_lines(hunk.lines, gutter)
    if hunk.count > 0 then
      local last = math.min(hunk.row + hunk.count, count) - 1
      table.insert(
        marks,
        util.extmark(buf, M.ns, hunk.row, 0, {
          strict = false, -- the user may have typed since Python read the file
          end_row = last,
          end_col = 0,
          sign_text = hunk.held and "┃" or "-",
          sign_hl_group = hunk.held and "AcpReviewSignConflict" or "AcpReviewSignDelete",
          line_hl_group = hunk.held and "AcpReviewConflict" or "AcpReviewDelete",
        })
      )
      if #added > 0 then
        table.insert(marks, util.extmark(buf, M.ns, last, 0, { virt_lines = added, virt_lines_leftcol = leftcol }))
      end
    elseif #added > 0 then
      -- Lines added: below the row before them; above the first row at the top.
      local top = hunk.row == 0 and count > 0
      table.insert(
        marks,
        util.extmark(buf, M.ns, top and 0 or math.min(hunk.row, count) - 1, 0, {
          virt_lines = added,
          virt_lines_above = top,
          virt_lines_leftcol = leftcol,
        })
      )
      if top then
        hunks.reveal_top(buf, #added)
      end
    end
  end
  return marks
end

--- The file's lines with the preview's hunks applied: what the write leaves (held
--- hunks keep the file's lines).
local function proposed(buf, file)
  if file.deleted then
    return {}
  end
  local lines = api.nvim_buf_get_lines(buf, 0, -1, false)
  local out, at = {}, 0
  for _, hunk in ipairs(file.hunks) do
    if not hunk.held then
      vim.list_extend(out, lines, at + 1, hunk.row)
      vim.list_extend(out, hunk.lines)
      at = hunk.row + hunk.count
    end
  end
  vim.list_extend(out, lines, at + 1, #lines)
  return out
end

local function draw_split(buf, win, file, id)
  local name = ("acp://proposed/%s/%s"):format(id, vim.fn.fnamemodify(file.path, ":t"))
  local scratch = side.create(name, vim.bo[buf].filetype, proposed(buf, file))
  local scratch_win = api.nvim_open_win(scratch, false, { split = "right", win = win })
  for _, w in ipairs({ win, scratch_win }) do
    api.nvim_win_call(w, function()
      vim.cmd("diffthis")
    end)
  end
  return scratch_win
end

--- Show the preview of pending `permission` of `chat`.
local function show(chat, permission, answer)
  local view = { chat = chat, permission = permission, answer = answer, files = {} }
  shown[permission.id] = view
  table.insert(order, permission.id)
  for _, file in ipairs(permission.preview) do
    local buf = buffers.find(file.path)
    local win = buf and window_of(buf)
    if not win and not view.win then
      if not buf then
        -- Loaded only to be shown; wiped when the preview goes (the agent's write,
        -- once allowed, goes to the file).
        local existed = vim.fn.bufexists(file.path) == 1
        buf = buffers.load(file.path) -- nil where a swap file of it exists: not shown
        view.created = not existed and buf or nil
      end
      if buf then
        local target = windows.target_window()
        win = api.nvim_open_win(buf, false, target and { split = "above", win = target } or { split = "left", win = -1 })
        view.win = win
        local first = file.hunks[1]
        api.nvim_win_set_cursor(win, { math.min((first and first.row or 0) + 1, api.nvim_buf_line_count(buf)), 0 })
      end
    end
    if buf then
      local entry = { buf = buf, marks = {} }
      if config.options.diff_preview == "split" and win then
        entry.scratch_win = draw_split(buf, win, file, permission.id)
        entry.diff_win = win
      else
        local gutter = gutter_of(buf, hunks.window_of(buf) or api.nvim_get_current_win())
        entry.marks, entry.file, entry.gutter = draw_inline(buf, gutter, file), file, gutter and gutter[1] or ""
        entry.inline = #entry.marks
      end
      -- Which keys answer here: a file is no place for keys you cannot see.
      local _, hint = keys.prompt_keys(permission.options, function() end)
      if hint ~= "" then
        local first = file.hunks[1]
        local row = math.min(first and first.row or 0, api.nvim_buf_line_count(buf) - 1)
        local text = ("  acp: %s (or in the chat)"):format(hint)
        table.insert(entry.marks, util.extmark(buf, M.ns, row, 0, { virt_text = { { text, "AcpPermissionKey" } }, strict = false }))
      end
      table.insert(view.files, entry)
    end
  end
end

local function remove(id)
  local view = shown[id]
  shown[id] = nil
  order = vim.tbl_filter(function(other)
    return other ~= id
  end, order)
  for _, entry in ipairs(view.files) do
    if api.nvim_buf_is_valid(entry.buf) then
      for _, mark in ipairs(entry.marks) do
        api.nvim_buf_del_extmark(entry.buf, M.ns, mark)
      end
      hunks.fit_top(entry.buf)
    end
    if entry.diff_win and api.nvim_win_is_valid(entry.diff_win) then
      api.nvim_win_call(entry.diff_win, function()
        vim.cmd("diffoff")
      end)
    end
    if entry.scratch_win and api.nvim_win_is_valid(entry.scratch_win) then
      pcall(api.nvim_win_close, entry.scratch_win, true)
    end
  end
  if view.win and api.nvim_win_is_valid(view.win) then
    pcall(api.nvim_win_close, view.win, false) -- not the tab's last window
  end
  local created = view.created
  if created and api.nvim_buf_is_valid(created) and not vim.bo[created].modified and #vim.fn.win_findbuf(created) == 0 then
    api.nvim_buf_delete(created, {})
  end
end

--- The prompt's keys in each previewed buffer (the `buffer_` ones of
--- keys.permission: the file is yours to edit meanwhile): they answer the oldest
--- prompt previewed there.
local function map_keys(before)
  local wanted = {}
  for _, id in ipairs(order) do
    local view = shown[id]
    for _, entry in ipairs(view.files) do
      local bufs = { entry.buf }
      if entry.scratch_win and api.nvim_win_is_valid(entry.scratch_win) then
        table.insert(bufs, api.nvim_win_get_buf(entry.scratch_win))
      end
      local prompt = keys.prompt_keys(view.permission.options, function(option)
        view.answer(view.chat, view.permission, option)
      end)
      for _, buf in ipairs(bufs) do
        wanted[buf] = vim.tbl_extend("keep", wanted[buf] or {}, prompt)
      end
    end
  end
  for buf, map in pairs(wanted) do
    keys.set(buf, "preview", map)
  end
  for buf in pairs(before) do
    if not wanted[buf] then
      keys.clear(buf, "preview")
    end
  end
end

local function buffers_shown()
  local bufs = {}
  for _, view in pairs(shown) do
    for _, entry in ipairs(view.files) do
      bufs[entry.buf] = true
    end
  end
  return bufs
end

--- Show the previews of `chat`'s pending prompts (`entries`: {block, id}) that are
--- not shown yet, and remove those of prompts no longer pending. The prompt keys in
--- the previewed buffers call `answer` (acp.chat.permission's).
---@param chat table
---@param entries {block: string, id: string}[]
---@param answer fun(chat: table, permission: acp.Permission, option: acp.PermissionOption)
function M.sync(chat, entries, answer)
  local before = buffers_shown()
  local wanted = {}
  for _, entry in ipairs(entries) do
    local block = chat.blocks.by_id[entry.block]
    local permission = block and block.permission
    if config.options.diff_preview and permission and permission.preview and #permission.preview > 0 then
      wanted[permission.id] = permission
    end
  end
  for id, view in pairs(shown) do
    if view.chat == chat and not wanted[id] then
      remove(id)
    end
  end
  for id, permission in pairs(wanted) do
    if not shown[id] then
      -- A preview that cannot be drawn (no room for a window) leaves the prompt as it is.
      local ok, err = pcall(show, chat, permission, answer)
      if not ok then
        util.notify("cannot show the edit's preview: " .. tostring(err), "warn")
      end
    end
  end
  if not hooked[chat.id] then
    hooked[chat.id] = true
    api.nvim_create_autocmd("BufWipeout", {
      buffer = chat.transcript,
      once = true,
      callback = function()
        M.sync(chat, {}, answer)
        hooked[chat.id] = nil
      end,
    })
  end
  map_keys(before)
end

--- The gutter is a window's and the marks the buffer's (as the review's, decision
--- 0017): the added lines are padded again for the window the user goes to, or
--- whose gutter changes; drawn again where a gutter comes or goes.
local function measure_again()
  local buf, win = api.nvim_get_current_buf(), api.nvim_get_current_win()
  for _, view in pairs(shown) do
    for _, entry in ipairs(view.files) do
      local gutter = entry.file and entry.buf == buf and gutter_of(buf, win)
      local now = gutter and gutter[1] or ""
      if entry.file and entry.buf == buf and now ~= entry.gutter then
        entry.gutter = now
        local inline = vim.list_slice(entry.marks, 1, entry.inline)
        local padded = vim.iter(inline):all(function(mark)
          return hunks.regutter(buf, M.ns, mark, gutter)
        end)
        if not padded then
          for _, mark in ipairs(inline) do
            api.nvim_buf_del_extmark(buf, M.ns, mark)
          end
          local drawn = draw_inline(buf, gutter, entry.file)
          local count = #drawn
          entry.marks, entry.inline = vim.list_extend(drawn, entry.marks, entry.inline + 1), count
        end
      end
    end
  end
end

hunks.on_gutter_change(measure_again)

return M
