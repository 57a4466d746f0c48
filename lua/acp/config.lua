-- The user's options over their defaults. The options are defined once, in
-- acp_nvim/client/config.py; their types, defaults and the built-in agents reach
-- Lua through the generated lua/acp/defaults.lua. setup() checks every option
-- against those types before Lua uses one (the windows are drawn before the
-- Python host answers): all wrong ones are reported at once, by their dotted key,
-- and Lua goes on with their defaults. The Python host validates the table as
-- given (M.given) once more, and refuses to start chats until it is right.
if jit then jit.off(true, true) end -- decision 0068
local defaults = require("acp.defaults")

local M = {}

---@type acp.Options the options Lua uses: the defaults under the valid options given
M.options = vim.deepcopy(defaults.options)
---@type table the options as given, over the defaults (what the Python host checks)
M.given = vim.deepcopy(defaults.options)
---@type string[] what is wrong with the options given, `key: problem` each
M.problems = {}

local NAMES = { string = "a string", integer = "an integer", number = "a number", boolean = "a boolean" }

local kind_of

--- A value as it is written in Lua (a table by its kind).
local function lua_value(value)
  if type(value) == "table" then
    return kind_of(value)
  end
  return type(value) == "string" and ("'%s'"):format(value) or tostring(value)
end

function kind_of(value)
  if value == vim.NIL then
    return "vim.NIL"
  elseif type(value) == "table" then
    return (vim.islist(value) and next(value)) and "a list" or "a table"
  end
  if type(value) == "number" then
    return value == math.floor(value) and "an integer" or "a number"
  end
  return NAMES[type(value)] or type(value)
end

--- A table where a table of options is expected (an empty one is both).
local function is_table(value)
  return type(value) == "table" and not (vim.islist(value) and next(value))
end

local check

--- What scalar `spec` takes, in words: "a non-empty string" for a string that must
--- have a character (as the Python host says it).
local function words_of(spec)
  if type(spec) == "table" and spec.type == "string" and spec.min_length == 1 then
    return "a non-empty string"
  end
  return NAMES[type(spec) == "string" and spec or spec.type]
end

--- The problem with `value` against scalar or bounded `spec`, or nil.
local function scalar(value, spec)
  local name = type(spec) == "string" and spec or spec.type
  local fits = type(value) == (name == "integer" and "number" or name)
  if name == "integer" and fits then
    fits = value == math.floor(value)
  end
  if not fits then
    return ("expected %s, got %s"):format(NAMES[name], kind_of(value))
  end
  if type(spec) == "table" then
    for bound, test in pairs({
      gt = function(b)
        return value > b
      end,
      ge = function(b)
        return value >= b
      end,
      le = function(b)
        return value <= b
      end,
      min_length = function(b)
        return #value >= b
      end,
    }) do
      if spec[bound] and not test(spec[bound]) then
        if name == "string" then -- "" where a key or a name is wanted
          return ("expected %s, got %s"):format(words_of(spec), lua_value(value))
        end
        local words = { gt = "> %s", ge = ">= %s", le = "<= %s", min_length = "of length >= %s" }
        return ("expected %s %s"):format(NAMES[name], words[bound]:format(spec[bound]))
      end
    end
  end
end

--- Check `value` against `spec` (see defaults.classes) at dotted `key`: the value
--- with what is wrong inside it left out, or nil when the value itself is wrong.
--- Each problem is added to `problems` (nil: only tell whether it fits).
---@return any
local function report(problems, key, message)
  if problems then
    table.insert(problems, ("%s: %s"):format(key, message))
  end
end

