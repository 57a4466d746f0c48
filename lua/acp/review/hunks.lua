-- Agent hunks where they landed: marks in the file's buffer (a sign, the agent's
-- lines highlighted, the lines it removed as virtual lines above them, a
-- conflict's proposal below it), the same whichever way the change arrived
-- (fs write, tool call diff, disk write found by the scan). Each hunk's rows are
-- one extmark, which follows the user's edits; the keys, :AcpHunk and
-- hunk_at_cursor() find the hunk under the cursor through it. Python owns the
-- hunks (acp.review.state holds its summary); decisions go back there.
if jit then jit.off(true, true) end -- decision 0068
local buffers = require("acp.editor.buffers")
local host = require("acp.host")
local keys = require("acp.keys")
local registry = require("acp.chat.registry")
local splits = require("acp.review.splits")
local state = require("acp.review.state")
local util = require("acp.util")

local M = {}
local api = vim.api

M.ns = api.nvim_create_namespace("acp.review")

---@class acp.DrawnHunk
---@field key string chat, turn, path and id
---@field chat integer
---@field turn integer
---@field path string
---@field hunk acp.ReviewHunk
---@field sig string what the hunk shows: a redraw keeps its marks while this holds
---@field marks integer[] extmark ids, the first spanning its rows
---@field below boolean the first mark sits on the row above (lines removed at the end)

---@type table<integer, acp.DrawnHunk[]> by buffer, in file order
local drawn = {}
---@type table<integer, string> buffers holding the hunk keys: the keys they got
local keyed = {}
---@type table<integer, boolean> buffers with the autocmd of follow()
local followed = {}
---@type table<integer, boolean> buffers whose changes are reported now
local watched = {}
---@type table<integer, string> by buffer: the gutter its removed lines were drawn after ("": none)
local measured = {}
local drawing = false -- M.draw runs (its sign columns set fire OptionSet)

--- Report the user's changes of a buffer holding agent hunks (undo and redo
--- included) to the review, so it never offers a hunk the user took back, and
--- offers again one whose agent lines a redo brings back.
local function follow(buf, path)
  if followed[buf] then
    return
  end
  followed[buf] = true
  api.nvim_create_autocmd({ "TextChanged", "InsertLeave" }, {
    buffer = buf,
    group = api.nvim_create_augroup("acp.hunks." .. buf, { clear = true }),
    callback = function()
      if watched[buf] then
        host.notify("buffer_changed", { path = path })
      end
    end,
  })
end

--- Whether a redo or an undo can bring a hunk of `file` back: some are open, or
--- their agent lines were taken out (reverted by an undo, or rejected); a file
--- with no text, whose reject an undo takes back (decision 0099).
local function may_return(file)
  if file.binary then
    return true
  end
  for _, hunk in ipairs(file.hunks) do
    if state.is_open(hunk) or hunk.status == "reverted" or hunk.status == "rejected" then
      return true
    end
  end
  return false
end

local function signature(hunk)
  return table.concat({ hunk.status, hunk.base_count, hunk.new_count, table.concat(hunk.preview, "\n") }, "\0")
end

--- Virtual lines above row 0 only show when a window scrolls to them ('topfill').
function M.reveal_top(buf, count)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_call(win, function()
      if vim.fn.line("w0") == 1 then
        vim.fn.winrestview({ topfill = count })
      end
    end)
  end
end

--- Filler rows above line 1 ('topfill') that no virtual line fills any more (a
--- hunk or preview at the top gone): Neovim fits 'topfill' to them in the current
--- window only, another one showed them as empty filler ("-----") until scrolled.
function M.fit_top(buf)
  local above = 0
  for _, m in ipairs(api.nvim_buf_get_extmarks(buf, -1, { 0, 0 }, { 0, -1 }, { details = true, type = "virt_lines" })) do
    if m[4].virt_lines_above then
      above = above + #m[4].virt_lines
    end
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_call(win, function()
      local fill = above + vim.fn.diff_filler(1)
      local view = vim.fn.winsaveview()
      if view.topline == 1 and view.topfill > fill then
        vim.fn.winrestview({ topfill = fill })
      end
    end)
  end
end

