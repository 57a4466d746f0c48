-- Options with their defaults: the single source for the docs.
-- Python validates the whole table (msgspec) when the first chat starts; wrong keys
-- are reported by their dotted name.
local M = {}

---@class (exact) acp.AgentSpec
---@field cmd string[]              argv of the agent; cmd[1] is looked up on PATH
---@field env? table<string,string> added to Neovim's environment
---@field cwd? string               working directory (default: Neovim's cwd)
---@field missing_file_as_empty? boolean read a missing file as "" (default: true for gemini, which probes first)

---@class (exact) acp.ChatOptions
---@field position? "right"|"left"|"bottom"|"float"|"tab" where the chat opens (see |acp-layout|)
---@field width? number             for right, left and float: a fraction of the editor's columns (at most 1), or columns (20 or more)
---@field min_width? integer        columns the width is never below (wins over max_width)
---@field max_width? integer        columns the width is never above
---@field height? number            for bottom and float, input included: a fraction of the editor's lines (at most 1), or lines (5 or more)
---@field min_height? integer       lines the height is never below (wins over max_height)
---@field max_height? integer       lines the height is never above
---@field input_height? integer     lines of the input window

---@class (exact) acp.Options
---@field agents? table<string,acp.AgentSpec> agents by name (built in: demo, claude, codex, gemini, opencode, qwen)
---@field default_agent? string    agent used by :AcpChat without a name
---@field protocol_version? 1|2    ACP version offered first (2 falls back to 1, see |acp-v2|)
---@field permission_policy? "ask"|"allow_reads"|"allow_all" answer permission requests without asking: never, for reads (read/search/think), always (see |acp-permissions|)
---@field auto_save? boolean       save buffers the agent edited (else left unsaved)
---@field follow_agent? boolean    show the file and line a tool call reports in the non-chat window (the cursor stays)
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
    width = 0.4,
    min_width = 40,
    max_width = 120,
    height = 0.4,
    min_height = 10,
    max_height = 40,
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