function check(value, spec, key, problems)
  local function wrong(message)
    report(problems, key, message)
    return nil
  end
  if type(spec) == "string" or spec.type then
    local problem = scalar(value, spec)
    if problem then
      return wrong(problem)
    end
    return value
  elseif spec.enum then
    if vim.tbl_contains(spec.enum, value) then
      return value
    end
    local choices = vim.tbl_map(lua_value, spec.enum)
    local said = #choices > 4 and "one of " .. table.concat(choices, ", ") or table.concat(choices, " or ")
    -- A value of another kind than every choice (`host = 1`) is told by its kind,
    -- as Python tells it.
    local alike = vim.iter(spec.enum):any(function(choice)
      return type(choice) == type(value)
    end)
    return wrong(("expected %s, got %s"):format(said, alike and lua_value(value) or kind_of(value)))
  elseif spec.any_of then
    for _, choice in ipairs(spec.any_of) do
      if check(value, choice, key, nil) ~= nil then
        return check(value, choice, key, problems)
      end
    end
    local empty = false -- "" where a non-empty string is taken: said as such
    local words = vim.tbl_map(function(choice)
      empty = empty or (value == "" and type(choice) == "table" and choice.type == "string")
      return choice.class and "a table" or choice.enum and table.concat(vim.tbl_map(lua_value, choice.enum), " or ")
        or words_of(choice) or "a list"
    end, spec.any_of)
    local got = empty and lua_value(value) or kind_of(value)
    return wrong(("expected %s, got %s"):format(table.concat(words, " or "), got))
  elseif spec.list then
    if type(value) ~= "table" or not vim.islist(value) then
      return wrong("expected a list, got " .. kind_of(value))
    elseif spec.min_length and #value < spec.min_length then
      return wrong(("expected a list of length >= %d"):format(spec.min_length))
    end
    for i, item in ipairs(value) do
      if check(item, spec.list, ("%s[%d]"):format(key, i), problems) == nil then
        return nil -- the whole list is left out, as Python does
      end
    end
    return value
  elseif spec.map then
    if not is_table(value) then
      return wrong("expected a table, got " .. kind_of(value))
    end
    local kept = {}
    for name, item in pairs(value) do
      kept[name] = check(item, spec.map, ("%s.%s"):format(key, name), problems)
    end
    return kept
  end
  local class = defaults.classes[spec.class]
  if not is_table(value) then
    return wrong("expected a table, got " .. kind_of(value))
  end
  local function at(name)
    return key == "" and name or ("%s.%s"):format(key, name)
  end
  -- A missing key leaves the table out, after its other keys are told too.
  local missing = false
  for _, name in ipairs(class.required) do
    if value[name] == nil then
      report(problems, at(name), "required")
      missing = true
    end
  end
  local kept = {}
  for name, item in pairs(value) do
    local field = class.fields[name]
    if field then
      kept[name] = check(item, field, at(name), problems)
    else
      report(problems, at(name), "unknown option")
    end
  end
  if not missing then
    return kept
  end
end

