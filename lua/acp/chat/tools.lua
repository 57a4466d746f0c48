-- Tool call blocks in the transcript: diff and location highlights, <CR> on a
-- location, and following the agent (the file a tool call works on, shown in the
-- non-chat window without taking the cursor there).
local config = require("acp.config")
local render = require("acp.chat.render")
local util = require("acp.util")

local M = {}
local api = vim.api

local diff_hl = { ["+"] = "AcpDiffAdd", ["-"] = "AcpDiffDelete" }

--- Highlights for the rows [first, last) of a tool block: diff lines (inside
--- ```diff fences, after the first @@), locations, the permission prompt.
function M.highlight(buf, ns, block, first, last)
  local lines = api.nvim_buf_get_lines(buf, first, last, false)
  local in_diff, in_hunk = false, false
  for i, line in ipairs(lines) do
    local group
    if line:sub(1, 3) == "```" then
      in_diff, in_hunk = not in_diff and line == "```diff", false
    elseif in_diff then
      if line:sub(1, 2) == "@@" then
        in_hunk, group = true, "AcpDiffHunk"
      elseif line:sub(1, 5) == "diff " then
        in_hunk = false -- the next file's headers (---/+++) are not changes
      elseif in_hunk then
        group = diff_hl[line:sub(1, 1)]
      end
    end
    if group then
      api.nvim_buf_set_extmark(buf, ns, first + i - 1, 0, { line_hl_group = group })
    end
  end
  for _, location in ipairs(block.locations or {}) do
    local line = lines[location.row + 1]
    if line then
      api.nvim_buf_set_extmark(buf, ns, first + location.row, 0, { end_col = #line, hl_group = "AcpLocation" })
    end
  end
  require("acp.chat.permission").highlight(buf, ns, block, first, lines)
end

--- A window of the current tab showing no chat: the previous one, else any.
---@return integer?
function M.target_window()
  local chat_bufs = {}
  for _, chat in pairs(require("acp.chat").chats) do
    chat_bufs[chat.transcript], chat_bufs[chat.input] = true, true
  end
  local function usable(win)
    return win ~= 0
      and api.nvim_win_is_valid(win)
      and api.nvim_win_get_tabpage(win) == api.nvim_get_current_tabpage()
      and api.nvim_win_get_config(win).relative == ""
      and not vim.wo[win].winfixbuf
      and not chat_bufs[api.nvim_win_get_buf(win)]
  end
  local previous = vim.fn.win_getid(vim.fn.winnr("#"))
  if usable(previous) then
    return previous
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if usable(win) then
      return win
    end
  end
end

--- Show `path` at `line` (1-based, clamped) in the non-chat window, splitting one
--- off when there is none; `focus` moves the cursor there.
---@param path string
---@param line? integer
---@param focus boolean
function M.show(path, line, focus)
  local buf = vim.fn.bufadd(vim.fn.fnamemodify(path, ":p"))
  vim.bo[buf].buflisted = true
  local win = M.target_window()
  if win then
    api.nvim_win_set_buf(win, buf)
  else
    win = api.nvim_open_win(buf, false, { split = "left", win = -1 })
  end
  local count = api.nvim_buf_line_count(buf)
  api.nvim_win_set_cursor(win, { math.max(1, math.min(line or 1, count)), 0 })
  if focus then
    api.nvim_set_current_win(win)
  end
end

--- The file and line the last of `lines` (a tool block's rows from its header)
--- stands for when it is a row of a ```diff fence: from the file headers above it
--- and its hunk's @@ line, counting the rows of the new text. `cwd` resolves
--- relative paths (git patches, their a/ and b/ prefixes dropped).
---@return string? path, integer? line
local function diff_target(lines, cwd)
  local in_diff, in_hunk, new, old, line, at = false, false, nil, nil, 1, nil
  for _, text in ipairs(lines) do
    at = nil
    if text:sub(1, 3) == "```" then
      in_diff, in_hunk, new, old = not in_diff and text == "```diff", false, nil, nil
    elseif in_diff then
      local start = text:match("^@@ %-%S+ %+(%d+)")
      if start then
        in_hunk, line = true, math.max(1, tonumber(start) --[[@as integer]])
        at = line
      elseif text:sub(1, 5) == "diff " then
        in_hunk, new, old = false, nil, nil
      elseif in_hunk then
        at = line
        if not text:match("^[-\\]") then -- a removed line or "\ No newline" takes no row
          line = line + 1
        end
      else
        new = text:match("^%+%+%+ ([^\t]+)") or new
        old = text:match("^%-%-%- ([^\t]+)") or old
        at = 1
      end
    end
  end
  local path = new ~= "/dev/null" and new or old
  if not (at and path) or path == "/dev/null" then
    return nil
  end
  if path:sub(1, 1) ~= "/" then
    path = vim.fs.joinpath(cwd, path:match("^[ab]/(.*)") or path)
  end
  return path, at
end

--- Open `path` at `line` in the non-chat window, the cursor there; a failure is one line.
local function open_file(path, line)
  local ok, err = pcall(M.show, path, line, true)
  if not ok then
    util.notify(("cannot open %s: %s"):format(path, err))
  end
end

--- <CR> in the transcript: a permission prompt's picker, a location's file, the
--- file and line of a diff row, a terminal (acp.editor.terminal), else the usual <CR>.
function M.enter(chat)
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local _, block, first = render.block_at(chat.transcript, chat.blocks, row)
  if block and block.kind == "tool" then
    local offset = row - first
    if require("acp.chat.permission").enter(chat, block, offset) then
      return
    end
    for _, location in ipairs(block.locations or {}) do
      if location.row == offset then
        return open_file(location.path, location.line)
      end
    end
    local path, line = diff_target(api.nvim_buf_get_lines(chat.transcript, first, row + 1, false), chat.cwd)
    if path then
      return open_file(path, line)
    end
  end
  if not require("acp.editor.terminal").open_at_cursor() then
    api.nvim_feedkeys(vim.keycode("<CR>"), "n", false)
  end
end

--- With `follow_agent`, show the last new location a render batch reports. Only
--- existing files: a file about to be created would become an empty buffer.
function M.follow(chat, ops)
  if not config.options.follow_agent then
    return
  end
  chat.followed = chat.followed or {}
  local target
  for _, op in ipairs(ops) do
    local location = op.op == "block" and op.kind == "tool" and op.locations and op.locations[1]
    if location then
      local key = location.path .. ":" .. (location.line or "")
      if chat.followed[op.id] ~= key then
        chat.followed[op.id] = key
        target = location
      end
    end
  end
  if target and vim.uv.fs_stat(target.path) then
    local ok, err = pcall(M.show, target.path, target.line, false)
    if not ok then
      util.notify(("cannot follow the agent to %s: %s"):format(target.path, err), "warn")
    end
  end
end

return M
