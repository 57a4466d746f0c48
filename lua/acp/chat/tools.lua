-- Tool call blocks in the transcript: diff and location highlights, <CR> on a
-- location, and following the agent (the file a tool call works on, shown in the
-- non-chat window without taking the cursor there).
if jit then jit.off(true, true) end -- decision 0068
local blocks = require("acp.chat.blocks")
local branches = require("acp.chat.branches")
local config = require("acp.config")
local permission = require("acp.chat.permission")
local registry = require("acp.chat.registry")
local terminal = require("acp.editor.terminal")
local util = require("acp.util")
local windows = require("acp.editor.windows")

local M = {}
local api = vim.api

local diff_hl = { ["+"] = "AcpDiffAdd", ["-"] = "AcpDiffDelete" }
-- How the id of a mark where another branch leaves begins (view.py `MARK`).
local BRANCH_MARK = "#branch"

--- Walk the rows of a tool block's diff fences (```diff, longer when the diff
--- holds a fence of its own: acp_nvim/client/session/view.py `fenced`): `on(i,
--- text)` for each row of one, `on(i, nil)` where what came before is over: a
--- fence's row (one opens or closes) or the next file's `diff ` line (its ---/+++
--- headers follow).
---@param lines string[] the block's rows
---@param on fun(i: integer, text: string?)
local function diff_rows(lines, on)
  local fence, in_diff = nil, false -- the open fence's backticks
  for i, text in ipairs(lines) do
    local ticks, info = text:match("^(```+)(.*)$")
    if ticks and (not fence or (#ticks >= #fence and vim.trim(info) == "")) then
      fence = not fence and ticks or nil
      in_diff = fence ~= nil and info == "diff"
      on(i, nil)
    elseif in_diff then
      on(i, text:sub(1, 5) ~= "diff " and text or nil)
    end
  end
end

--- The rows of a tool block's diff fences that are in a hunk, from its first @@
--- to the next file's headers or the fence's end: offsets from the block's first
--- row, in pairs {from, to, from, to, ...} (to excluded). acp.chat.screen colours
--- them by their text (M.diff_group).
---@param lines string[] the block's rows
---@return integer[]
function M.hunks(lines)
  local spans, from = {}, nil
  local function close(to)
    if from then
      spans[#spans + 1], spans[#spans + 2], from = from, to, nil
    end
  end
  diff_rows(lines, function(i, text)
    if not text then
      close(i - 1)
    elseif text:sub(1, 2) == "@@" then
      from = from or i - 1
    end
  end)
  close(#lines)
  return spans
end

--- The group of a row in a hunk (M.hunks), from its text.
---@return string?
function M.diff_group(line)
  if line:sub(1, 2) == "@@" then
    return "AcpDiffHunk"
  end
  return diff_hl[line:sub(1, 1)]
end

--- The file and line the last of `lines` (a tool block's rows from its header)
--- stands for when it is a row of a diff fence: from the file headers above it
--- and its hunk's @@ line, counting the rows of the new text. `cwd` resolves
--- relative paths (ours, and git patches' with their a/ and b/ prefixes dropped).
---@return string? path, integer? line
local function diff_target(lines, cwd)
  -- `last`: the last row diff_rows reached; unless it is the last of `lines`, that
  -- row is outside a fence and stands for no file.
  local in_hunk, new, old, line, at, last = false, nil, nil, 1, nil, nil
  diff_rows(lines, function(i, text)
    last, at = i, nil
    if not text then
      in_hunk, new, old = false, nil, nil
      return
    end
    local start = text:match("^@@ %-%S+ %+(%d+)")
    if start then
      in_hunk, line = true, math.max(1, tonumber(start) --[[@as integer]])
      at = line
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
  end)
  local path = new ~= "/dev/null" and new or old
  if last ~= #lines or not (at and path) or path == "/dev/null" then
    return nil
  end
  if path:sub(1, 1) ~= "/" then
    path = vim.fs.joinpath(cwd, path:match("^[ab]/(.*)") or path)
  end
  return path, at
end

--- Open `path` at `line` in the non-chat window, the cursor there; a failure is one line.
local function open_file(path, line)
  local ok, err = pcall(windows.show, path, line, true)
  if not ok then
    util.notify(("cannot open %s: %s"):format(path, err))
  end
end

--- keys.chat.open (<CR>) in the transcript: a permission prompt's picker, a
--- location's file, the file and line of a diff row, a terminal
--- (acp.editor.terminal), the branches where another branch leaves (the mark names
--- :AcpBranches), else what `lhs` does without the mapping.
---@param lhs? string the key pressed (default <CR>)
function M.enter(chat, lhs)
  local row = api.nvim_win_get_cursor(0)[1] - 1
  local id, block, first = blocks.block_at(chat.transcript, chat.blocks, row)
  if id and vim.startswith(id, BRANCH_MARK) then
    return branches.pick(chat)
  end
  local offset = block and row - first
  if block and block.kind == "tool" and permission.enter(chat, block, offset) then
    return
  end
  for _, location in ipairs(block and block.locations or {}) do -- a tool call's, a plan's file
    if location.row == offset then
      return open_file(location.path, location.line)
    end
  end
  if block and block.kind == "tool" then
    -- Relative names are the session's: a worktree chat's lie in its worktree.
    local rows = api.nvim_buf_get_lines(chat.transcript, first, row + 1, false)
    local path, line = diff_target(rows, registry.cwd(chat))
    if path then
      return open_file(path, line)
    end
  end
  if not terminal.open_at_cursor() then
    api.nvim_feedkeys(vim.keycode(lhs or "<CR>"), "n", false)
  end
end

--- With `follow_agent`, show the last new location the tool call block ops of a
--- render batch report. Only existing files: a file about to be created would
--- become an empty buffer.
function M.follow(chat, ops)
  if not config.options.follow_agent then
    return
  end
  chat.followed = chat.followed or {}
  local target
  for _, op in ipairs(ops) do
    local location = op.locations and op.locations[1]
    if location then
      local key = location.path .. ":" .. (location.line or "")
      if chat.followed[op.id] ~= key then
        chat.followed[op.id] = key
        target = location
      end
    end
  end
  if target and vim.uv.fs_stat(target.path) then
    local ok, err = pcall(windows.show, target.path, target.line, false)
    if not ok then
      util.notify(("cannot follow the agent to %s: %s"):format(target.path, err), "warn")
    end
  end
end

return M
