-- Starts and stops the Python process, sends commands, receives render batches.
-- No protocol knowledge here: Python owns state, Lua owns pixels.
--
-- What Python sends arrives in M.apply: a list of items, each a map whose `kind`
-- picks its handler in M.handlers (acp_nvim/nvim/batcher.py types them, BatchItem).
-- The transport fires events and tells the user itself; the modules that draw
-- register the other kinds (M.handle), so it requires none of them, and they hear
-- of a failure or an exit through M.on_failure and M.on_exit.
--
-- A host that cannot start (no Python, a Python too old or without the
-- dependencies) or that dies becomes one paragraph saying what failed and the
-- fix (M.failure): every chat shows it and fires AcpError, while the host's
-- stderr (the traceback) goes to :AcpLog. Only :AcpChat and :AcpInstall start
-- it again (M.retry).
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local util = require("acp.util")

local M = {}

---@type integer? channel of the Python process (job mode)
M.chan = nil
---@type {message: string}? why the host is not running
M.failure = nil
---@type boolean the running host has sent a batch or an answer: it started (an exit after that is a death)
M.heard = false
---@type (fun(): string?)? why the host must not start now (acp.install sets it)
M.hold = nil

-- The line `python -m acp_nvim` ends with when it cannot start (acp_nvim/__main__.py).
local START_ERROR = "acp.nvim start error: "
local LOG_LINES = 200
-- The host's stderr, as :AcpLog shows it.
local stderr_log = {}
---@type {show: fun(message: string), shown: fun(): boolean}[]
local failure_listeners = {}
---@type fun()[]
local exit_listeners = {}
-- What M.call waits for: the callback of each call not answered yet, by its token.
---@type table<integer, fun(result: any, error: string?)>
local replies = {}
local last_token = 0

--- Hear of the host failing to start or dying: `show(message)` tells the user where
--- it can (a chat); `shown()` says whether that is on screen, else the message is a
--- notice.
---@param show fun(message: string)
---@param shown fun(): boolean
function M.on_failure(show, shown)
  table.insert(failure_listeners, { show = show, shown = shown })
end

--- Hear of the Python process exiting, however it ends (its agents died with it).
---@param listener fun()
function M.on_exit(listener)
  table.insert(exit_listeners, listener)
end

--- The plugin's own virtual environment (what :AcpInstall builds) and its Python.
function M.venv()
  return util.root() .. "/.venv"
end
function M.venv_python()
  return M.venv() .. "/bin/python"
end

--- The Python the host runs with, and where that choice came from.
---@return string python
---@return "option"|"venv"|"g:python3_host_prog"|"PATH" source
function M.python()
  if config.options.python then
    return config.options.python, "option"
  end
  local venv = M.venv_python()
  if vim.fn.executable(venv) == 1 then
    return venv, "venv"
  end
  local prog = vim.g.python3_host_prog
  if type(prog) == "string" and prog ~= "" then
    return vim.fn.expand(prog), "g:python3_host_prog"
  end
  return "python3", "PATH"
end

--- What the user does about a Python that cannot run the host.
---@return string
function M.fix()
  local python, source = M.python()
  if source == "option" then
    return ("Remove the `python` option from setup() and run :AcpInstall (or install pynvim, anyio, msgspec and pydantic into %s), then :AcpChat again."):format(
      python
    )
  end
  return ("Run :AcpInstall to %s the plugin's own Python environment, then :AcpChat again."):format(
    source == "venv" and "repair" or "build"
  )
end

local function fail(message)
  M.failure = { message = message }
  for _, listener in ipairs(failure_listeners) do
    listener.show(message)
  end
  -- A chat on screen says it already (a long message would wait for <CR>); else
  -- it is a message. Scheduled: the chat that :AcpChat is opening counts too.
  vim.schedule(function()
    if not (M.failure and M.failure.message == message) then
      return
    end
    for _, listener in ipairs(failure_listeners) do
      if listener.shown() then
        return
      end
    end
    util.notify(message)
  end)
end

local function cannot_start(what)
  fail(("cannot start the Python side: %s. %s Details: :AcpLog."):format(what, M.fix()))
end

