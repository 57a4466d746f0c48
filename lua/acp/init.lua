-- acp.nvim public API. Everything else under lua/acp is private.
--
-- setup() runs in every start of the user's Neovim: only what it needs, and the
-- leaf registry of chats, are required here. The chat and review modules (~2.5 ms
-- more) are required in the functions that use them, on first use.
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local highlights = require("acp.highlights")
local host = require("acp.host")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

local function chat_module()
  return require("acp.chat")
end

--- Stop at an agent that is neither built in nor configured, before a chat opens
--- only to say so.
---@param agent? string
local function known_agent(agent)
  if agent and agent ~= vim.NIL then
    local names = config.agent_names()
    if not vim.tbl_contains(names, agent) then
      util.user_error(("unknown agent '%s' (configured: %s)"):format(agent, table.concat(names, ", ")))
    end
  end
end

--- Configure the plugin. Every wrong option is reported at once, by its dotted
--- key, and its default is used until it is right (the Python side refuses to
--- start chats meanwhile).
---@param opts? acp.Options
function M.setup(opts)
  -- A list (`setup({ { ... } })`, braces doubled) was "invalid option : expected a
  -- table, got a list", the key it names empty.
  if opts ~= nil and (type(opts) ~= "table" or (next(opts) ~= nil and vim.islist(opts))) then
    util.user_error("setup() takes a table of options")
  end
  local problems = config.set(opts)
  if #problems > 0 then
    util.notify(config.summary(problems))
  end
  local clashes = require("acp.keys").clashes(config.options.keys)
  if #clashes > 0 then -- still taken: the one mapped last works
    util.notify(table.concat(clashes, "; ") .. ": only one of each works", "warn")
  end
  highlights.setup()
  host.reconfigure()
end

local function require_chat()
  local chat = registry.get()
  if not chat then
    util.user_error("no chat is open (:AcpChat)")
  end
  return chat
end

--- Open (or focus) the chat; `new` starts a new session; `history` shows that
--- stored chat (|acp-chat-history|) in a new chat, where sending continues it
--- (or goes to the chat that shows it).
--- `cwd`, `roots` and `worktree` open a new chat working there (|acp-workspaces|):
--- in directory `cwd` (default: Neovim's), with more workspace `roots` (absolute
--- paths), in a new git worktree of the project with `worktree`.
---@param opts? {agent?: string, new?: boolean, history?: integer, session_id?: string, cwd?: string, roots?: string[], worktree?: boolean}
---@return integer chat id
function M.open(opts)
  opts = opts or {}
  util.options("open", opts, {
    agent = "string",
    new = "boolean",
    history = "integer",
    cwd = "string",
    roots = "list of strings",
    session_id = "string",
    worktree = "boolean",
  })
  local unsupported = util.unsupported()
  if unsupported then
    util.user_error(unsupported)
  end
  known_agent(opts.agent)
  -- The Python host starts first, so its start-up overlaps drawing the chat, and
  -- with it the chat's agent (decision 0051); a start that failed before is tried
  -- again. An open that starts no agent of its own at once (a stored chat, a
  -- worktree to make first) does not have one started early.
  local first_agent
  if not (opts.history or opts.worktree) then
    local cwd = opts.cwd and util.directory(opts.cwd) or vim.fn.getcwd()
    first_agent = { agent = opts.agent, cwd = cwd, cwd_given = opts.cwd ~= nil }
  end
  host.retry(first_agent)
  highlights.setup()
  return chat_module().open(opts).id
end

--- Hide the chats the current tab page shows; else show the chats hidden so
--- last, when no chat was shown or hidden since, else the chat (opening one when
--- there is none), like |:AcpChat|.
function M.toggle()
  if not chat_module().toggle() then
    M.open()
  end
end

