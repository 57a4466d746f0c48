-- Terminal buffers: agent commands (a real PTY each) and display-only terminals.
-- Python owns what they mean; this file owns jobs, buffers and windows, and sends
-- each command's raw output back in batches (one notification per ~10 ms, not one
-- per read).
if jit then jit.off(true, true) end -- decision 0068
local bufnames = require("acp.bufnames")
local host = require("acp.host")
local util = require("acp.util")

local M = {}
local api = vim.api

---@class acp.Terminal
---@field buf integer
---@field job? integer job id of a command (nil for a display terminal)
---@field pid? integer process id = process group of a command
---@field chan? integer channel of a display terminal (nvim_open_term)
---@field running boolean
---@field chat? integer the chat whose agent made it: its transcript opens it, its close deletes it

---@type table<string, acp.Terminal>
M.terminals = {}
---@type string? the newest terminal, for :AcpTerminal without a key
M.last = nil

local FLUSH_MS = 10
-- Output not yet sent, in order: {key, parts, exit?}; `open` holds each key's entry
-- that more output may still join.
local queue, open = {}, {}
local flush_timer = nil

local function flush()
  -- Never start a Python host just for this (it stopped, or Neovim is exiting).
  if #queue == 0 or vim.v.exiting ~= vim.NIL or not (host.chan or host.rplugin_ready) then
    queue, open = {}, {}
    return
  end
  local chunks = {}
  for _, entry in ipairs(queue) do
    local chunk = { key = entry.key, exit = entry.exit }
    if #entry.parts > 0 then
      chunk.data = vim.base64.encode(table.concat(entry.parts))
    end
    table.insert(chunks, chunk)
  end
  queue, open = {}, {}
  host.notify("terminal_output", { chunks = chunks })
end

local function entry_for(key)
  local entry = open[key]
  if not entry then
    entry = { key = key, parts = {} }
    open[key] = entry
    table.insert(queue, entry)
  end
  return entry
end

-- Each running command's marks (see DRAIN) and the output held back while it may
-- be the end mark's beginning: {start, started, head, mark, held, stopping}.
-- `stopping`: a stop asked for before the start mark came (its `wipe`), else nil.
local drains = {}