--- The Python the host runs with, as the user should look for it: a setup() option
--- of theirs says so.
local function named_python()
  local python, source = M.python()
  return source == "option" and ("%s (setup option `python`)"):format(python) or python
end

local function log(line, source)
  table.insert(stderr_log, os.date("%H:%M:%S") .. (source or " host !! ") .. line)
  if #stderr_log > LOG_LINES then
    table.remove(stderr_log, 1)
  end
end

--- The host's stderr lines (timestamped), oldest first.
---@return string[]
function M.stderr_lines()
  return vim.list_slice(stderr_log)
end

-- The longest first agent Lua hands over (as one environment variable: Linux takes
-- 128 KiB): options larger than this start the agent with the chat's open.
local FIRST_AGENT_MAX = 64 * 1024

--- The host's environment: the plugin on its path, and the first chat's agent to
--- start at once (acp_nvim/client/agent/first.py, decisions 0051 and 0066: `cache`
--- is where the host keeps the launches it resolved).
---@param first_agent? {agent?: string, cwd: string, cwd_given: boolean}
local function job_env(first_agent)
  local root, path = util.root(), vim.env.PYTHONPATH
  local env = { PYTHONPATH = path and (root .. ":" .. path) or root }
  if first_agent then
    local handed = { options = config.given, cache = vim.fn.stdpath("cache") }
    local ok, given = pcall(vim.json.encode, vim.tbl_extend("force", first_agent, handed))
    if ok and #given <= FIRST_AGENT_MAX then
      env.ACP_NVIM_FIRST_AGENT = given
    end
  end
  return env
end

---@param first_agent? {agent?: string, cwd: string, cwd_given: boolean}
local function start_job(first_agent)
  local python = M.python()
  local partial, start_error, last = "", nil, nil
  M.heard = false
  local function line_in(line)
    if line == "" then
      return
    end
    log(line)
    last = line
    if vim.startswith(line, START_ERROR) then
      start_error = line:sub(#START_ERROR + 1)
    end
  end
  local ok, chan = pcall(vim.fn.jobstart, { python, "-m", "acp_nvim" }, {
    rpc = true,
    env = job_env(first_agent),
    on_stderr = function(_, data)
      -- Chunks split lines anywhere: the last item continues in the next chunk.
      data[1] = partial .. data[1]
      partial = table.remove(data)
      vim.tbl_map(line_in, data)
    end,
    on_exit = function(_, code)
      line_in(partial)
      M.chan = nil
      local unanswered = replies
      replies = {}
      for _, on_reply in pairs(unanswered) do
        on_reply(nil, "the Python side stopped before it answered")
      end
      for _, listener in ipairs(exit_listeners) do
        listener()
      end
      if code == 0 or M.stopping then
        return
      end
      if start_error then
        cannot_start(start_error)
      elseif not M.heard then
        -- Gone before it said a word: no Python running acp.nvim (the option naming
        -- another program, a Python too old to read our code).
        local why = last and (" (" .. last .. ")") or ""
        cannot_start(("%s exited with code %d as it started%s"):format(named_python(), code, why))
      else
        fail(
          ("the Python side exited with code %d%s. :AcpChat starts it again. Details: :AcpLog."):format(
            code,
            last and (" (" .. last .. ")") or ""
          )
        )
      end
    end,
  })
  if not ok or chan <= 0 then
    log(("cannot run %s: %s"):format(python, ok and "jobstart failed" or chan))
    cannot_start(("%s is not an executable Python"):format(python))
    return false
  end
  M.chan = chan
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("acp.shutdown", { clear = true }),
    callback = M.stop,
  })
  return true
end

--- Whether the Python side runs (it is not started by asking).
function M.running()
  return M.chan ~= nil or (config.options.host == "rplugin" and M.rplugin_ready == true)
end