--- Send a message to the current chat's agent. `opts.context`: what to attach,
--- each `{type="file", path=...}`, `{type="buffer", bufnr=...}`,
--- `{type="selection", bufnr=..., range={l1, l2}}`, `{type="diagnostics", bufnr=...}`
--- or `{type="image", path=...}`; `@` mentions in `text` attach too. `opts.now`:
--- send it now, into the running turn where the agent steers, else the turn is
--- cancelled and it goes first (|acp-steer|).
---@param text string
---@param opts? {context?: table[], now?: boolean}
function M.send(text, opts)
  opts = opts or {}
  util.options("send", opts, { context = "list", now = "boolean" })
  if type(text) ~= "string" or (vim.trim(text) == "" and not opts.context) then
    util.user_error(("send takes the prompt's text, not %s"):format(vim.inspect(text)))
  end
  local context = {}
  for _, item in ipairs(opts.context or {}) do
    table.insert(context, require("acp.chat.context").normalize(item))
  end
  chat_module().send(require_chat(), text, context, { now = opts.now or nil })
end

--- Mention a file, or lines of the current buffer, in the chat's input (like
--- |:AcpAdd|): `{file = path}` or `{range = {l1, l2}}`.
---@param opts {file?: string, range?: integer[]}
function M.add(opts)
  opts = opts or {}
  util.options("add", opts, { file = "string", range = "list" })
  require("acp.chat.context").add(opts)
end

--- Attach an image from the clipboard to the next prompt of the current chat
--- (|:AcpPaste|): it is saved and mentioned in the input.
function M.paste_image()
  require("acp.chat.paste").paste()
end

--- Cancel the current turn (the turn ends with stop reason "cancelled").
function M.cancel()
  chat_module().cancel(require_chat())
end

--- Start the current chat's agent again and go on in the same transcript (the
--- agent's session is resumed where it offers that). After the Python host
--- died, a new chat takes the dead one's windows.
function M.restart()
  local chat = require_chat()
  if chat.host_failed then -- its session died with the Python side: a new chat, as :AcpChat
    M.open({ agent = chat.status.agent })
  else
    chat_module().restart(chat)
  end
end

--- Take the files the agent changed back to how they were before turn `turn` of
--- the current chat (default: its last turn), like |:AcpRestore|.
---@param turn? integer
function M.restore(turn)
  host.notify("restore", { chat = require_chat().id, turn = util.turn_number(turn) })
end

--- Prompts of the current chat waiting to be sent, oldest first (sent one by one
--- when the running turn ends).
---@return string[]
function M.queue()
  local chat = registry.get()
  return chat and vim.deepcopy(chat.status.queue or {}) or {}
end

--- Take the current chat's conversation and files back to before turn `turn` of
--- the branch shown, like |:AcpRewind| (without `turn`: pick it). The turns left
--- behind stay as a branch (|acp.branches()|).
---@param turn? integer
function M.rewind(turn)
  require("acp.chat.branches").rewind(require_chat(), util.turn_number(turn))
end

--- The branches of the current chat's conversation, the one shown first:
--- `{id, current, turns, leaves_at?, prompt, last_prompt, session_id?}` (|acp-branches|).
---@return {id: integer, current: boolean, turns: integer, leaves_at?: integer, prompt: string, last_prompt: string, session_id?: string}[]
function M.branches()
  local chat = registry.get()
  return chat and require("acp.chat.branches").list(chat) or {}
end

--- Put the prompt of turn `turn` (default: the last) of the current chat back in
--- its input, like |:AcpEdit|: sent, it goes from before that turn (a rewind).
---@param turn? integer
function M.edit(turn)
  chat_module().edit(require_chat(), util.turn_number(turn))
end

--- Send the current chat's last prompt again, from before its answer, like
--- |:AcpRegenerate|: a rewind to the last turn, then the same prompt.
function M.regenerate()
  require("acp.host").notify("regenerate", { chat = require_chat().id })
end

--- Open a new chat that continues the current chat's conversation in a fork of its
--- session, on the same agent, like |:AcpFork|: its transcript starts with the
--- current one's. Only where the agent offers fork, and not during a turn (else a
--- user error says why).
---@return integer chat id of the fork
function M.fork()
  return chat_module().fork(require_chat()).id
end

--- Open a new chat on `agent` that continues the current chat's conversation: it
--- shows it, and its first prompt carries it (|:AcpHandoff|). The current chat
--- stays as it is.
---@param agent string
---@return integer chat id
function M.handoff(agent)
  util.required("handoff", "agent", agent, "string")
  local from = require_chat()
  known_agent(agent)
  if from.status.state == "running" then
    util.user_error("cannot hand over during a turn: cancel it first")
  end
  return chat_module().open({ agent = agent, handoff = from }).id
