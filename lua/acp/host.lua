-- Starts and stops the Python process, sends commands, receives render batches.
-- No protocol knowledge here: Python owns state, Lua owns pixels.
local config = require("acp.config")
local util = require("acp.util")

local M = {}

---@type integer? channel of the Python process (job mode)
M.chan = nil
M.stderr_tail = {}
local stderr_tail = M.stderr_tail

local function python()
  local opts = config.options
  if opts.python then
    return opts.python
  end
  local venv = util.root() .. "/.venv/bin/python"
  if vim.fn.executable(venv) == 1 then
    return venv
  end
  local prog = vim.g.python3_host_prog
  if type(prog) == "string" and prog ~= "" then
    return vim.fn.expand(prog)
  end
  return "python3"
end
M.python = python

local function keep_stderr(_, data)
  for _, line in ipairs(data) do
    if line ~= "" then
      table.insert(stderr_tail, line)
      if #stderr_tail > 50 then
        table.remove(stderr_tail, 1)
      end
    end
  end
end

local function start_job()
  local root = util.root()
  local path = vim.env.PYTHONPATH
  stderr_tail = {}
  M.stderr_tail = stderr_tail
  local ok, chan = pcall(vim.fn.jobstart, { python(), "-m", "acp_nvim" }, {
    rpc = true,
    env = { PYTHONPATH = path and (root .. ":" .. path) or root },
    on_stderr = keep_stderr,
    on_exit = function(_, code)
      M.chan = nil
      -- The agents died with the host: their commands must not outlive them.
      if package.loaded["acp.terminal"] then
        require("acp.terminal").kill_running()
      end
      if code ~= 0 and not M.stopping then
        local tail = table.concat(stderr_tail, "\n")
        util.notify(("Python host exited with code %d\n%s"):format(code, tail))
        local message = "Python host exited with code " .. code
        local events = {}
        for _, id in ipairs(require("acp.chat").host_exited(message)) do
          table.insert(events, { "event", "AcpError", { chat = id, message = message } })
        end
        M.apply(events)
      end
    end,
  })
  if not ok or chan <= 0 then
    util.user_error(("cannot start %s -m acp_nvim (:checkhealth acp)"):format(python()))
  end
  M.chan = chan
end

--- Start the Python side if needed and hand it the options.
function M.ensure()
  if config.options.host == "rplugin" then
    if not M.rplugin_ready then
      M.rplugin_ready = true
      vim.fn.AcpHostNotify("setup", { options = config.options })
    end
    return
  end
  if M.chan then
    return
  end
  M.stopping = false
  start_job()
  vim.rpcnotify(M.chan, "acp", "setup", { options = config.options })
end

--- Send a command; it returns at once, results arrive through M.apply.
---@param method string
---@param params table
function M.notify(method, params)
  M.ensure()
  if config.options.host == "rplugin" then
    vim.fn.AcpHostNotify(method, params)
  else
    vim.rpcnotify(M.chan, "acp", method, params)
  end
end

--- Ask for state the Python side keeps thread-safe (never agent I/O).
---@param method string
function M.request(method)
  M.ensure()
  if config.options.host == "rplugin" then
    return vim.fn.AcpHostRequest(method)
  end
  return vim.rpcrequest(M.chan, "acp", method)
end

--- Re-send the options after setup() was called again.
function M.reconfigure()
  if M.chan or M.rplugin_ready then
    M.notify("setup", { options = config.options })
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

--- Called by Python with one ordered batch of render ops, events and notices.
---@param batch table[]
function M.apply(batch)
  local chat = require("acp.chat")
  for _, item in ipairs(batch) do
    local kind = item[1]
    if kind == "render" then
      chat.render(item[2], item[3])
    elseif kind == "event" then
      vim.api.nvim_exec_autocmds("User", { pattern = item[2], data = item[3], modeline = false })
    elseif kind == "notify" then
      util.notify(item[2], item[3])
    elseif kind == "review" then
      require("acp.review").update(item[2], item[3])
    end
  end
end

return M