--- What `setup` hands the Python side: the options, where the history and the
--- worktrees are kept, and Neovim's own directories, which a review never scans
--- (decision 0077: a project may hold them, as $HOME does).
local function setup_params()
  local own = {}
  for _, what in ipairs({ "cache", "data", "state", "log" }) do
    own[#own + 1] = vim.fn.stdpath(what)
  end
  -- Terminals a host before this one made stay: its keys go on past theirs.
  local terminal = package.loaded["acp.editor.terminal"]
  return {
    options = config.given,
    state = vim.fn.stdpath("state"),
    nvim_dirs = own,
    terminal_keys_from = terminal and terminal.next_number() or 1,
  }
end

--- Start the Python side if needed and hand it the options; `first_agent`: the
--- agent the chat it starts for opens, started with it. False when it cannot start
--- (M.failure says why): only M.retry tries again.
---@param first_agent? {agent?: string, cwd: string, cwd_given: boolean}
---@return boolean
function M.ensure(first_agent)
  if config.options.host == "rplugin" then
    if not M.rplugin_ready then
      M.rplugin_ready = true
      vim.fn.AcpHostNotify("setup", setup_params())
    end
    return true
  end
  if M.chan then
    return true
  end
  if M.failure then
    return false
  end
  local held = M.hold and M.hold()
  if held then
    M.failure = { message = held }
    return false
  end
  M.stopping = false
  if not start_job(first_agent) then
    return false
  end
  vim.rpcnotify(M.chan, "acp", "setup", setup_params())
  return true
end

--- Forget why the last start failed and start again (:AcpChat, :AcpInstall).
---@param first_agent? {agent?: string, cwd: string, cwd_given: boolean} as M.ensure
---@return boolean
function M.retry(first_agent)
  M.failure = nil
  return M.ensure(first_agent)
end

--- Send a command; it returns at once, results arrive through M.apply. False when
--- the Python side is not running (the user was told why).
---@param method string
---@param params table
function M.notify(method, params)
  if not M.ensure() then
    util.notify(M.failure.message)
    return false
  elseif config.options.host == "rplugin" then
    vim.fn.AcpHostNotify(method, params)
    return true
  end
  -- The channel may be closing under us: the exit handler reports that.
  return (pcall(vim.rpcnotify, M.chan, "acp", method, params))
end

--- Send a command whose answer comes later, in a batch: `on_reply(result, error)`
--- then runs, with `error` the line to show when it failed. Neovim goes on
--- meanwhile (M.request waits, bounded). False when the Python side is not running (the
--- user was told why).
---@param method string
---@param params table
---@param on_reply fun(result: any, error: string?)
function M.call(method, params, on_reply)
  last_token = last_token + 1
  local token = last_token
  if not M.notify(method, vim.tbl_extend("force", params, { token = token })) then
    return false
  end
  replies[token] = on_reply
  return true
end

-- How long an answer of the Python side is waited for (M.ask, M.request): one
-- alive but not answering (stopped, stuck) must not freeze Neovim.
M.request_ms = 10000

--- Ask for state the Python side keeps thread-safe (never agent I/O), not
--- waiting: `on_answer(result, error)` runs with its answer, or with the error
--- "the Python side does not answer" after M.request_ms (an answer after that is
--- dropped). Python answers at once, outside the batches (a reply item), but
--- "worktree_work" (git looks: its loop answers, in a batch). A user error when
--- the Python side is not running.
---@param method string
---@param params? table
---@param on_answer fun(result: any, error: string?)
---@return fun() give_up ends the wait now, as the limit would
function M.ask(method, params, on_answer)
  if not M.ensure() then
    util.user_error(M.failure.message)
  end
  local done = false
  local function once(result, error)
    if not done then
      done = true
      on_answer(result, error)
    end
  end
  if not M.call("ask", { method = method, params = params or {} }, once) then
    util.user_error("the Python side stopped before it answered")
  end
  local token = last_token
  local function give_up()
    replies[token] = nil
    once(nil, ("the Python side does not answer (%s, waited %d ms); :AcpLog shows its stderr"):format(method, M.request_ms))
  end
  vim.defer_fn(give_up, M.request_ms)
  return give_up
end

--- M.ask, waiting for the answer (Neovim waits with it; CTRL-C ends the wait
--- sooner): the result, or a user error.
---@param method string
---@param params? table
function M.request(method, params)
  local answer
  local give_up = M.ask(method, params, function(result, error)
    answer = { result = result, error = error }
  end)
  if not vim.wait(M.request_ms, function()
    return answer ~= nil
  end) then
    give_up()
  end
  if answer.error then
    util.user_error(answer.error)
  end
  return answer.result
end

--- Re-send the options after setup() was called again.
function M.reconfigure()
  if M.chan or M.rplugin_ready then
    M.notify("setup", setup_params())
  end
end

--- Stop the Python side (it ends every agent first).
function M.stop()
  if M.chan then
    M.stopping = true
    pcall(vim.rpcnotify, M.chan, "acp", "shutdown", {})
    vim.fn.jobstop(M.chan)
    M.chan = nil
  end
end

--- The handler of each kind of item Python sends, by `kind`: the kinds of
--- acp_nvim/nvim/batcher.py's BatchItem, which documents each (tests/nvim/
--- test_contract.py holds the two lists together). `render` is acp.chat's,
--- `review` acp.review's, `baseline` acp.review.diff's: acp.chat requires both,
--- so once a chat exists every kind has its handler.
---@type table<string, fun(item: table)>
M.handlers = {
  event = function(item)
    vim.api.nvim_exec_autocmds("User", { pattern = item.name, data = item.data, modeline = false })
  end,
  notify = function(item)
    util.notify(item.message, item.level)
  end,
  reply = function(item)
    M.heard = true -- answered outside the batches (M.ask): it runs, as a batch says
    local on_reply = replies[item.token]
    replies[item.token] = nil
    if on_reply then
      local result, error = item.result, item.error
      on_reply(result ~= vim.NIL and result or nil, error ~= vim.NIL and error or nil)
    end
  end,
}