end

--- Stored chats, newest first (|acp-chat-history|): `query` keeps those whose
--- prompts, replies or tool calls hold each of its words; `agent`, `cwd` filter.
---@param opts? {query?: string, agent?: string, cwd?: string, limit?: integer}
---@return acp.HistoryEntry[]
function M.history(opts)
  return require("acp.chat.history").search(opts)
end

--- Delete stored chat `id` from the history.
---@param id integer
function M.forget(id)
  util.required("forget", "id", id, "integer")
  require("acp.chat.history").forget(id)
end

--- The current chat (or stored chat `opts.history`) as Markdown, written to `path`
--- (over a file there only with `opts.force`), else shown in a new buffer
--- (|:AcpExport|). Returns the path or the buffer; with `opts.on_done`, returns at
--- once and calls it with them (Neovim goes on meanwhile).
---@param path? string
---@param opts? {history?: integer, force?: boolean, on_done?: fun(done: string|integer)}
---@return string|integer?
function M.export(path, opts)
  util.optional("export", "path", path, "string")
  util.options("export", opts or {}, { history = "integer", force = "boolean", on_done = "function" })
  return require("acp.chat.history").export(path, opts)
end

--- The open chats, oldest first: `{id, agent, title, state, permissions, cwd,
--- turns, active_at, worktree, waiting}` with `title` the chat's name (|:AcpChats|
--- or |:AcpHistory| rename, else the session's title, else the agent and id),
--- `permissions` the count of pending permission requests, `cwd` the directory its agent works in,
--- `turns` its turns shown (a message sent into a running turn is of it), `active_at`
--- its last change, and for a worktree chat
--- `worktree` (the worktree's path) and `waiting` (its hunks not yet brought into
--- your files).
---@return {id: integer, agent: string, title: string, state: string, permissions: integer, cwd: string, turns: integer, active_at: integer, worktree?: string, waiting: integer}[]
function M.chats()
  return chat_module().list()
end

--- Pick an open chat (|:AcpChats|) to switch to, close or rename.
function M.pick_chat()
  chat_module().pick()
end

--- Pick a queued prompt to edit (back into the input) or remove.
function M.edit_queue()
  require("acp.chat.queue").pick(require_chat())
end

--- Close the current chat; its agent stops when no other chat uses it. A worktree
--- chat's worktree is removed with it; while hunks (or an execute bit the agent
--- changed) wait in it, you are asked first (|acp-worktree|).
function M.close()
  chat_module().close(require_chat(), true)
end

--- Pick an answer for the pending permission request (the one at the cursor, else
--- the current chat's oldest, else any chat's) with vim.ui.select.
--- `action` "list": show the "always" answers remembered per project; "forget":
--- pick one to revoke (|:AcpPermission| list, forget).
---@param action? "list"|"forget"
function M.permission(action)
  util.optional("permission", "action", action, "string")
  if action == "list" or action == "forget" then
    require("acp.chat.grants")[action]()
  elseif action then
    util.user_error(("unknown :AcpPermission %s (list, forget)"):format(action))
  else
    require("acp.chat.permission").open()
  end
end

--- Open the review of the agent's changes (latest turn first, then earlier turns).
function M.review()
  highlights.setup()
  require("acp.review").open()
end

--- Files and hunks the agent changed in the current chat's latest turn (every
--- turn with `{all = true}`), as plain tables: see |acp.changes()|.
---@param opts? {all?: boolean}
---@return acp.ReviewFile[]
function M.changes(opts)
  util.options("changes", opts or {}, { all = "boolean" })
  return require("acp.review").changes(opts)
end

--- Accept the agent's changes: one hunk of `file`, all of `file`, or (no
--- arguments) everything. Accepting leaves the text as the agent made it.
---@param file? string
---@param hunk? integer hunk id from |acp.changes()|
function M.accept(file, hunk)
  local state = require("acp.review.state")
  state.decide(state.chat_id(), "accept", file, hunk)
