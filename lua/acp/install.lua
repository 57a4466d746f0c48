-- :AcpInstall — builds or repairs the plugin's own Python environment
-- (<plugin>/.venv): with uv when it is on PATH, else `python -m venv` and pip.
-- A notice names each step; a failing step is reported with its command and
-- the end of its output. Then the Python side starts, and chats that were
-- waiting for it start again. It installs no agent.
--
-- With a UI it runs in the background. Without one (`nvim --headless`, e.g.
-- `nvim --headless "+Lazy! sync" +qa` running a lazy.nvim `build`) the command
-- returns only when it is done, so Neovim does not quit under it.
if jit then jit.off(true, true) end -- decision 0068
local chat = require("acp.chat")
local config = require("acp.config")
local host = require("acp.host")
local util = require("acp.util")

local M = {}

local OUTPUT_LINES = 30
local WAIT_MS = 30 * 60 * 1000

---@type {process?: vim.SystemObj, was_running: boolean}? the install under way
local current = nil

--- Whether an install is under way.
function M.busy()
  return current ~= nil
end

-- The Python side does not start while its environment is being built.
host.hold = function()
  return current and "the Python environment is being built (:AcpInstall); the chat starts when it is done." or nil
end

--- An existing .venv is kept when its Python runs, is new enough, and (for pip) has pip.
local function usable(python, need_pip)
  if vim.fn.executable(python) ~= 1 then
    return false
  end
  local code = "import sys; assert sys.version_info >= (3, 10)" .. (need_pip and "; import pip" or "")
  local ok, result = pcall(function()
    return vim.system({ python, "-c", code }):wait(20000)
  end)
  return ok and result.code == 0
end

--- Why `base`, the Python asked for, cannot build the venv; nil when it can. Asked
--- before the venv is removed: a typo must not cost a working environment.
---@param base string a path, a name on PATH, for uv also a version such as `3.12`
---@param uv string uv's path, "" without it
---@return string?
local function unfit(base, uv)
  if uv ~= "" and base:match("^%d") then
    local ok, result = pcall(function()
      return vim.system({ uv, "python", "find", base }):wait(20000)
    end)
    if not (ok and result.code == 0) then
      return ("uv finds no Python %s (`uv python install %s` fetches one)"):format(base, base)
    end
  elseif not usable(base, false) then
    return ("%s is not a Python 3.10 or newer that runs"):format(base)
  end
end

