-- Messages to the user: one helper, fixed prefix, safe from fast events.
if jit then jit.off(true, true) end -- decision 0068
local M = {}

local levels = {
  error = vim.log.levels.ERROR,
  warn = vim.log.levels.WARN,
  info = vim.log.levels.INFO,
}

---@param message string
---@param level? "error"|"warn"|"info"
function M.notify(message, level)
  local function show()
    vim.notify("acp: " .. message, levels[level or "error"] or vim.log.levels.ERROR)
  end
  if vim.in_fast_event() then
    vim.schedule(show)
  else
    show()
  end
end

--- How long ago `stamp` (seconds since the epoch) was: "3 h ago", "just now".
---@param stamp number
---@return string
function M.age(stamp)
  local seconds = os.time() - stamp
  for _, unit in ipairs({ { 86400, "d" }, { 3600, "h" }, { 60, "min" } }) do
    if seconds >= unit[1] then
      return ("%d %s ago"):format(math.floor(seconds / unit[1]), unit[2])
    end
  end
  return "just now"
end

--- `n` of `noun`: "1 turn", "3 turns".
---@param n integer
---@param noun string
---@return string
function M.count(n, noun)
  return ("%d %s%s"):format(n, noun, n == 1 and "" or "s")
end

-- White space beyond ASCII's, as Python's str.split() knows it (U+0085, the
-- no-break, typographic and ideographic spaces, the line and paragraph
-- separators): each UTF-8 sequence a space.
local WIDE_SPACES = {}
for _, space in ipairs({
  "\194\133", "\194\160", "\225\154\128", "\226\128\128", "\226\128\129", "\226\128\130",
  "\226\128\131", "\226\128\132", "\226\128\133", "\226\128\134", "\226\128\135", "\226\128\136",
  "\226\128\137", "\226\128\138", "\226\128\168", "\226\128\169", "\226\128\175", "\226\129\159",
  "\227\128\128",
}) do
  WIDE_SPACES[space] = " "
end