end

--- Reject the agent's changes (same arguments as |acp.accept()|): the hunk's
--- previous text comes back in the buffer and on disk. `opts.reason`: why, told
--- to the agent at once (into its running turn where it steers, else as the next
--- prompt).
---@param file? string
---@param hunk? integer
---@param opts? {reason?: string}
function M.reject(file, hunk, opts)
  util.options("reject", opts or {}, { reason = "string" })
  local state = require("acp.review.state")
  state.decide(state.chat_id(), "reject", file, hunk, nil, (opts or {}).reason)
end

--- The agent hunk under the cursor (in a file's buffer, or the baseline buffer of
--- |:AcpDiff|), or nil: a hunk of |acp.changes()| with `chat`, `path` and `turn`,
--- and `new_start` where its rows are now.
---@return table?
function M.hunk_at_cursor()
  return require("acp.review.hunks").at_cursor()
end

--- Change a session setting (ACP v2 config options: mode, model, thinking, ...).
--- Without `value`, pick it with vim.ui.select; without `id` either, the setting too.
---@param id? string the setting's id (`configId`)
---@param value? string|boolean
function M.config(id, value)
  util.optional("config", "id", id, "string")
  util.optional("config", "value", value, "string", "boolean")
  require("acp.chat.session").config(require_chat(), id, value)
end

--- Switch the current chat's mode (an id or a name); without one, pick it. Uses
--- the agent's config option of category "mode" where it has one, else its modes.
---@param id? string
function M.set_mode(id)
  util.optional("set_mode", "mode", id, "string")
  require("acp.chat.session").choose(require_chat(), "mode", id)
end

--- Switch the current chat's model (an id or a name); without one, pick it.
---@param id? string
function M.set_model(id)
  util.optional("set_model", "model", id, "string")
  require("acp.chat.session").choose(require_chat(), "model", id)
end

--- Pick one of the agent's saved sessions and resume it in a new chat.
function M.sessions()
  require("acp.chat.session").sessions(require_chat())
end

--- Resume session `session_id` of the current chat's agent in a new chat, in the
--- current chat's directory; its history is replayed into the transcript where the
--- agent can.
---@param session_id string
---@return integer chat id
function M.resume(session_id)
  util.required("resume", "session_id", session_id, "string")
  local chat = require_chat()
  return require("acp.chat.session").resume(chat.status.agent, session_id, chat).id
end

--- Delete one of the agent's saved sessions (when the agent offers it).
---@param session_id string
function M.delete_session(session_id)
  util.required("delete_session", "session_id", session_id, "string")
  require("acp.chat.session").delete(require_chat(), session_id)
end

--- Log in to the current chat's agent (`method`: a method id; default the first).
---@param method? string
function M.login(method)
  util.optional("login", "method", method, "string")
  require("acp.chat.session").login(require_chat(), method)
end

--- Log out of the current chat's agent.
function M.logout()
  require("acp.chat.session").logout(require_chat())
end

-- Every field status() returns (tests/nvim/test_surface.py holds them to it).
---@class (exact) acp.Choices
---@field current string the id of the current choice
---@field available {id: string, name: string}[]

---@class (exact) acp.Spent
---@field tokens integer the context's growth (negative after a compaction)
---@field cost? {amount: number, currency: string} the cost's rise, where the agent reports it

---@class (exact) acp.TurnTokens
---@field input integer tokens the agent's model read in the turn (as the agent counts them)
---@field output integer tokens it wrote
---@field total integer all of them
---@field thought? integer of those, reasoning
---@field cached_read? integer of those, read from the model's cache
---@field cached_write? integer of those, written to it

---@class (exact) acp.Usage
---@field used integer tokens in the context window
---@field size integer the context window's size
---@field cost? {amount: number, currency: string} the session's cost so far
---@field turn? acp.Spent what the last turn used
---@field session? acp.Spent what the session's turns used, together
---@field turn_tokens? acp.TurnTokens the last turn's tokens as the agent counts them, where it does

---@class (exact) acp.Command
---@field name string without the leading /
---@field description string
---@field hint? string what to type after it