--- The steps, each {title, cmd}; nil and a message when nothing can build it.
---@param base? string the Python to create the venv with (it is then always built anew)
local function plan(base)
  local venv, python = host.venv(), host.venv_python()
  local uv = vim.fn.exepath("uv")
  local steps = {}
  local problem = base and unfit(base, uv)
  if problem then
    return nil, problem .. "; the environment was left as it was"
  end
  if base or not usable(python, uv == "") then
    -- Built anew: with the Python asked for, or because it is broken or half-built
    -- (removed here, so no tool's --clear flag is needed).
    if vim.fn.isdirectory(venv) == 1 then
      if host.running() then
        host.stop()
        chat.host_failed("the Python side was stopped to rebuild its environment (:AcpInstall).")
      end
      if vim.fn.delete(venv, "rf") ~= 0 then
        return nil, "cannot remove " .. venv
      end
    end
    if uv ~= "" then
      -- Without --python, uv picks (or fetches) one that pyproject.toml's requires-python allows.
      local cmd = base and { uv, "venv", "--python", base, venv } or { uv, "venv", venv }
      table.insert(steps, { "creating .venv with uv", cmd })
    else
      base = base or (vim.fn.executable("python3") == 1 and "python3" or "python")
      if vim.fn.executable(base) ~= 1 then
        return nil, "no Python found on PATH: install Python 3.10 or newer (or uv), or name one: :AcpInstall /path/to/python3"
      end
      table.insert(steps, { "creating .venv", { base, "-m", "venv", venv } })
      -- A Python's bundled pip may predate editable installs from pyproject.toml.
      table.insert(steps, { "upgrading pip", { python, "-m", "pip", "install", "--upgrade", "pip" } })
    end
  end
  -- editable_mode=strict: a plain path in a .pth, where the default editable finder
  -- cost every start of the Python side ~30 ms (doc/decisions/0010).
  if uv ~= "" then
    table.insert(steps, {
      "installing the dependencies with uv",
      { uv, "pip", "install", "--python", python, "-e", ".", "--config-setting", "editable_mode=strict" },
    })
  else
    table.insert(steps, {
      "installing the dependencies with pip",
      { python, "-m", "pip", "install", "-e", ".", "--config-settings", "editable_mode=strict" },
    })
  end
  -- Bytecode now, so the host starts fast even under PYTHONDONTWRITEBYTECODE.
  table.insert(steps, { "compiling", { python, "-m", "compileall", "-q", "acp_nvim" } })
  -- What :checkhealth acp compares with pyproject.toml after an update.
  table.insert(steps, { "recording the dependencies", { python, "-m", "acp_nvim.health", "--stamp" } })
  return steps
end

local function tail(result)
  local lines = vim.split(vim.trim((result.stdout or "") .. "\n" .. (result.stderr or "")), "\n")
  return table.concat(vim.list_slice(lines, math.max(1, #lines - OUTPUT_LINES + 1)), "\n")
end

--- After the last step: start the Python side and the chats that waited for it.
---@param was_running boolean the Python side ran during the install (with the old modules)
local function started(seconds, was_running)
  local where = host.venv()
  if config.options.host == "rplugin" then
    util.notify(("installed %s in %d s (the rplugin host uses g:python3_host_prog)"):format(where, seconds), "info")
    return
  end
  local ok = host.retry() and pcall(host.request, "ping")
  if not ok then
    util.notify(("installed %s, but the Python side does not start (:AcpLog)"):format(where))
    return
  end
  local python, source = host.python()
  local note = ""
  if source == "option" then
    note = (" (the `python` option makes it use %s)"):format(python)
  elseif was_running then
    note = " (it loaded its modules before the install: restart Neovim to use the new ones)"
  end
  util.notify(("installed in %d s; the Python side runs%s"):format(seconds, note), "info")
  chat.retry_failed()
end

local function run_step(root, steps, i, started_at)
  local step = steps[i]
  if not step then
    local was_running = current.was_running
    current = nil
    started(os.time() - started_at, was_running)
    return
  end
  local title, cmd = step[1], step[2]
  util.notify(("install %d/%d: %s"):format(i, #steps, title), "info")
  local ok, process = pcall(vim.system, cmd, { cwd = root, text = true }, function(result)
    vim.schedule(function()
      if result.code ~= 0 then
        current = nil
        util.notify(("install failed: %s exited with code %d:\n%s"):format(table.concat(cmd, " "), result.code, tail(result)))
        return
      end
      run_step(root, steps, i + 1, started_at)
    end)
  end)
  if not ok then
    current = nil
    util.notify(("install failed: cannot run %s: %s"):format(cmd[1], process))
    return
  end
  current.process = process
end

--- Build or repair the plugin's venv.
---@param opts? {python?: string, wait?: boolean} `python` builds the venv anew with
--- that Python; `wait` returns when done (default: when Neovim has no UI)
function M.run(opts)
  opts = opts or {}
  if current then
    util.notify(":AcpInstall is already running", "warn")
    return
  end
  local root = util.root()
  local steps, problem = plan(opts.python)
  if not steps then
    util.notify("install failed: " .. problem)
    return
  end
  current = { was_running = host.running() }
  run_step(root, steps, 1, os.time())
  local wait = opts.wait
  if wait == nil then
    wait = #vim.api.nvim_list_uis() == 0
  end
  if wait and not vim.wait(WAIT_MS, function()
    return current == nil
  end, 50) then
    if current and current.process then
      current.process:kill("sigterm")
    end
    current = nil
    util.notify(("install failed: not done after %d minutes"):format(WAIT_MS / 60000))
  end
end

return M