--- `text`'s words on one line, one space between them: a name or title shows on
--- a line of its own (the winbar, a picker's entry). The same words and spaces as
--- the Python side's `one_line`: a name typed with a no-break space or U+2028
--- showed them in the winbar and a space in the history's picker. Control
--- characters part words as spaces do: a NUL, which Vim's functions refuse
--- ("Using a Blob as a String"), left the winbar undrawn.
---@param text string
---@return string
function M.one_line(text)
  -- The sequences start with the bytes C2, E1, E2 or E3; %c holds the file
  -- separators (\28-\31), white space to Python too, and NUL.
  local spaced = text:gsub("[\194\225\226\227][\128-\191][\128-\191]?", WIDE_SPACES)
  return vim.trim((spaced:gsub("[%s%c]+", " ")))
end

--- `text` without Python's white space (util.one_line's) at either end.
local function strip(text)
  local wide = "[\194\225\226\227][\128-\191][\128-\191]?"
  local before
  repeat
    before = text
    text = text:gsub("^[%s\28-\31]+", ""):gsub("[%s\28-\31]+$", "")
    local first, last = text:match("^" .. wide), text:match(wide .. "$")
    text = WIDE_SPACES[first] and text:sub(#first + 1) or text
    text = WIDE_SPACES[last] and text:sub(1, -#last - 1) or text
  until text == before
  return text
end

--- `text` on one row, its lines joined by ` ⏎ ` so that they stay apart: a queued
--- or earlier prompt in a picker, as the transcript's titles show a tool call's
--- script (the Python side's `one_row`, whose rule this is: the same lines, the same
--- ends). A NUL is a space: vim.ui.select's inputlist() refuses it.
---@param text string
---@return string
function M.one_row(text)
  -- What ends a line to Python's str.splitlines(): "\n", "\r\n" (one), "\r", \v, \f,
  -- the file, group and record separators, U+0085, U+2028 and U+2029.
  local lines = strip((text:gsub("%z", " "))):gsub("\r\n", "\n"):gsub("[\r\11\12\28-\30]", "\n")
  lines = lines:gsub("\194\133", "\n"):gsub("\226\128[\168\169]", "\n")
  return (lines:gsub("\n", " ⏎ "))
end

--- Raise a user error without file:line noise.
---@param message string
function M.user_error(message)
  error("acp: " .. message, 0)
end

--- Whether `value` is a `kind` of a public function's argument: "integer" a whole
--- number, "list" a list, "list of strings" one of strings only, else its Lua type.
local function is_a(value, kind)
  if kind == "integer" then
    return type(value) == "number" and value % 1 == 0
  elseif kind == "list" then
    return type(value) == "table" and vim.islist(value)
  elseif kind == "list of strings" then
    return is_a(value, "list") and vim.iter(value):all(function(item)
      return type(item) == "string"
    end)
  end
  return type(value) == kind
end

--- An argument as an error shows it: a table on one line.
local function shown(value)
  return vim.inspect(value, { newline = " ", indent = "" })
end

--- Raise a user error when argument `name` of public function `fn` is missing or
--- not a `kind`, in vim.validate's words: `forget: id: expected integer, got "x"`.
---@param fn string
---@param name string
---@param value any
---@param kind "string"|"integer" a string is not blank
function M.required(fn, name, value, kind)
  if not (is_a(value, kind) and (kind ~= "string" or value:find("%S"))) then
    M.user_error(("%s: %s: expected %s, got %s"):format(fn, name, kind, shown(value)))
  end
end

--- Raise a user error when optional argument `name` of public function `fn` is
--- given but of none of `kinds`: `set_mode: mode: expected string, got 1` (it went
--- to the agent as it was, whose error made no sense to the user).
---@param fn string
---@param name string
---@param value any
---@param ... "string"|"integer"|"boolean"
function M.optional(fn, name, value, ...)
  local kinds = { ... }
  if value ~= nil and not vim.iter(kinds):any(function(kind)
    return is_a(value, kind)
  end) then
    M.user_error(("%s: %s: expected %s, got %s"):format(fn, name, table.concat(kinds, " or "), shown(value)))
  end
end

--- Raise a user error when `opts` of public function `fn` is no table, holds a key
--- `kinds` does not name (a typo, `agnet`, would be ignored in silence), or one of
--- its keys holds another kind than `kinds` names (a key to "string", "integer",
--- "boolean", "list" or "function"; vim.NIL counts as not given): `history:
--- opts.limit: expected integer, got "x"`.
---@param fn string
---@param opts any
---@param kinds table<string, "string"|"integer"|"boolean"|"list"|"list of strings"|"function">
function M.options(fn, opts, kinds)
  if type(opts) ~= "table" then
    M.user_error(("%s: opts: expected table, got %s"):format(fn, shown(opts)))
  end
  for key in pairs(opts) do
    if not kinds[key] then
      local known = vim.tbl_keys(kinds)
      table.sort(known)
      M.user_error(("%s: opts.%s: unknown option (%s)"):format(fn, tostring(key), table.concat(known, ", ")))
    end
  end
  for key, kind in pairs(kinds) do
    local value = opts[key]
    if value ~= nil and value ~= vim.NIL and not is_a(value, kind) then
      M.user_error(("%s: opts.%s: expected %s, got %s"):format(fn, key, kind, shown(value)))
    end
  end
end

--- Why this system cannot run the plugin, or nil. It is Unix only: agents run in
--- process groups, commands through /bin/sh, the editor MCP server on a Unix socket.
---@return string?
function M.unsupported()
  if vim.fn.has("win32") == 1 then
    return "acp.nvim runs on Unix only (Linux, macOS, BSD): it needs process groups, "
      .. "/bin/sh and Unix sockets, which Windows lacks; WSL is Linux"
  end
end

--- Make `buf` a Markdown buffer highlighted as the chat's transcript: 'filetype'
--- markdown (its ftplugin and the user's FileType autocmds run) and 'syntax'
--- acpchat (syntax/acpchat.vim: a screen of new rows costs it a few tenths of a
--- millisecond against markdown.vim's 10-20 ms, decision 0049), unless treesitter
--- highlights it. markdown.vim is loaded by a FileType autocmd that Neovim skips for
--- buffers treesitter highlights (runtime syntax/syntax.vim): it took 10-50 ms of
--- opening a chat or an export only to be replaced.
---@param buf integer
function M.chat_markdown(buf)
  vim.b[buf].ts_highlight = true
  vim.bo[buf].filetype = "markdown"
  local treesitter = package.loaded["vim.treesitter.highlighter"]
  if not (treesitter and treesitter.active[buf]) then -- else the user's FileType autocmd started it
    vim.b[buf].ts_highlight = nil
    vim.bo[buf].syntax = "acpchat"
  end
end

--- Write `lines` to the file `path` all or nothing (decision 0037): to a new file
--- beside it, synced, then renamed over it; on failure (a full disk) `path` is as
--- it was. A symlink is written through to its target, as :write does. Returns
--- nil, or why nothing was written.
---@param path string
---@param lines string[]
---@return string?
function M.write_lines(path, lines)
  path = vim.uv.fs_realpath(path) or path -- renamed over, a link would become a file
  local temporary = ("%s/.%s.%d.acp~"):format(vim.fs.dirname(path), vim.fs.basename(path), vim.uv.os_getpid())
  local ok, failed = pcall(vim.fn.writefile, lines, temporary, "s")
  local renamed, err = false, nil
  if ok and failed == 0 then
    renamed, err = vim.uv.fs_rename(temporary, path)
  end
  if renamed then
    return nil
  end
  vim.uv.fs_unlink(temporary)
  local why = not ok and (tostring(failed):match("E%d+: ([^\n]*)$") or tostring(failed)) or err or "write error"
  -- Vim and libuv name the file they failed on: the temporary, which the user never saw.
  local named = vim.pesc(temporary)
  return (why:gsub(": " .. named .. ".*$", ""):gsub(" " .. named, ""))
end

local later_writes = 0

--- Write `data` (the file's whole text) as M.write_lines writes lines, off Neovim's
--- loop: libuv's threads write, sync and rename the new file (the sync alone took
--- 1-2 ms, Neovim answering nothing meanwhile), then `done(err)` runs on the loop:
--- err is nil, or why `path` was left as it was.
---@param path string
---@param data string
---@param done fun(err: string?)
function M.write_later(path, data, done)
  path = vim.uv.fs_realpath(path) or path -- as M.write_lines
  later_writes = later_writes + 1
  local temporary = ("%s/.%s.%d.%d.acp~"):format(vim.fs.dirname(path), vim.fs.basename(path), vim.uv.os_getpid(), later_writes)
  local uv = vim.uv
  local finish = vim.schedule_wrap(done)
  local function failed(err, fd)
    -- libuv names the file it failed on: the temporary, which the user never saw.
    err = (tostring(err):gsub(": " .. vim.pesc(temporary) .. "$", ""))
    local function unlink()
      uv.fs_unlink(temporary, function()
        finish(err)
      end)
    end
    if fd then
      uv.fs_close(fd, unlink)
    else
      unlink()
    end
  end
  uv.fs_open(temporary, "w", 438, function(open_err, fd)
    if not fd then
      return failed(open_err)
    end
    uv.fs_write(fd, data, 0, function(write_err, written)
      if written ~= #data then
        return failed(write_err or "short write", fd)
      end
      uv.fs_fsync(fd, function(sync_err)
        if sync_err then
          return failed(sync_err, fd)
        end
        uv.fs_close(fd, function(close_err)
          if close_err then
            return failed(close_err)
          end
          uv.fs_rename(temporary, path, function(rename_err)
            if rename_err then
              return failed(rename_err)
            end
            finish(nil)
          end)
        end)
      end)
    end)
  end)
end

local last_mark = 0

--- nvim_buf_set_extmark with an id never given before. Undo puts a mark back
--- where it was by its id, so a mark drawn with the id of a deleted one (Neovim
--- reuses them) would jump to where that one was.
---@return integer id
function M.extmark(buf, ns, row, col, opts)
  last_mark = last_mark + 1
  opts.id = last_mark
  return vim.api.nvim_buf_set_extmark(buf, ns, row, col, opts)
end

-- One slice of garbage collection may take this long (ns) before the event loop
-- gets its turn again: a key or request that comes meanwhile waits for the rest of
-- it (decision 0071).
local SLICE_NS = 0.25e6
-- Neovim has SafeState from 0.10 on; without it `when_idle` waits for its timer.
local HAS_SAFE_STATE = vim.fn.exists("##SafeState") == 1
-- How long `when_idle` waits for Neovim to draw: it does not while Lua waits in
-- vim.wait, or at a prompt.
local IDLE_WAIT_MS = 100

--- Run `fn` once Neovim has drawn what is pending and has nothing else to do
--- (SafeState; `fn` is scheduled from there), or after IDLE_WAIT_MS where that does
--- not come. Neovim draws only when nothing is scheduled: work that schedules
--- itself again, run at once, would hold back what was just written.
---@param fn fun()
local function when_idle(fn)
  local done = false
  local function run()
    if not done then
      done = true
      fn()
    end
  end
  if HAS_SAFE_STATE then
    vim.api.nvim_create_autocmd("SafeState", {
      once = true,
      callback = function()
        vim.schedule(run)
      end,
    })
  end
  vim.defer_fn(run, IDLE_WAIT_MS)
end

-- Work that grew the Lua heap by less than this share of what our last collection
-- left is left to LuaJIT's own collector, which waits until the heap has doubled:
-- two full cycles walk all that is live in Neovim's Lua heap, the user's plugins'
-- share too, ~1 ms of CPU per MB, however little the work left (decision 0070).
local WORTH = 0.1
local collecting = false
local heap_after_kb = 0 -- the Lua heap when our last collection ended

--- Whether LuaJIT's collector is between two cycles, with the heap at `heap_kb`: it
--- starts one once the heap reaches 'pause' percent (200 unless a plugin set it) of
--- what was live after its last cycle, which was ours while the heap stays below
--- that share of what ours left (decision 0089).
local function between_cycles(heap_kb)
  local pause = collectgarbage("setpause", 0) -- LuaJIT has no getter: set it back
  collectgarbage("setpause", pause)
  return heap_kb < heap_after_kb * pause / 100
end

--- Collect the Lua garbage that work just ended (a chat's turn) left: one full cycle
--- when the collector was between cycles, else two (the first finishes the one
--- under way, which may have started before that garbage), in slices of ~0.25 ms
--- with the event loop's work between them, the first once Neovim has drawn
--- (`when_idle`): a turn's last words come first. LuaJIT collects when its heap reaches
--- twice what was live after its last cycle, and the pages it grew into stay
--- Neovim's: without this, a long chat's Lua heap (and Neovim's RSS) keeps the
--- garbage of its turns (doc/performance.md). Nothing happens while the heap has
--- grown by less than a tenth since the last time.
function M.collect_garbage()
  if collecting or collectgarbage("count") < heap_after_kb * (1 + WORTH) then
    return
  end
  collecting = true
  local cycles, needed = 0, nil
  local function slice()
    -- Asked as it starts: the heap may have grown since (the wait for a draw).
    needed = needed or (between_cycles(collectgarbage("count")) and 1 or 2)
    local deadline = vim.uv.hrtime() + SLICE_NS
    repeat
      if collectgarbage("step", 16) then
        cycles = cycles + 1
        if cycles == needed then
          collecting = false
          heap_after_kb = collectgarbage("count")
          return
        end
      end
    until vim.uv.hrtime() >= deadline
    vim.schedule(slice)
  end
  when_idle(slice)
end

--- Set window options like :setlocal: a buffer shown later in `win` gets the
--- user's values back (vim.wo[win] would also change the window's global values).
--- A value the window has already is left alone: setting a fold option again
--- evaluates 'foldexpr' for every line of the buffer.
---@param win integer
---@param options table<string, any>
function M.set_local(win, options)
  for name, value in pairs(options) do
    local scope = { scope = "local", win = win }
    if vim.api.nvim_get_option_value(name, scope) ~= value then
      vim.api.nvim_set_option_value(name, value, scope)
    end
  end
end

--- Show in `win` what follows `buf` there once it goes (its window closes, or the
--- buffer is deleted): the window's alternate buffer, else the listed one used
--- last, else a new empty one; what :bdelete leaves in a window.
---@param win integer
---@param buf integer
function M.show_instead(win, buf)
  local api = vim.api
  local alternate = api.nvim_win_call(win, function()
    return vim.fn.bufnr("#")
  end)
  if not (alternate > 0 and alternate ~= buf and vim.bo[alternate].buflisted) then
    local last
    for _, info in ipairs(vim.fn.getbufinfo({ buflisted = 1 })) do
      if info.bufnr ~= buf and (not last or info.lastused > last.lastused) then
        last = info
      end
    end
    alternate = last and last.bufnr or api.nvim_create_buf(true, false)
  end
  api.nvim_win_set_buf(win, alternate)
end

--- Close `win`, hiding its buffer. The last window of all cannot close: it shows
--- what M.show_instead picks.
---@param win integer
function M.close_window(win)
  local api = vim.api
  if not api.nvim_win_is_valid(win) or pcall(api.nvim_win_close, win, true) then
    return
  end
  M.show_instead(win, api.nvim_win_get_buf(win))
end

--- Go to a window showing `buf` (in any tab page), else show it in a new tab page.
---@param buf integer
---@return boolean opened whether a new tab page was opened
function M.focus_or_tab(buf)
  local win = vim.fn.win_findbuf(buf)[1]
  if win then
    vim.api.nvim_set_current_win(win)
    return false
  end
  vim.cmd("tab sbuffer " .. buf)
  return true
end

--- Whether the command-line window (q:) is open: no other window may open, close or
--- be entered then (E11).
---@return boolean
function M.in_cmdwin()
  return vim.fn.getcmdwintype() ~= ""
end

--- Plugin buffer `buf` read again by :e! from what `draw` puts in it, as a file's is
--- from the disk (emptied, its keys acted on text it no longer showed), and left
--- unlisted; `gone` runs once it is wiped.
---@param buf integer
---@param draw fun()
---@param gone fun()
function M.drawn_again_on_edit(buf, draw, gone)
  vim.api.nvim_create_autocmd("BufReadCmd", {
    buffer = buf,
    callback = function()
      draw()
      vim.bo[buf].buflisted = false -- :e! lists the buffer it edits
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", { buffer = buf, once = true, callback = gone })
end

--- Run `fn` now, or, while the command-line window is open, once it has closed
--- (CmdwinLeave comes before it closes, hence the schedule; it may open again).
---@param fn fun()
function M.outside_cmdwin(fn)
  if not M.in_cmdwin() then
    return fn()
  end
  vim.api.nvim_create_autocmd("CmdwinLeave", {
    once = true,
    callback = function()
      vim.schedule(function()
        M.outside_cmdwin(fn)
      end)
    end,
  })
end

--- `turn` as the functions that take one want it: nil, or a whole number; else a
--- user error.
---@param turn any
---@return integer?
function M.turn_number(turn)
  if turn ~= nil and (type(turn) ~= "number" or turn % 1 ~= 0) then
    M.user_error(("a turn is a whole number, not %s"):format(vim.inspect(turn)))
  end
  return turn
end

--- Map `q` in normal mode on `buf` to close the window showing it.
---@param buf integer
---@param what string what closes, for the mapping's description
function M.map_close(buf, what)
  vim.keymap.set("n", "q", function()
    M.close_window(vim.api.nvim_get_current_win())
  end, { buffer = buf, nowait = true, desc = "acp: close the " .. what })
end

--- `path` (`~` and variables expanded) as an absolute, normalized directory name.
---@param path string
---@return string
function M.directory(path)
  return vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(path), ":p"))
end

--- The plugin's root directory (holding lua/, plugin/, acp_nvim/).
function M.root()
  local source = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(source, ":p:h:h:h")
end

return M
