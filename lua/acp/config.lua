-- Options with their defaults: the single source for the docs.
-- Python validates the whole table (pydantic) when the host starts; wrong keys
-- are reported by their dotted name.
local M = {}

---@class (exact) acp.AgentSpec
---@field cmd string[]              argv of the agent; cmd[1] is looked up on PATH
---@field env? table<string,string> added to Neovim's environment
---@field cwd? string               working directory (default: Neovim's cwd)

---@class (exact) acp.ChatOptions
---@field position? "right"|"left"|"bottom"|"tab"  where the chat opens
---@field width? integer            columns, for right/left
---@field height? integer           lines, for bottom
---@field input_height? integer     lines of the input window

---@class (exact) acp.Options
---@field agents? table<string,acp.AgentSpec> agents by name (built in: demo, claude, codex, gemini, opencode, qwen)
---@field default_agent? string    agent used by :AcpChat without a name
---@field protocol_version? 1|2    ACP version offered first
---@field permission_policy? "ask"|"allow_reads"|"allow_all" how agent permission requests are answered
---@field auto_save? boolean       write buffers the agent edited to disk
---@field follow_agent? boolean    show the file and line the agent works on
---@field python? string           Python for the host (default: plugin venv, then g:python3_host_prog, then python3)
---@field host? "job"|"rplugin"    how the Python side runs
---@field log_lines? integer       lines kept by :AcpLog
---@field chat? acp.ChatOptions chat window layout

M.defaults = {
  agents = {},
  default_agent = "demo",
  protocol_version = 1,
  permission_policy = "ask",
  auto_save = true,
  follow_agent = false,
  python = nil,
  host = "job",
  log_lines = 5000,
  chat = {
    position = "right",
    width = 80,
    height = 20,
    input_height = 5,
  },
}

---@type acp.Options
M.options = vim.deepcopy(M.defaults)

---@param opts? acp.Options
function M.set(opts)
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
end

--- Names for :AcpChat completion.
function M.agent_names()
  local names = { "demo", "claude", "codex", "gemini", "opencode", "qwen" }
  for name in pairs(M.options.agents or {}) do
    if not vim.tbl_contains(names, name) then
      table.insert(names, name)
    end
  end
  table.sort(names)
  return names
end

return M