---@class (exact) acp.HistoryEntry
---@field id integer
---@field title string
---@field agent string
---@field cwd string
---@field created_at number seconds since the epoch
---@field updated_at number
---@field turns integer
---@field snippet string the matching words in their context ("" without a query)

---@class (exact) acp.Status
---@field chat integer chat id
---@field name? string the name you gave the chat (:AcpChats, :AcpHistory), nil without one
---@field agent string agent name
---@field agent_title? string the agent's own name for itself
---@field session_id? string
---@field protocol_version? integer negotiated ACP version
---@field state "starting"|"ready"|"running"|"error"|"closed"
---@field connected boolean an agent process runs for the chat: true once it takes the chat; false before (a reopened chat: until its first prompt) and after it exits
---@field stop_reason? string of the last turn
---@field error? string why the chat stopped (state error); nil once it is ready again
---@field unknown_update? string the kind of the last update this client could not show
---@field mode? string
---@field model? string
---@field thought_level? string
---@field turn_state? "running"|"requires_action"|"cancelling"|"idle"|string the agent's report (ACP v2), or "cancelling" after a cancel
---@field queued integer prompts waiting to be sent (|acp.queue()|)
---@field waiting? "rewind"|"branch" the session a rewind or a picked branch goes on in is awaited: a prompt only queues
---@field config_options? table[] the session's settings: {id, name, type, category, current, choices}; past 10,000 choices in all, a select has current_name instead of choices
---@field title? string the session's title, as the agent names it
---@field history? integer the chat's id in the history (|acp-chat-history|); none once deleted from it
---@field cwd string the directory the agent works in (a worktree chat's: in its worktree)
---@field roots string[] the chat's more workspace roots (|acp-workspaces|)
---@field worktree? string a worktree chat's worktree (its path, as |acp.chats()| gives it)
---@field usage? acp.Usage the context window and cost, as the agent reports them
---@field commands? acp.Command[] the agent's slash commands
---@field modes? acp.Choices the agent's modes
---@field models? acp.Choices the agent's models
---@field transcript_buf integer
---@field input_buf integer

--- One line for a statusline: the current chat's agent, state, mode and context
--- meter, e.g. `acp demo · running · Ask · ctx 12k/200k 6%`; "" without a chat.
---@return string
function M.statusline()
  local chat = registry.get()
  if not chat then
    return ""
  end
  local s = chat.status
  local parts = { "acp " .. (s.agent or "?"), s.state or "starting" }
  if s.mode then
    table.insert(parts, s.mode)
  end
  local usage = require("acp.chat.winbar").usage_text(s.usage)
  if usage then
    table.insert(parts, usage)
  end
  return table.concat(parts, " · ")
end

local function choices_of(chat, category)
  local option = require("acp.chat.session").setting(chat, category)
  if not option then
    return nil
  end
  local available = {}
  for _, choice in ipairs(require("acp.chat.session").choices(chat, option)) do
    table.insert(available, { id = choice.value, name = choice.name })
  end
  return { current = option.current, available = available }
end

--- State of the current chat, or nil when none is open.
---@return acp.Status?
function M.status()
  local chat = registry.get()
  if not chat then
    return nil
  end
  local s = chat.status
  local worktree = require("acp.chat.workspace").worktree(chat)
  return {
    chat = chat.id,
    name = s.name,
    agent = s.agent,
    agent_title = s.agent_title,
    session_id = s.session_id,
    protocol_version = s.protocol_version,
    state = s.state,
    connected = s.connected == true,
    stop_reason = s.stop_reason,
    error = s.error,
    mode = s.mode,
    model = s.model,
    thought_level = s.thought_level,
    turn_state = s.turn_state,
    queued = s.queued or 0,
    waiting = s.waiting,
    config_options = s.config_options,
    title = s.title,
    history = s.history,
    cwd = registry.cwd(chat),
    roots = vim.deepcopy(s.roots or {}),
    worktree = worktree and worktree.path,
    usage = s.usage,
    commands = s.commands,
    unknown_update = s.unknown_update,
    modes = choices_of(chat, "mode"),
    models = choices_of(chat, "model"),
    transcript_buf = chat.transcript,
    input_buf = chat.input,
  }
end

return M