--- The entries of table `entries` (at `key`) named by a word, each other one told
--- (in Python's words: config.py, _agent and _servers) and left out, as Python
--- leaves it out; anything else as given, for the types to tell.
local function named(entries, key, what, problems)
  if not is_table(entries) then
    return entries
  end
  local kept = {}
  for name, entry in pairs(entries) do
    if type(name) == "string" and name:match("^%S+$") then
      kept[name] = entry
    else
      table.insert(problems, ("%s: %s name %s must be a non-empty word"):format(key, what, lua_value(name)))
    end
  end
  return kept
end

--- The problem of a table of MCP servers (at `key`) naming one as the editor's: an
--- agent would see two servers by one name (in Python's words, generated).
local function editor_server_named(servers, key, problems)
  if is_table(servers) and servers[defaults.editor_server] ~= nil then
    table.insert(problems, ("%s.%s: %s"):format(key, defaults.editor_server, defaults.editor_server_taken))
  end
end

--- Whether a problem about `key` (or a key inside it, but for those inside `but`)
--- is in `problems`.
local function told(problems, key, but)
  for _, problem in ipairs(problems) do
    local inside = vim.startswith(problem, key .. ":") or vim.startswith(problem, key .. ".")
    if inside and not (but and vim.startswith(problem, but .. ".")) then
      return true
    end
  end
  return false
end

--- What keeps MCP server `server` from being offered beyond its types, as
--- `field: problem` (in Python's words: config.py, McpServerOptions.problem), or nil.
local function server_problem(server)
  local kind = server.type or "stdio"
  local function blank(text)
    return not (text or ""):match("%S")
  end
  if kind == "stdio" then
    if blank(server.command) then
      return "command: required for a stdio server"
    elseif server.url ~= nil or next(server.headers or {}) then
      return ('%s: only for type = "http" or "sse"'):format(server.url ~= nil and "url" or "headers")
    end
    return nil
  elseif blank(server.url) then
    return ("url: required for an %s server"):format(kind)
  end
  for _, field in ipairs({ "command", "args", "env" }) do
    local value = server[field]
    if value ~= nil and value ~= "" and not (type(value) == "table" and next(value) == nil) then
      return field .. ": only for a stdio server"
    end
  end
end

--- The problems of the MCP servers at `key` that are right by their types (Python
--- leaves out, and does not look at again, a server or an agent told wrong).
local function servers_offered(servers, key, problems)
  for name, server in pairs(is_table(servers) and servers or {}) do
    local at = ("%s.%s"):format(key, name)
    local problem = not told(problems, at) and server_problem(server)
    if problem then
      table.insert(problems, ("%s.%s"):format(at, problem))
    end
  end
end

--- The `roots` (at `key`) that are absolute paths, and with `existing`
--- directories, each other one's problem in `problems` (in Python's words:
--- config.py, workspace_root): a root is not found only when a chat starts on it.
local function directories(roots, key, problems, existing)
  local kept = {}
  for _, root in ipairs(roots or {}) do
    local path = vim.fs.normalize(root, { expand_env = false })
    local problem = not vim.startswith(path, "/") and "is not an absolute path (nor ~/...)"
      or existing and vim.fn.isdirectory(path) == 0 and "is not a directory"
    if problem then
      table.insert(problems, ("%s: '%s' %s"):format(key, root, problem))
    else
      table.insert(kept, root)
    end
  end
  return kept
end

--- Every problem with `opts`, and the options Lua can use: the defaults under
--- the valid ones.
---@param opts table
---@return string[] problems, acp.Options options
function M.check(opts)
  local problems = {}
  -- A built-in agent's entry without `cmd` tunes that agent (Python's _tuned,
  -- decision 0098): checked as if it named its program, which stays the built-in's.
  local tuning = {}
  local checked = vim.tbl_extend("force", {}, opts)
  checked.mcp_servers = named(opts.mcp_servers, "mcp_servers", "server", problems)
  checked.agents = named(opts.agents, "agents", "agent", problems)
  for name, agent in pairs(is_table(checked.agents) and checked.agents or {}) do
    if is_table(agent) then
      agent = vim.tbl_extend("force", {}, agent)
      agent.mcp_servers = named(agent.mcp_servers, ("agents.%s.mcp_servers"):format(name), "server", problems)
      if agent.cmd == nil and vim.tbl_contains(defaults.agents, name) then
        agent.cmd = { name }
        tuning[name] = true
      end
      checked.agents[name] = agent
    end
  end
  local valid = check(checked, { class = "acp.Options" }, "", problems) or {}
  for name in pairs(tuning) do
    if is_table(valid.agents) and valid.agents[name] then
      valid.agents[name].cmd = nil
    end
  end
  -- Beyond the types, as Python's load_config says it (config.py, _agent): an
  -- agent whose program is blank is left out.
  for name, agent in pairs(is_table(valid.agents) and valid.agents or {}) do
    if agent.cmd and not agent.cmd[1]:match("%S") then
      table.insert(problems, ("agents.%s.cmd: the first item must name a program"):format(name))
      valid.agents[name] = nil
    end
  end
  editor_server_named(checked.mcp_servers, "mcp_servers", problems)
  for name, agent in pairs(is_table(checked.agents) and checked.agents or {}) do
    if is_table(agent) then
      editor_server_named(agent.mcp_servers, ("agents.%s.mcp_servers"):format(name), problems)
    end
  end
  -- What only a server's whole entry tells (a url for an http server), and where an
  -- agent may read without asking: told here, not first by a chat that refuses to start.
  servers_offered(checked.mcp_servers, "mcp_servers", problems)
  for name, agent in pairs(is_table(checked.agents) and checked.agents or {}) do
    local key = ("agents.%s"):format(name)
    -- A wrong server of its own is left out; the agent (and its other servers) kept.
    if is_table(agent) and not told(problems, key, key .. ".mcp_servers") then
      servers_offered(agent.mcp_servers, key .. ".mcp_servers", problems)
    end
  end
  if is_table(valid.fs_access) and valid.fs_access.roots then
    valid.fs_access.roots = directories(valid.fs_access.roots, "fs_access.roots", problems, false)
  end
  valid.roots = valid.roots and directories(valid.roots, "roots", problems, true)
  for name, agent in pairs(is_table(valid.agents) and valid.agents or {}) do
    agent.roots = agent.roots and directories(agent.roots, ("agents.%s.roots"):format(name), problems, true)
  end
  -- A size is a fraction of the editor, or a whole count of cells from a least one.
  for key, least in pairs(defaults.chat_sizes) do
    local size = is_table(valid.chat) and valid.chat[key]
    if type(size) == "number" and size > 1 and (size < least or size % 1 ~= 0) then
      local problem = "chat.%s: expected a fraction (at most 1) or a whole number >= %d, got %g"
      table.insert(problems, problem:format(key, least, size))
      valid.chat[key] = nil
    end
  end
  -- Sorted: the report reads the same whatever order pairs() takes.
  table.sort(problems)
  local options = vim.tbl_deep_extend("force", vim.deepcopy(defaults.options), valid)
  if not vim.tbl_contains(M.agent_names(options), options.default_agent) then
    -- An agent given but wrong is already reported: it is not also "unknown".
    local given = is_table(opts.agents) and opts.agents[options.default_agent] ~= nil
    if not given then
      table.insert(problems, ("default_agent: unknown agent '%s'"):format(options.default_agent))
    end
    options.default_agent = defaults.options.default_agent
  end
  return problems, options
end

--- The older names of keys (chat.send_key, chat.send_now_key, hunk_keys: "" maps
--- none) fill the keys
--- of `options` that `opts` does not give itself.
local function resolve_aliases(opts, options)
  local given = opts.keys or {}
  local function set(where, name, value)
    if (given[where] or {})[name] == nil and value ~= nil then
      options.keys[where][name] = value ~= "" and value
    end
  end
  set("input", "send_insert", (opts.chat or {}).send_key)
  set("input", "send_now", (opts.chat or {}).send_now_key)
  local hunk = opts.hunk_keys
  for _, action in ipairs({ "accept", "reject", "reject_why", "preview", "next", "prev" }) do
    set("review", "hunk_" .. action, hunk == false and "" or (type(hunk) == "table" and hunk[action] or nil))
  end
end

--- `opts` without its keys set to vim.NIL (a JSON null, or a key cleared on
--- purpose): such a key is not given, as one set to nil. Lists keep theirs (an
--- item is checked).
local function without_null(opts)
  if type(opts) ~= "table" or vim.islist(opts) then
    return opts
  end
  local kept = {}
  for key, value in pairs(opts) do
    if value ~= vim.NIL then
      kept[key] = without_null(value)
    end
  end
  return kept
end

--- Take the options given to setup(). Returns what is wrong with them (each
--- `key: problem`); Lua then uses the defaults of those keys.
---@param opts? acp.Options
---@return string[]
function M.set(opts)
  opts = without_null(opts or {})
  local problems, options = M.check(opts)
  local valid = options
  resolve_aliases(check(opts, { class = "acp.Options" }, "", nil) or {}, valid)
  M.options, M.problems = valid, problems
  M.given = vim.tbl_deep_extend("force", vim.deepcopy(defaults.options), opts)
  return problems
end

--- One line naming every problem: "invalid option k: …" or "invalid options: …".
---@param problems string[]
---@return string
function M.summary(problems)
  if #problems == 1 then
    return "invalid option " .. problems[1]
  end
  return "invalid options: " .. table.concat(problems, "; ")
end

--- Names for :AcpChat completion: the built-in agents and the configured ones.
---@param options? acp.Options default: the options in use
function M.agent_names(options)
  local names = vim.deepcopy(defaults.agents)
  for name in pairs((options or M.options).agents or {}) do
    if not vim.tbl_contains(names, name) then
      table.insert(names, name)
    end
  end
  table.sort(names)
  return names
end

return M
