-- :checkhealth acp
local M = {}

function M.check()
  local health = vim.health
  local config = require("acp.config")
  local host = require("acp.host")
  local util = require("acp.util")

  health.start("Neovim")
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.10 or newer is required", { "Upgrade Neovim" })
  end

  health.start("Python")
  local python = host.python()
  if vim.fn.executable(python) ~= 1 then
    health.error(("Python %q not found"):format(python), {
      "Run `make venv`-style set-up in the plugin directory, or set `python` in setup()",
    })
    return
  end
  local path = vim.env.PYTHONPATH
  local result = vim.system({ python, "-m", "acp_nvim.health" }, {
    stdin = vim.json.encode(config.options),
    env = { PYTHONPATH = path and (util.root() .. ":" .. path) or util.root() },
    text = true,
  }):wait(20000)
  if result.code ~= 0 then
    health.error("the Python side does not start: " .. python, { vim.trim(result.stderr or "") })
    return
  end
  local report = vim.json.decode(result.stdout)
  health.ok(("Python %s (%s), acp.nvim %s"):format(report.python_version, report.python, report.acp_nvim))
  for name, version in pairs(report.dependencies) do
    if version == vim.NIL then
      health.error(name .. " is not installed for " .. python)
    else
      health.ok(name .. " " .. version)
    end
  end

  health.start("Options")
  if report.config_error == vim.NIL then
    health.ok("options are valid; default agent: " .. report.default_agent)
  else
    health.error("invalid option " .. report.config_error)
  end

  health.start("Agents")
  for name, agent in pairs(report.agents) do
    local cmd = table.concat(agent.cmd, " ")
    if agent.found ~= vim.NIL then
      health.ok(("%s: %s"):format(name, cmd))
    elseif agent.configured or name == report.default_agent then
      health.error(("%s: %q is not installed or not on PATH"):format(name, agent.cmd[1]))
    else
      health.info(("%s: not installed (%s)"):format(name, cmd))
    end
  end

  health.start("Log")
  health.info(("protocol log keeps %d lines; open it with :AcpLog"):format(config.options.log_lines))
end

return M
