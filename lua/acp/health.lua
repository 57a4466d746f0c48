-- :checkhealth acp
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local host = require("acp.host")
local util = require("acp.util")

local M = {}

--- The Python section: the report of `python -m acp_nvim.health`, nil when the
--- Python side cannot give one (what is wrong is said).
local function python_report(health)
  health.start("Python")
  local python, source = host.python()
  local fix = { host.fix() }
  if config.options.host ~= "rplugin" and (source == "PATH" or source == "g:python3_host_prog") then
    health.warn(("the plugin's own Python environment (%s) is missing; using %s"):format(host.venv(), python), {
      "Run :AcpInstall to build it",
    })
  end
  if vim.fn.executable(python) ~= 1 then
    health.error(("Python %q not found"):format(python), fix)
    return nil
  end
  local path = vim.env.PYTHONPATH
  local result = vim.system({ python, "-m", "acp_nvim.health", "--state", vim.fn.stdpath("state") }, {
    stdin = vim.json.encode(config.given),
    env = { PYTHONPATH = path and (util.root() .. ":" .. path) or util.root() },
    text = true,
  }):wait(20000)
  if result.code ~= 0 then
    health.error("the Python side does not start: " .. python, { vim.trim(result.stderr or ""), fix[1] })
    return nil
  end
  local report = vim.json.decode(result.stdout)
  health.ok(("Python %s (%s), acp.nvim %s"):format(report.python_version, report.python, report.acp_nvim))
  if vim.version.lt(report.python_version, "3.10") then
    health.error("acp.nvim needs Python 3.10 or newer", fix)
  end
  local missing = {}
  local names = vim.tbl_keys(report.dependencies)
  table.sort(names)
  for _, name in ipairs(names) do
    local version = report.dependencies[name]
    if version == vim.NIL then
      table.insert(missing, name)
    else
      health.ok(name .. " " .. version)
    end
  end
  if #missing > 0 then
    health.error(("%s not installed for %s"):format(table.concat(missing, ", "), python), fix)
  end
  if source == "venv" and report.stale then
    health.warn("the plugin's Python environment was built for other dependencies (or by hand)", {
      "Run :AcpInstall to bring it up to date",
    })
  end
  return #missing == 0 and report or nil
end

function M.check()
  local health = vim.health

  health.start("Neovim")
  local unsupported = util.unsupported()
  if unsupported then
    health.error(unsupported, { "Use acp.nvim on Linux, macOS or a BSD (on Windows: in WSL)" })
    return
  end
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is required", { "Upgrade Neovim" })
  end

  local report = python_report(health)
  -- Without the Python side, the options as setup() checked them: a user whose
  -- `python` is wrong learns of the others too.
  health.start("Options")
  local problems = report and report.config_errors or config.problems
  if #problems == 0 then
    health.ok("options are valid; default agent: " .. (report and report.default_agent or config.options.default_agent))
  end
  for _, problem in ipairs(problems) do
    health.error("invalid option " .. problem)
  end
  if not report then
    return
  end

  health.start("Agents")
  local names = vim.tbl_keys(report.agents) -- a map from Python: sorted here
  table.sort(names)
  for _, name in ipairs(names) do
    local agent = report.agents[name]
    local cmd = table.concat(agent.cmd, " ")
    if agent.found ~= vim.NIL and agent.fetched_by ~= vim.NIL then
      health.info(("%s: %s (%s fetches the agent when it starts: not checked here)"):format(name, cmd, agent.fetched_by))
    elseif agent.found ~= vim.NIL then
      health.ok(("%s: %s"):format(name, cmd))
    elseif agent.configured or name == report.default_agent then
      health.error(("%s: %q %s"):format(name, agent.cmd[1], agent.missing))
    else
      health.info(("%s: cannot start here, needs %s (%s)"):format(name, agent.needs, cmd))
    end
    if agent.no_cwd ~= vim.NIL then
      health.error(("%s: agents.%s.cwd %q is no directory"):format(name, name, agent.no_cwd))
    end
  end

  health.start("MCP")
  local mcp = report.mcp
  if mcp.off ~= vim.NIL then
    health.info(("the editor MCP server is off (%s)"):format(mcp.off))
  else
    health.ok(("the editor MCP server offers %d tools: %s"):format(#mcp.tools, table.concat(mcp.tools, ", ")))
    if mcp.shim then
      health.ok(("its stdio shim runs: %s -m acp_nvim.mcp"):format(report.python))
    else
      health.error("its stdio shim does not run: " .. mcp.shim_error, fix)
    end
    local ok, live = true, nil
    if host.running() then
      ok, live = pcall(host.request, "mcp")
    end
    if not ok then
      health.error(tostring(live), "Restart Neovim: its Python side runs but does not answer.")
    elseif live and live.socket ~= vim.NIL then
      health.ok(("socket %s (directory only you can open), %s"):format(live.socket, util.count(live.connections, "connection")))
    else
      health.info("its socket opens with the first session that offers it")
    end
  end
  local servers = vim.tbl_keys(mcp.servers)
  table.sort(servers)
  for _, name in ipairs(servers) do
    local server = mcp.servers[name]
    if server.type == "http" or server.type == "sse" then
      health.ok(("%s: %s (%s)"):format(name, server.url, server.type))
    elseif server.found ~= vim.NIL then
      health.ok(("%s: %s"):format(name, table.concat(server.command, " ")))
    else
      health.error(("%s: %q is not installed or not on PATH"):format(name, server.command[1]))
    end
  end

  health.start("Worktrees")
  if #report.worktrees == 0 then
    health.ok("no worktree of a worktree chat is left without its chat")
  end
  for _, worktree in ipairs(report.worktrees) do
    local advice = {
      "Reopen its chat from the history (:AcpHistory) to go on there, or remove it: " .. worktree.removal,
    }
    -- A branch "": the agent left it on none.
    local branch = worktree.branch ~= "" and worktree.branch or "none"
    local what = ("%s (branch %s) of %s"):format(worktree.path, branch, worktree.project)
    if worktree.left then
      health.warn(what .. ": left by a Neovim that ended without closing its chat", advice)
    else
      health.info(what .. ": kept, no chat works in it (reopen its chat from the history, or remove it)")
    end
  end

  health.start("Log")
  health.info(
    ("protocol log keeps %d lines; open it with :AcpLog (MCP traffic is marked mcp:AGENT)"):format(
      config.options.log_lines
    )
  )
end

return M