--- A window showing `buf` with 'signcolumn' "auto" gets it always on while it
--- shows `buf` (:setlocal): agent marks come and go through a turn (a preview,
--- then the landed hunk, then decided), and each time the text shifted sideways.
function M.keep_sign_column(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local value = vim.wo[win].signcolumn
    if value:match("^auto") then
      util.set_local(win, { signcolumn = "yes" .. (value:match(":%d*%-?(%d+)$") and (":" .. value:match("(%d+)$")) or "") })
    end
  end
end

--- The chunk a virtual line of a diff starts with at the window's left edge
--- (`virt_lines_leftcol`): `sign` padded to the width of `win`'s gutter (sign,
--- number and fold columns), which a virtual line has none of; nil when `win`
--- has no gutter. No window (a hidden buffer): a sign column's, which the hunks'
--- signs open in a window with 'signcolumn' "auto".
function M.gutter(win, sign, hl)
  local width = win and vim.fn.getwininfo(win)[1].textoff or 2
  return width > 0 and { sign .. string.rep(" ", width - 1), hl } or nil
end

--- The virtual lines of mark `id` (in `buf`, namespace `ns`), each drawn after a
--- gutter chunk (M.gutter's), padded to `gutter` instead: each keeps its sign and
--- highlight, where the mark stands now (no redraw at rows the user has typed away
--- from). False where a gutter comes or goes (no sign to keep, or none to put).
---@param gutter? table M.gutter's chunk for the window now
---@return boolean
function M.regutter(buf, ns, id, gutter)
  local pos = api.nvim_buf_get_extmark_by_id(buf, ns, id, { details = true })
  local details = pos[3]
  if not (details and details.virt_lines) or details.invalid then
    return true -- nothing drawn there any more
  end
  if not gutter or not details.virt_lines_leftcol then
    return false
  end
  local width = #gutter[1]
  local lines = {}
  for i, line in ipairs(details.virt_lines) do
    local sign = line[1]
    lines[i] = { { sign[1]:sub(1, 1) .. string.rep(" ", width - 1), sign[2] }, unpack(line, 2) }
  end
  api.nvim_buf_set_extmark(buf, ns, pos[1], pos[2], {
    id = id,
    invalidate = details.invalidate,
    virt_lines = lines,
    virt_lines_above = details.virt_lines_above,
    virt_lines_leftcol = true,
  })
  return true
end

--- The window whose gutter `buf`'s hunks (and previews) are drawn for: the current
--- one when it shows `buf`, else one on this tab page, else any; nil when none
--- shows it.
function M.window_of(buf)
  if api.nvim_get_current_buf() == buf then
    return api.nvim_get_current_win()
  end
  local wins = vim.fn.win_findbuf(buf)
  for _, win in ipairs(wins) do
    if api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then
      return win
    end
  end
  return wins[1]
end

--- Draw the hunk of a file the agent deleted whose buffer still shows its text (as
--- draw_hunk does, which it stands in for): that text, where it is, is what the
--- deletion removes (drawn again as removed lines, it showed twice).
local function draw_deleted(buf)
  local last = api.nvim_buf_line_count(buf) - 1
  return {
    util.extmark(buf, M.ns, 0, 0, {
      end_row = last,
      end_col = 0,
      end_right_gravity = true,
      invalidate = true,
      sign_text = "-",
      sign_hl_group = "AcpReviewSignDelete",
      line_hl_group = "AcpReviewDelete",
    }),
    util.extmark(buf, M.ns, 0, 0, {
      invalidate = true,
      virt_text = { { "  acp: the agent deleted this file", "AcpReviewSignDelete" } },
    }),
  }, false
end

--- Draw one hunk with its first row at `row`; returns its marks (the first holds
--- its rows, light to read back: the virtual lines are marks of their own) and
--- whether the first sits on the row above it. The lines the agent removed are
--- drawn `with_removed`, each after `gutter` (M.gutter: a "-", as a diff reads).
local function draw_hunk(buf, hunk, row, with_removed, gutter)
  local count = api.nvim_buf_line_count(buf)
  local conflict = hunk.status == "conflict"
  local removed = {}
  if with_removed and not conflict then
    for _, line in ipairs(hunk.preview) do
      if line:sub(1, 1) == "-" then
        local text = { line:sub(2), "AcpReviewDelete" }
        table.insert(removed, gutter and { gutter, text } or { text })
      end
    end
  end
  local marks, below, last
  if hunk.new_count == 0 then
    below = row >= count
    last = below and count - 1 or row
    marks = {
      util.extmark(buf, M.ns, last, 0, { invalidate = true, sign_text = "▁", sign_hl_group = "AcpReviewSignDelete" }),
    }
  else
    below = false
    last = math.max(row, math.min(row + hunk.new_count, count) - 1)
    marks = {
      util.extmark(buf, M.ns, row, 0, {
        end_row = last,
        end_col = 0,
        end_right_gravity = true,
        invalidate = true,
        sign_text = "┃",
        sign_hl_group = conflict and "AcpReviewSignConflict"
          or (hunk.base_count == 0 and "AcpReviewSignAdd" or "AcpReviewSignChange"),
        line_hl_group = conflict and "AcpReviewConflict" or "AcpReviewAdd",
      }),
    }
  end
  if #removed > 0 then
    -- Where the lines were: above the hunk's rows, or below the last row.
    local at = below and last or row
    local opts = {
      invalidate = true,
      virt_lines = removed,
      virt_lines_above = not below,
      virt_lines_leftcol = gutter ~= nil,
    }
    table.insert(marks, util.extmark(buf, M.ns, at, 0, opts))
    if at == 0 and not below then
      M.reveal_top(buf, #removed)
    end
  end
  if conflict and hunk.proposed then
    local lines = { { { "agent proposed (:AcpReview):", "AcpReviewSignConflict" } } }
    for _, line in ipairs(hunk.proposed) do
      table.insert(lines, { { line, "AcpReviewConflict" } })
    end
    table.insert(marks, util.extmark(buf, M.ns, last, 0, { invalidate = true, virt_lines = lines }))
  end
  return marks, below
end

--- Rows [first, last] (0-based) a drawn hunk covers now; nil when its rows are gone.
local function rows_of(buf, drawn_hunk)
  local pos = api.nvim_buf_get_extmark_by_id(buf, M.ns, drawn_hunk.marks[1], { details = true })
  if not pos[1] or pos[3].invalid then
    return nil
  end
  if drawn_hunk.below then
    return pos[1] + 1, pos[1] + 1
  end
  return pos[1], pos[3].end_row or pos[1]
end

local function relative(path)
  return vim.fn.fnamemodify(path, ":~:.")
end

local function jump(step)
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local best
  for _, h in ipairs(drawn[buf] or {}) do
    local first = rows_of(buf, h)
    if first and (step > 0 and first > row or step < 0 and first < row) then
      if not best or (step > 0 and first < best) or (step < 0 and first > best) then
        best = first
      end
    end
  end
  if best then
    api.nvim_win_set_cursor(0, { math.min(best + 1, api.nvim_buf_line_count(buf)), 0 })
  end
end

--- The hunk under the cursor: a marked agent hunk, or in an :AcpDiff baseline
--- buffer the open hunk of the rows there.
---@return acp.DrawnHunk?
local function under_cursor()
  local buf = api.nvim_get_current_buf()
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local in_baseline = splits.hunk_at(buf, row)
  if in_baseline ~= nil then
    return in_baseline or nil
  end
  for _, h in ipairs(drawn[buf] or {}) do
    local first, last = rows_of(buf, h)
    if first and row >= first and row <= last then
      return h
    end
  end
end

--- The hunk under the cursor as require("acp").hunk_at_cursor() gives it: the
--- hunk of acp.changes() with `chat`, `path`, `turn`, and `new_start` where it is now.
function M.at_cursor()
  local h = under_cursor()
  if not h then
    return nil
  end
  local hunk = vim.deepcopy(h.hunk)
  local buf = api.nvim_get_current_buf()
  hunk.chat, hunk.path, hunk.turn = h.chat, h.path, h.turn
  hunk.new_start = (drawn[buf] and rows_of(buf, h)) or hunk.new_start
  return hunk
end

local PREVIEW = "acp.hunk" -- the preview float's focus_id (a window variable of it)

local function preview(h)
  local lines = { ("%s  %s  (turn %d, %s)"):format(relative(h.path), h.hunk.header, h.turn, h.hunk.status) }
  vim.list_extend(lines, h.hunk.preview)
  vim.lsp.util.open_floating_preview(lines, "diff", { focus_id = PREVIEW, border = "rounded" })
end

--- Close the current buffer's hunk preview: the hunk it shows is being decided (it
--- would stay, "pending", until the cursor moved).
local function close_preview()
  local win = vim.b.lsp_floating_preview
  if win and api.nvim_win_is_valid(win) and vim.w[win][PREVIEW] then
    api.nvim_win_close(win, true)
  end
end

M.actions = { "accept", "reject", "reject_why", "preview" }

--- Act on the hunk under the cursor: "accept", "reject" (through the review, as
--- :AcpReview does), "reject_why" (reject, and the reason asked for goes to the
--- agent) or "preview" (its diff in a floating window).
---@param action "accept"|"reject"|"reject_why"|"preview"
function M.act(action)
  if not vim.tbl_contains(M.actions, action) then
    util.user_error(("unknown hunk action %q (%s)"):format(tostring(action), table.concat(M.actions, ", ")))
  end
  local h = under_cursor()
  if not h then
    util.notify("no agent hunk under the cursor", "warn")
  elseif action == "preview" then
    preview(h)
  elseif action == "reject_why" and registry.chats[h.chat] then
    close_preview()
    vim.ui.input({ prompt = "Why reject it? " }, function(reason)
      if reason and vim.trim(reason) ~= "" then
        state.decide(h.chat, "reject", h.path, h.hunk.id, h.turn, vim.trim(reason))
      end
    end)
  else -- a closed chat's hunk (decision 0081) is rejected without a reason: no agent hears it
    close_preview()
    state.decide(h.chat, action == "reject_why" and "reject" or action, h.path, h.hunk.id, h.turn)
  end
end

--- The `hunk_` keys of |acp-option-keys.review|, for a buffer holding agent hunks
--- (`baseline`: an :AcpDiff baseline buffer, whose hunks ]c and [c already reach).
function M.keymap(baseline)
  local function call(fn, arg)
    return function()
      fn(arg)
    end
  end
  local actions = {
    accept = { call(M.act, "accept"), "acp: accept the agent hunk under the cursor" },
    reject = { call(M.act, "reject"), "acp: reject the agent hunk under the cursor" },
    reject_why = { call(M.act, "reject_why"), "acp: reject the agent hunk and say why" },
    preview = { call(M.act, "preview"), "acp: show the agent hunk's diff" },
    next = { call(jump, 1), "acp: next agent hunk" },
    prev = { call(jump, -1), "acp: previous agent hunk" },
  }
  local map = {}
  for action, spec in pairs(actions) do
    local lhs = keys.lhs("review", "hunk_" .. action)
    if lhs and not (baseline and (action == "next" or action == "prev")) then
      map[lhs] = spec
    end
  end
  return map
end

--- The turn of chat `chat` whose hunks `buf` shows when not the newest: the one an
--- :AcpDiff split (acp.review.splits) or an :AcpTurnDiff window (its `acp_turn_diff`
--- variable, acp.review.turn) shows it for, a window of the current tab page first.
local function turn_shown(buf, chat)
  local found
  local function consider(win, turn)
    if not found or api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage() then
      found = turn
    end
  end
  for _, view in pairs(splits.views) do
    if view.file_buf == buf and view.chat == chat and api.nvim_win_is_valid(view.file_win) then
      consider(view.file_win, view.turn)
    end
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local shown = vim.w[win].acp_turn_diff
    if shown and shown.buf == buf and shown.chat == chat then
      consider(win, shown.turn)
    end
  end
  return found
end

--- M.draw's pass.
local function draw_all(states)
  local before = {} ---@type table<string, {buf: integer, drawn: acp.DrawnHunk}>
  for buf, list in pairs(drawn) do
    for _, h in ipairs(list) do
      before[h.key] = { buf = buf, drawn = h }
    end
  end
  drawn = {}
  watched = {}
  measured = {}
  local gutters = {} ---@type table<integer, table|false> by buffer: its removed lines' (M.gutter)
  for chat, review in pairs(states) do
    -- By path, the newest turn with open hunks in it: once the newer turns' are
    -- decided, an earlier turn's are marked (Python places them in the file now).
    local open_turn = {} ---@type table<string, integer>
    for _, file in ipairs(review.files) do
      local path = file.source or file.path
      open_turn[path] = open_turn[path] or file.open and file.turn or nil
    end
    local shown = {} ---@type table<string, {buf: integer|false, turn: integer}> by path
    for _, file in ipairs(review.files) do -- newest turn first
      local path = file.source or file.path
      if not shown[path] then
        local found = buffers.find(path)
        local turn = found and turn_shown(found, chat) or open_turn[path] or file.turn
        shown[path] = { buf = found or false, turn = turn }
        if found and may_return(file) then -- the newest turn follows your edits
          watched[found] = true
          follow(found, path)
        end
      end
      local buf = shown[path].buf
      if buf and file.open and file.turn == shown[path].turn then
        local list = drawn[buf] or {}
        local with_removed = not splits.active(buf) -- else the baseline window shows them
        if gutters[buf] == nil then
          M.keep_sign_column(buf) -- first: the gutter measured next has its sign column
          gutters[buf] = M.gutter(M.window_of(buf), "-", "AcpReviewSignDelete") or false
        end
        if with_removed then
          measured[buf] = gutters[buf] and gutters[buf][1] or ""
        end
        local gutter = gutters[buf] or nil
        for _, hunk in ipairs(file.hunks) do
          if state.is_open(hunk) then
            local key = table.concat({ chat, file.turn, path, hunk.id }, ":")
            local deleted = file.deleted and hunk.new_count == 0
            local drawn_as = deleted and "deleted" or with_removed and (gutter and gutter[1] or "") or "bare"
            local sig = signature(hunk) .. "\0" .. drawn_as
            local old = before[key]
            if old and old.buf == buf and old.drawn.sig == sig and rows_of(buf, old.drawn) then
              before[key] = nil
              old.drawn.hunk = hunk
              table.insert(list, old.drawn)
            else
              local draw = deleted and draw_deleted or draw_hunk
              local ok, marks, below = pcall(draw, buf, hunk, hunk.new_start, with_removed, gutter)
              if ok then
                table.insert(list, {
                  key = key,
                  chat = chat,
                  turn = file.turn,
                  path = path,
                  hunk = hunk,
                  sig = sig,
                  marks = marks,
                  below = below,
                })
              end
            end
          end
        end
        drawn[buf] = list
      end
    end
  end
  local undrawn = {}
  for _, old in pairs(before) do
    if api.nvim_buf_is_valid(old.buf) then
      for _, mark in ipairs(old.drawn.marks) do
        api.nvim_buf_del_extmark(old.buf, M.ns, mark)
      end
      undrawn[old.buf] = true
    end
  end
  for buf in pairs(undrawn) do
    M.fit_top(buf)
  end
  -- Built only for buffers that show hunks: a review comes at every turn's end,
  -- mostly with none, and the map's closures and key lookups are ~2 KB of garbage.
  if next(drawn) then
    local map, chosen = M.keymap(false), ""
    for lhs in pairs(map) do
      chosen = chosen .. lhs .. "\0"
    end
    for buf in pairs(drawn) do
      if keyed[buf] ~= chosen then
        keys.set(buf, "hunks", map)
        keyed[buf] = chosen
      end
    end
  end
  for buf in pairs(keyed) do
    if not drawn[buf] then
      keys.clear(buf, "hunks")
      keyed[buf] = nil
    end
  end
end

--- Draw the marks of every open hunk from the review state (`states`: by chat,
--- {turn, files}); for each chat and file the newest turn with open hunks in it, or the
--- turn an :AcpDiff or :AcpTurnDiff shows it for (two chats' hunks in one buffer
--- are both marked; Python places an earlier turn's in the file now). A hunk showing
--- the same as before keeps its marks, where they moved with the user's edits
--- (Python's rows are those of the text it last read); a new or changed one is
--- drawn at the row Python gives, and the marks of decided ones go. One pass.
--- A file of a worktree chat is drawn where its hunks are: in its `source`, the
--- worktree's copy (|acp-worktree|), not in your file that does not hold them yet.
function M.draw(states)
  drawing = true
  local ok, err = pcall(draw_all, states)
  drawing = false
  if not ok then
    error(err, 0)
  end
end

--- The gutter is a window's and the marks the buffer's (decision 0017): the lines
--- the agent removed line up in the window they were drawn for. Drawn again for
--- the window the user goes to, or whose gutter changes, where it is another.
local function measure_again()
  local buf = api.nvim_get_current_buf()
  if drawing or not measured[buf] then
    return
  end
  local gutter = M.gutter(api.nvim_get_current_win(), "-", "AcpReviewSignDelete")
  local now = gutter and gutter[1] or ""
  if now == measured[buf] then
    return
  end
  -- Padded again where they are: typing in Insert mode (not yet reported) moved them
  -- from the rows the review gives.
  for _, h in ipairs(drawn[buf] or {}) do
    if not vim.endswith(h.sig, "\0deleted") then
      local removed = h.hunk.status ~= "conflict" and h.marks[2]
      if removed and not M.regutter(buf, M.ns, removed, gutter) then
        return M.draw(state.by_chat)
      end
      h.sig = signature(h.hunk) .. "\0" .. now
    end
  end
  measured[buf] = now
end

local group = api.nvim_create_augroup("acp.review.hunks", { clear = true })

--- Run `fn` where the current window's gutter may have changed: a window entered,
--- its gutter's options set, its buffer grown past 999 lines (or 9,999), which
--- widens the number column (typed in Insert mode, not reported until you leave it).
---@param fn fun()
function M.on_gutter_change(fn)
  api.nvim_create_autocmd({ "WinEnter", "BufWinEnter", "TextChanged", "TextChangedI" }, { group = group, callback = fn })
  api.nvim_create_autocmd("OptionSet", {
    group = group,
    pattern = { "number", "relativenumber", "numberwidth", "signcolumn", "foldcolumn", "statuscolumn" },
    callback = fn,
  })
end

M.on_gutter_change(measure_again)

return M