--- Handle the items of `kind` with `handler` (called with the item).
---@param kind string
---@param handler fun(item: table)
function M.handle(kind, handler)
  M.handlers[kind] = handler
end

-- The first line of each error M.failed told the user of: the same error again (a
-- title it cannot show, at every batch) goes to :AcpLog only.
local told = {}

--- Drawing `what` raised `err` (its traceback): the rest of its batch is drawn
--- all the same. In :AcpLog always; the user is told once an error.
---@param what string
---@param err string
function M.failed(what, err)
  for line in (what .. " failed: " .. err):gmatch("[^\n]+") do
    log(line, " lua !! ")
  end
  local first = tostring(err):match("^[^\n]*")
  if not told[first] then
    told[first] = true
    util.notify(("could not show part of the chat (%s); the rest is shown. Details: :AcpLog"):format(first))
  end
end

--- Apply the items of `batch` after the `batch.at`-th, counting them in `batch.at`.
--- An item whose handler is not loaded concerns no chat Lua has: there is nothing
--- to draw.
---@param batch table[]
local function apply_from(batch)
  local handlers = M.handlers
  while batch.at < #batch do
    batch.at = batch.at + 1
    local handler = handlers[batch[batch.at].kind]
    if handler then
      handler(batch[batch.at])
    end
  end
end

--- Apply one batch, item by item, in one protected call: an item that raises costs
--- only itself (M.failed), the items after it are applied.
---@param batch table[]
local function apply_now(batch)
  batch.at = 0
  while true do
    local ok, err = xpcall(apply_from, debug.traceback, batch)
    if ok then
      return
    end
    M.failed(("a %s item"):format(batch[batch.at].kind), err)
  end
end

-- The batches that came while the command-line window was open, oldest first: any
-- item may open a window (a chat shown, an export's tab), which fails there (E11)
-- and would lose the rest of its batch. They wait whole, and so do the batches
-- after them until they are applied.
---@type table[][]
local held = {}

--- Apply the oldest held batch, one a loop turn as Python cut them; the next is
--- scheduled first, so that an error in one loses no other.
local function apply_held()
  local batch = table.remove(held, 1)
  if held[1] then
    vim.schedule(function()
      util.outside_cmdwin(apply_held)
    end)
  end
  apply_now(batch)
end

--- Called by Python with one ordered batch of items (render ops, events, notices,
--- review states, baselines). While the command-line window is open it waits, to
--- be applied once that closes.
---@param batch table[]
function M.apply(batch)
  M.heard = true
  if not held[1] and not util.in_cmdwin() then
    return apply_now(batch)
  end
  table.insert(held, batch)
  if #held == 1 then
    util.outside_cmdwin(apply_held)
  end
end

return M