--- `text` past the start mark, once it has come whole (the first bytes the command's
--- terminal gets); nil while it has not.
local function past_start(drain, text)
  if drain.started then
    return text
  end
  drain.head = drain.head .. text
  if #drain.head < #drain.start then
    return nil
  end
  drain.started = true
  text, drain.head = drain.head, ""
  if vim.startswith(text, drain.start) then
    text = text:sub(#drain.start + 1)
  end
  return text
end

--- `text` without the end mark, and whether the mark was in it.
local function cut_mark(drain, text)
  text = drain.held .. text
  drain.held = ""
  local first, last = text:find(drain.mark, 1, true)
  if first then
    return text:sub(1, first - 1) .. text:sub(last + 1), true
  end
  -- The mark starts with ESC: only an ESC near the end can begin a mark cut in two.
  local from = math.max(1, #text - #drain.mark + 2)
  local esc = text:find("\27", from, true)
  while esc do
    if drain.mark:sub(1, #text - esc + 1) == text:sub(esc) then
      drain.held = text:sub(esc)
      return text:sub(1, esc - 1), false
    end
    esc = text:find("\27", esc + 1, true)
  end
  return text, false
end

--- Whether `term`'s command (its wrapper, the leader of its process group) has not
--- exited: only then is its pid, as a group, certainly still ours.
local function alive(term)
  return term.job ~= nil and vim.fn.jobwait({ term.job }, 0)[1] == -1
end

local function on_output(key, data)
  local text = table.concat(data, "\n")
  local drain = drains[key]
  if drain then
    local was_started = drain.started
    text = past_start(drain, text)
    if text == nil then
      return
    end
    if not was_started and drain.stopping ~= nil then
      -- Asked to stop before it was its own program: now it is. Outside this
      -- callback (jobwait() may run the job's on_exit).
      local wipe = drain.stopping
      vim.schedule(function()
        M.stop({ key }, wipe)
      end)
    end
    local ended
    text, ended = cut_mark(drain, text)
    if ended then
      -- Everything the command printed has been read: let the wrapper exit.
      drains[key] = nil
      -- Only while it waits for us: after its 5 s it exits, and its pid may be
      -- reused. Asked outside this callback: jobwait() may run the job's on_exit.
      local term = M.terminals[key]
      vim.schedule(function()
        if alive(term) then
          pcall(vim.uv.kill, term.pid, "sigusr1")
        end
      end)
    end
  end
  if text == "" then
    return
  end
  table.insert(entry_for(key).parts, text)
  if not flush_timer then
    flush_timer = vim.defer_fn(function()
      flush_timer = nil
      flush()
    end, FLUSH_MS)
  end
end

local function on_exit(key, code)
  local drain = drains[key]
  drains[key] = nil
  if drain and drain.stopping then
    -- It ended before it said it started: the wipe the stop still owes.
    vim.schedule(function()
      M.stop({ key }, true)
    end)
  end
  if drain and drain.held ~= "" then
    table.insert(entry_for(key).parts, drain.held)
  end
  local term = M.terminals[key]
  if term then
    term.running = false
  end
  entry_for(key).exit = code
  open[key] = nil
  flush()
end

-- Neovim's own exit only hangs up on PTY jobs (a command ignoring SIGHUP would
-- survive it): kill each running command's whole process group. Also when the
-- Python host exits: the agents died with it, their commands must not outlive them.
function M.kill_running()
  for _, term in pairs(M.terminals) do
    if term.pid and alive(term) then
      pcall(vim.uv.kill, -term.pid, "sigkill")
      pcall(vim.fn.jobstop, term.job)
    end
  end
end

--- Whether `chat` (nil: none) has closed: what the agent asked for it while the
--- close was on its way to Python would make a buffer its close_chat never deletes.
local function closed(chat)
  return chat ~= nil and require("acp.chat.registry").chats[chat] == nil
end

local function remember(key, term)
  if next(M.terminals) == nil then
    api.nvim_create_autocmd("VimLeavePre", {
      group = api.nvim_create_augroup("acp.terminals", { clear = true }),
      callback = M.kill_running,
    })
  end
  M.terminals[key] = term
  M.last = key
  local first = api.nvim_buf_get_name(term.buf)
  pcall(bufnames.give, term.buf, "acp://terminal/" .. key)
  -- A rename keeps the first name (jobstart's term://…) in a new unlisted buffer,
  -- the newest one, as the alternate file: one stray buffer per command.
  local stray = vim.fn.bufnr("$")
  if first ~= "" and stray ~= term.buf and api.nvim_buf_get_name(stray) == first then
    pcall(api.nvim_buf_delete, stray, { force = true })
  end
  -- Neovim killed outright runs no VimLeavePre, and the hang-up of its terminals
  -- reaches only the wrapper (see DRAIN): the Python side holds the command's
  -- group to end it with Neovim, as it does the agents' (until the exit it hears).
  if term.pid and host.running() then
    host.notify("terminal_started", { key = key, pid = term.pid, nvim_pid = vim.fn.getpid() })
  end
end

-- Neovim drops PTY output still unread when the process exits (neovim#37982,
-- #26543): the agent would read a command's output without its end. A /bin/sh
-- wrapper runs the command, then prints an end mark (an OSC sequence the terminal
-- ignores, with a nonce no command prints by chance) and waits. Once Lua has read
-- the mark it has read every byte before it, and SIGUSR1 lets the wrapper exit with
-- the command's code; it stops waiting by itself after 5 s.
-- Stopped (M.stop hangs up the group, then Neovim sends SIGTERM and SIGKILL to it
-- while the job runs), the wrapper outlives the command: a signal it traps waits
-- for the command to end. Then it sends SIGTERM to what is left of its group and
-- dies of the signal that stopped it. So the group is only ever signalled while its
-- leader lives, and its pid cannot be a stranger's (decision 0036).
-- Nor before the command prints its start mark, just before it becomes the command
-- (the wrapper's traps set, the command in the group): until the wrapper runs its
-- own program it is a forked Neovim with Neovim's signal handlers, which pass a
-- signal on to Neovim through a pipe they share, and Neovim died of a SIGHUP it
-- was never sent (exit code 1, "Caught deadly signal 'SIGHUP'"): an agent killing a
-- command it had just started, on a busy machine. A stop asked before waits for it.
local DRAIN = [[n=$1; shift; stop=; trap 'stop=HUP' HUP; trap 'stop=TERM' TERM; ]]
  .. [[end_() { trap '' TERM; kill -TERM 0 2>/dev/null; trap - "$stop"; kill -s "$stop" $$; }; ]]
  .. [[/bin/sh -c 'printf "\033]5379;%s+\007" "$0"; exec "$@"' "$n" "$@"; ]]
  .. [[rc=$?; [ -n "$stop" ] && end_; trap 'kill $! 2>/dev/null; exit $rc' USR1; ]]
  .. [[printf '\033]5379;%s\007' "$n"; sleep 5 & wait $!; ]]
  .. [[kill $! 2>/dev/null; [ -n "$stop" ] && end_; exit $rc]]

--- argv for `cmd` (a string: through 'shell' and 'shellcmdflag'; a list: argv),
--- wrapped to print `nonce` in its end mark.
local function drained(cmd, nonce)
  local argv = cmd
  if type(cmd) == "string" then
    argv = vim.split(vim.o.shell, " ", { trimempty = true })
    vim.list_extend(argv, vim.split(vim.o.shellcmdflag, " ", { trimempty = true }))
    table.insert(argv, cmd)
  elseif vim.fn.executable(cmd[1]) ~= 1 then
    error(cmd[1] .. " is not executable", 0)
  end
  return vim.list_extend({ "/bin/sh", "-c", DRAIN, "sh", nonce }, argv)
end

--- A hidden buffer for a terminal; `q` (normal mode) closes its window.
local function new_buffer()
  local buf = api.nvim_create_buf(false, true)
  util.map_close(buf, "terminal window")
  return buf
end

--- Run `cmd` (a string: through 'shell'; a list: argv) in a new terminal buffer,
--- hidden unless `show` (then opened in Terminal mode, for the user to type in).
--- In the command-line window Neovim makes no terminal (E11): nothing starts and
--- nil is returned, for Python to ask again once M.allowed() (decision 0007).
---@param key string
---@param cmd string|string[]
---@param cwd string
---@param env table<string, string>
---@param show? boolean
---@param chat? integer
---@return integer? pid
function M.create(key, cmd, cwd, env, show, chat)
  if closed(chat) then
    error("its chat is closed", 0)
  end
  if util.in_cmdwin() then
    return nil
  end
  local nonce = ("%x%x"):format(vim.uv.hrtime(), math.random(0x3fffffff))
  local argv = drained(cmd, nonce)
  local buf = new_buffer()
  local ok, job = pcall(api.nvim_buf_call, buf, function()
    return vim.fn.jobstart(argv, {
      term = true,
      cwd = cwd,
      env = next(env) and env or nil,
      on_stdout = function(_, data)
        on_output(key, data)
      end,
      on_exit = function(_, code)
        on_exit(key, code)
      end,
    })
  end)
  if not ok or job <= 0 then
    pcall(api.nvim_buf_delete, buf, { force = true })
    local program = type(cmd) == "table" and cmd[1] or vim.o.shell
    error(ok and (program .. " is not executable") or job, 0)
  end
  local pid = vim.fn.jobpid(job)
  drains[key] = {
    start = ("\27]5379;%s+\7"):format(nonce),
    started = false,
    head = "",
    mark = ("\27]5379;%s\7"):format(nonce),
    held = "",
  }
  remember(key, { buf = buf, job = job, pid = pid, running = true, chat = chat })
  if show then
    vim.schedule(function()
      util.outside_cmdwin(function()
        if api.nvim_buf_is_valid(buf) then
          M.open(key)
          vim.cmd.startinsert()
        end
      end)
    end)
  end
  return pid
end

local cmdwin_watched = false

--- Whether a terminal may be made now. If not (the command-line window is open),
--- Python hears `cmdwin_closed` once it has closed.
---@return boolean
function M.allowed()
  if not util.in_cmdwin() then
    return true
  end
  if not cmdwin_watched then
    cmdwin_watched = true
    util.outside_cmdwin(function()
      cmdwin_watched = false
      -- Never start a Python host for this (it stopped meanwhile).
      if host.chan or host.rplugin_ready then
        host.notify("cmdwin_closed", {})
      end
    end)
  end
  return false
end

local function new_display()
  local buf = new_buffer()
  return buf, api.nvim_open_term(buf, {})
end

--- Show bytes in display-only terminal `key` (no input) of `chat`; `reset` starts a
--- fresh screen.
---@param key string
---@param data string
---@param reset boolean
---@param chat? integer
function M.write(key, data, reset, chat)
  if closed(chat) then
    return
  end
  local term = M.terminals[key]
  if not term or not api.nvim_buf_is_valid(term.buf) then
    local buf, chan = new_display()
    term = { buf = buf, chan = chan, running = false, chat = chat }
    remember(key, term)
  elseif reset then
    -- A terminal cannot forget its scrollback: a new buffer takes the old one's
    -- windows and name. The output goes to it at once, the swap waits for the
    -- command-line window to close (no buffer may go there: E11).
    local old = term.buf
    term.buf, term.chan = new_display()
    local new = term.buf
    util.outside_cmdwin(function()
      for _, win in ipairs(vim.fn.win_findbuf(old)) do
        api.nvim_win_set_buf(win, new)
      end
      pcall(api.nvim_buf_delete, old, { force = true })
      pcall(bufnames.give, new, "acp://terminal/" .. key)
    end)
  end
  if data ~= "" then
    api.nvim_chan_send(term.chan, data)
  end
end

--- Stop the commands of `keys` that still run: a hang-up to the process group, as
--- a terminal closing would give, then Neovim's SIGTERM and SIGKILL to it for as
--- long as its leader, the wrapper, lives (see DRAIN); `wipe` also deletes the
--- buffers.
---@param keys string[]
---@param wipe boolean
function M.stop(keys, wipe)
  for _, key in ipairs(keys) do
    local term = M.terminals[key]
    local drain = drains[key]
    if drain and not drain.started then
      -- Not yet its own program (see DRAIN): stopped once it says it is.
      drain.stopping = wipe or drain.stopping or false
    elseif term then
      if term.pid and alive(term) then
        pcall(vim.uv.kill, -term.pid, "sighup")
        vim.fn.jobstop(term.job)
      end
      if wipe then
        M.terminals[key] = nil
        if M.last == key then
          M.last = nil
        end
        -- No buffer may go in the command-line window (E11): it goes once that closes.
        util.outside_cmdwin(function()
          pcall(api.nvim_buf_delete, term.buf, { force = true })
        end)
      end
    end
  end
end

--- `chat` closed: stop its commands still running and delete every terminal buffer
--- it had, those the agent released and those of its agent before an :AcpRestart.
---@param chat integer
function M.close_chat(chat)
  local keys = {}
  for key, term in pairs(M.terminals) do
    if term.chat == chat then
      table.insert(keys, key)
    end
  end
  M.stop(keys, true)
end

--- Open terminal `key` (default: the newest) in a split, or focus the window showing
--- it; nil when the user wiped its buffer (the command went with it).
---@param key? string
---@return integer? buf
function M.open(key)
  key = key or M.last
  local term = key and M.terminals[key]
  if not term then
    util.user_error(key and ("no terminal %s"):format(key) or "no terminal yet")
  end
  if not api.nvim_buf_is_valid(term.buf) then
    util.notify(("terminal %s: its buffer was wiped"):format(key), "warn")
    return nil
  end
  local win = vim.fn.win_findbuf(term.buf)[1]
  if win then
    api.nvim_set_current_win(win)
  else
    vim.cmd("botright 15split")
    api.nvim_win_set_buf(0, term.buf)
    -- Follow the output as it arrives.
    api.nvim_win_set_cursor(0, { api.nvim_buf_line_count(term.buf), 0 })
  end
  return term.buf
end

--- In a transcript: open the terminal whose `[terminal KEY · …]` line is at or above
--- the cursor within the same tool call. Returns whether there was one.
--- Only the chat's own: keys are counted per Python host, so a chat kept from an
--- earlier Neovim names keys that now may be another chat's commands.
---@return boolean
function M.open_at_cursor()
  local buf = api.nvim_get_current_buf()
  local chat = require("acp.chat.registry").of_buffer(buf)
  local row = api.nvim_win_get_cursor(0)[1]
  local lines = api.nvim_buf_get_lines(buf, math.max(0, row - 200), row, false)
  for i = #lines, 1, -1 do
    local key = lines[i]:match("^%[terminal (%S+) ·")
    local term = key and M.terminals[key]
    if term and (chat == nil or term.chat == chat.id) then
      M.open(key)
      return true
    end
    if lines[i]:match("^#### ") then
      break
    end
  end
  return false
end

--- A terminal key's number (`t41` -> 41; 0 for a key without one).
local function number_of(key)
  return tonumber(key:match("%d+")) or 0
end

--- The number after the highest terminal key (`t41` -> 42).
---@return integer
function M.next_number()
  local highest = 0
  for key in pairs(M.terminals) do
    highest = math.max(highest, number_of(key))
  end
  return highest + 1
end

--- Keys of the terminals :AcpTerminal can open, newest last (for completion): not
--- those whose buffer the user wiped.
---@return string[]
function M.keys()
  local keys = {}
  for key, term in pairs(M.terminals) do
    if api.nvim_buf_is_valid(term.buf) then
      table.insert(keys, key)
    end
  end
  table.sort(keys, function(a, b)
    return number_of(a) < number_of(b)
  end)
  return keys
end

host.on_exit(M.kill_running)

return M
