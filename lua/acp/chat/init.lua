-- Chats: a transcript buffer (markdown, read-only) and an input buffer, shown
-- together by acp.chat.layout. Each chat is bound to one session on the Python side
-- by its integer id; acp.chat.registry holds the open ones. The render ops Python
-- sends for a chat arrive here (M.render) and are handled by their kind (M.ops).
if jit then jit.off(true, true) end -- decision 0068
local blocks_of = require("acp.chat.blocks")
local bufnames = require("acp.bufnames")
local chat_keys = require("acp.chat.keys")
local complete = require("acp.chat.complete")
local config = require("acp.config")
local editing = require("acp.chat.editing")
local elicit = require("acp.chat.elicit")
local hint = require("acp.chat.hint")
local host = require("acp.host")
local kept = require("acp.chat.kept")
local layout = require("acp.chat.layout")
local mentions = require("acp.chat.context")
local notice = require("acp.chat.notice")
local permission = require("acp.chat.permission")
local prompt_history = require("acp.chat.prompt_history")
local queue = require("acp.chat.queue")
local registry = require("acp.chat.registry")
local render = require("acp.chat.render")
-- Also the handlers of the review state and the baselines Python sends about a
-- chat's changes (acp.host's dispatch table).
local review = require("acp.review")
local sent = require("acp.chat.sent")
local tools = require("acp.chat.tools")
local util = require("acp.util")
local winbar = require("acp.chat.winbar")
local workspace = require("acp.chat.workspace")

local M = {}
local api = vim.api

local valid = registry.valid
local next_id = 1
-- Per tab page (the one it left the user in), the chats the last :AcpToggle there
-- hid, oldest first, to show again. All forgotten when a chat window opens or
-- closes another way (not while a toggle hides or shows): the chat used since is
-- the one to bring back, not those hidden before it.
local toggled = {} ---@type table<integer, integer[]>
local toggling = false
local close_now -- defined below; a transcript wiped out calls it

--- A scratch buffer's options: Markdown with the chat's own syntax, the transcript
--- and the input alike: a stream keeps its colors and nothing is loaded again after
--- one (decision 0049).
local function scratch_options(buf)
  vim.bo[buf].buftype = "nofile"
  util.chat_markdown(buf)
  vim.bo[buf].bufhidden = "hide"
  vim.bo[buf].swapfile = false
end

--- A scratch buffer `name`, its options not set yet: each is set once (a second
--- 'filetype' runs the ftplugin's undo and the ftplugin again).
local function scratch(name)
  local buf = api.nvim_create_buf(false, true)
  bufnames.give(buf, name)
  return buf
end

--- <CR> on one of the user's messages in the transcript: its prompt back in the
--- input, to edit and send from there (|:AcpEdit|). Whether the cursor was on one.
local function edit_at_cursor(chat)
  local _, block = blocks_of.block_at(chat.transcript, chat.blocks, api.nvim_win_get_cursor(0)[1] - 1)
  if block and block.kind == "user" and block.turn then
    M.edit(chat, block.turn)
    return true
  end
  return false
end

--- What the chat's keys do to it (acp.chat.keys).
---@return acp.ChatActions
local function actions(chat)
  local function sender(now)
    return function()
      local text = registry.typed(chat)
      if not text then
        return
      end
      text = vim.trim(text)
      -- An edited earlier prompt goes from before its turn (a rewind, then the send).
      local rewind = editing.take(chat)
      api.nvim_buf_set_lines(chat.input, 0, -1, false, {})
      M.send(chat, text, nil, { rewind = rewind, now = now or nil })
    end
  end
  return {
    send = sender(false),
    send_now = sender(true),
    cancel = function()
      M.cancel(chat)
    end,
    hide = function()
      layout.hide(chat)
    end,
    edit_at_cursor = function()
      return edit_at_cursor(chat)
    end,
  }
end

-- The transcript's syntax looks back ten lines above the window for where it is
-- (decision 0008).
local SYNC_LINES = 10
-- A flood, more than FLOOD_ROWS rows written within FLOOD_MS, is shown without
-- list-aware wrapping until no row came for SETTLE_MS: a flood scrolls a window
-- with each batch, and following it measures each new row's wrapped height, where
-- 'breakindentopt' list:-1 matches 'formatlistpat' (10-20 µs a row)
-- (doc/decisions/0025-render-pacing.md). Settling wraps only what is on screen
-- again. Human-paced replies keep it.
local FLOOD_ROWS, FLOOD_MS, SETTLE_MS = 20, 100, 250
-- The list items 'breakindentopt' list:-1 indents wrapped rows under: CommonMark's
-- markers. Neovim compiles the pattern for each row it measures; markdown's own
-- (with its footnote branch, on the automatic engine) costs ~13 µs a row, this
-- one on the backtracking engine ~0.6 µs. Following the transcript's end measures
-- a window of rows at every turn start (decision 0061). A diff's `+`/`-` line
-- counts as one too: its wrapped rows go under its text, as a context line's do.
local LIST_ITEM = [[\%#=1^\%(\s*\%([-*+]\|\d\+[.)]\)\s\+\|[-+]\)]]

local function set_sync(chat)
  api.nvim_buf_call(chat.transcript, function()
    vim.cmd(("syntax sync minlines=%d maxlines=%d"):format(SYNC_LINES, SYNC_LINES))
  end)
end

local function bound_syntax_sync(chat)
  set_sync(chat)
  api.nvim_create_autocmd("Syntax", {
    buffer = chat.transcript,
    callback = function()
      set_sync(chat)
    end,
  })
end

local function settle(chat)
  local flood = chat.flood
  chat.flood = nil
  if flood and api.nvim_buf_is_valid(chat.transcript) then
    for win, opt in pairs(flood.breakindentopt) do
      if api.nvim_win_is_valid(win) and api.nvim_win_get_buf(win) == chat.transcript then
        vim.wo[win].breakindentopt = opt
      end
    end
  end
end

--- The rows a batch writes: appended, or of the blocks drawn. (Counted without
--- copying the text, as gsub would: garbage is what makes Lua's collector run
--- inside a batch.)
local function rows_of(ops)
  local rows = 0
  for _, op in ipairs(ops) do
    if op.op == "append" then
      local at = op.text:find("\n", 1, true)
      while at do
        rows = rows + 1
        at = op.text:find("\n", at + 1, true)
      end
    elseif op.op == "block" then
      rows = rows + #op.lines
    end
  end
  return rows
end

--- Settle the flood `paused` once no row came for SETTLE_MS: one timer at a time,
--- not one per batch.
local function settle_later(chat, paused)
  vim.defer_fn(function()
    if chat.flood ~= paused then
      return
    end
    local quiet = vim.uv.now() - paused.last
    if quiet >= SETTLE_MS then
      settle(chat)
    else
      settle_later(chat, paused)
    end
  end, SETTLE_MS - math.min(SETTLE_MS - 1, vim.uv.now() - paused.last))
end

--- Count the rows a batch writes, before it is applied (the batch that starts a
--- flood is drawn plain too); draw a flood plain until it settles.
local function flood(chat, rows)
  if rows == 0 then
    return
  end
  local now = vim.uv.now()
  if not chat.rows_since or now - chat.rows_since > FLOOD_MS then
    chat.rows_since, chat.rows = now, 0
  end
  chat.rows = chat.rows + rows
  if not chat.flood and chat.rows > FLOOD_ROWS then
    chat.flood = { last = now, breakindentopt = {} }
    for _, win in ipairs(vim.fn.win_findbuf(chat.transcript)) do
      chat.flood.breakindentopt[win] = vim.wo[win].breakindentopt
      vim.wo[win].breakindentopt = ""
    end
    settle_later(chat, chat.flood)
  end
  if chat.flood then
    chat.flood.last = now
  end
end

--- The transcript's 'foldexpr' (acp.chat.layout) calls this as the funcref
--- b:acp_foldexpr: a `v:lua` expression compiles a Lua chunk on every call, and
--- Neovim evaluates it for each row a stream adds (1.5 µs and 300 bytes of garbage
--- a row, half a batch's Lua time). A thought or tool call block is one fold from
--- its header line (shown as it is when closed, 'foldtext' ""), so zc on the
--- header folds the block.
local function foldexpr(chat, lnum)
  local kind, first = blocks_of.kind_at(chat.transcript, chat.blocks, lnum)
  if blocks_of.folds[kind] then
    return first and ">1" or 1
  end
  return 0
end

--- Keep what `chat`'s input holds, unsent, in the prompt history, and say so.
local function keep_unsent(chat)
  if prompt_history.keep_unsent(chat) then
    util.notify(("chat #%d's unsent prompt is in the prompt history (<Up> in the input)"):format(chat.id), "info")
  end
end

--- The windows of chat buffer `buf` (its transcript or its input): decorated as
--- they show it, and the pair closed or made whole when one of them closes.
local function follow_windows(chat, buf)
  vim.b[buf].acp_chat = chat.id
  api.nvim_create_autocmd("BufWinEnter", {
    buffer = buf,
    callback = function()
      toggled = toggling and toggled or {}
      layout.decorate(api.nvim_get_current_win(), buf == chat.transcript)
      winbar.update(chat)
      -- An agent's question that waited for the chat to be shown (acp.chat.elicit).
      vim.schedule(function()
        elicit.resume(chat)
      end)
    end,
  })
  api.nvim_create_autocmd("WinClosed", {
    buffer = buf,
    callback = function(ev)
      local win = tonumber(ev.match) --[[@as integer]]
      toggled = toggling and toggled or {}
      local closed_current, tab = win == api.nvim_get_current_win(), api.nvim_win_get_tabpage(win)
      if buf == chat.transcript then
        chat.closed_at_end = render.at_end(win, buf)
        chat.closed_top = vim.fn.getwininfo(win)[1].topline
      end
      -- The layout cannot change inside WinClosed.
      vim.schedule(function()
        if registry.chats[chat.id] then
          layout.rejoin(chat, tab, closed_current)
        end
      end)
    end,
  })
end

--- The chat's input: a buffer with its keys, completion and windows, whose text is
--- kept as it is typed. A buffer command that takes the text (:bdelete, :bunload,
--- :edit!, :bwipeout!) costs none of it: it is kept in the prompt history, as a
--- close keeps it, and an input unloaded or wiped is made again, whole.
local function make_input(chat)
  local buf = scratch("acp://input/" .. chat.id)
  scratch_options(buf)
  chat.input = buf
  prompt_history.map(chat)
  chat_keys.map_input(chat, actions(chat))
  complete.attach(chat)
  prompt_history.watch(chat)
  follow_windows(chat, buf)
  api.nvim_create_autocmd("BufUnload", {
    buffer = buf,
    callback = function()
      if registry.chats[chat.id] ~= chat or vim.v.exiting ~= vim.NIL then
        return -- it closes, or Neovim quits (VimLeavePre keeps the text)
      end
      editing.stop(chat)
      chat.given_back = nil
      keep_unsent(chat)
      vim.schedule(function()
        if registry.chats[chat.id] ~= chat or chat.input ~= buf then
          return
        end
        if not api.nvim_buf_is_loaded(buf) then
          pcall(api.nvim_buf_delete, buf, { force = true }) -- :bdelete leaves its name taken
          make_input(chat)
        end
        permission.map_keys(chat) -- a waiting prompt's keys and hint
      end)
    end,
  })
end

--- The transcript's options, variables and keys: set when it is made, and again
--- when it loads after a :bdelete took them (acp.chat.kept).
local function dress_transcript(chat)
  local buf = chat.transcript
  scratch_options(buf)
  vim.bo[buf].buflisted = false -- :e! lists the buffer it edits
  vim.bo[buf].modifiable = false
  vim.bo[buf].formatlistpat = LIST_ITEM
  -- Nobody undoes in a read-only buffer: the history of what we wrote only took
  -- memory (~0.4 MB for a 100k-line transcript, doc/performance.md).
  vim.bo[buf].undolevels = -1
  vim.b[buf].acp_chat = chat.id
  vim.b[buf].acp_foldexpr = function(lnum)
    return foldexpr(chat, lnum)
  end
  vim.b[buf].acp_winbar = winbar.shown
  chat_keys.map_transcript(chat, actions(chat))
end

local function create()
  local id = next_id
  next_id = next_id + 1
  local chat = {
    id = id,
    transcript = scratch("acp://chat/" .. id),
    blocks = blocks_of.new(),
    status = { state = "starting" },
    active_at = os.time(),
  }
  dress_transcript(chat)
  bound_syntax_sync(chat)
  registry.chats[id] = chat
  make_input(chat)
  follow_windows(chat, chat.transcript)
  kept.attach(chat, dress_transcript)
  api.nvim_create_autocmd("BufWipeout", {
    buffer = chat.transcript,
    once = true,
    callback = function()
      close_now(chat, nil, chat.transcript)
    end,
  })
  return chat
end

--- Ask the Python side for the chat's session, or show why it cannot start.
local function start(chat)
  if host.ensure() then
    local opened = chat.opened
    host.notify("open", {
      chat = chat.id,
      agent = opened.agent,
      cwd = chat.cwd,
      cwd_given = opened.cwd_given,
      roots = opened.roots,
      worktree = opened.worktree,
      session_id = opened.session_id,
      fork = opened.fork,
      history = opened.history,
      handoff = opened.handoff,
      within = opened.within,
    })
  else
    M.fail(chat, host.failure.message)
  end
end

--- A new chat in its own workspace (|acp-workspaces|): `cwd` (else Neovim's
--- directory), `roots`, in a new git worktree with `worktree`.
--- `within`: the chat it is opened from (a session resumed from its list): a worktree
--- chat's worktree is its too.
---@param opts {agent?: string, new?: boolean, session_id?: string, fork?: acp.Chat, history?: integer, handoff?: acp.Chat, cwd?: string, roots?: string[], worktree?: boolean, within?: acp.Chat}
---@return acp.Chat
function M.open(opts)
  if opts.agent == vim.NIL then
    opts.agent = nil
  end
  local keeping = opts.history and registry.of_history(opts.history)
  if keeping then -- one chat per stored chat: two would both write it
    M.switch(keeping)
    return keeping
  end
  local existing = opts.fork or (registry.current and registry.chats[registry.current])
  if not valid(existing) then
    existing = nil
  end
  local other_agent = existing and opts.agent and opts.agent ~= existing.status.agent
  local elsewhere = opts.cwd or opts.roots or opts.worktree
  local reuse = existing
    and not (opts.new or opts.session_id or other_agent or opts.fork or opts.history or opts.handoff or elsewhere)
  -- Another agent's chat, or a fork, opens beside the chat where there is room.
  local beside = (other_agent or opts.fork) and layout.room_beside()
  -- A chat whose session died with the Python side stays as it is (like :AcpChat!).
  if reuse and not (existing.host_failed and existing.status.session_id) then
    layout.show(existing)
    if existing.host_failed then
      M.retry(existing)
    end
    return existing
  end
  local dead = reuse and existing -- its session died with the Python side: this goes on for it
  local chat = create()
  chat.status.agent = opts.agent or config.options.default_agent
  chat.opened = {
    agent = opts.agent,
    session_id = opts.session_id,
    fork = opts.fork and opts.fork.id,
    history = opts.history,
    handoff = opts.handoff and opts.handoff.id,
    cwd_given = opts.cwd ~= nil or nil,
    roots = opts.roots,
    worktree = opts.worktree or nil,
    within = opts.within and opts.within.id,
  }
  local from = opts.fork or opts.handoff
  -- Where it was opened: Python makes its workspace of it (a fork's and a handover's
  -- is the chat's they continue).
  chat.cwd = opts.cwd and util.directory(opts.cwd) or from and from.cwd or vim.fn.getcwd()
  registry.current = chat.id
  prompt_history.prefetch(chat)
  if not (opts.fork or opts.session_id or opts.history or opts.handoff) then
    hint.show(chat)
  end
  -- Asked before the windows are made: the Python side starts (or reads a stored
  -- chat) while they are, and its ops are applied after this function returns.
  start(chat)
  -- A new session (:AcpChat!, a resumed one) takes over the visible chat windows;
  -- the previous chat stays alive in its hidden buffers. Another agent's chat
  -- opens beside it where there is room.
  if existing and not beside and layout.take_over(existing, chat) then
    chat.opened.took_over = existing.id
  else
    layout.show(chat)
  end
  if dead and api.nvim_buf_is_loaded(dead.input) then -- what was typed there goes on here
    for _, text in ipairs(prompt_history.unsent(dead)) do
      prompt_history.give_back(chat, vim.split(text, "\n", { plain = true }))
    end
    if dead.history then -- a walk through its prompt history ends: its draft went too
      dead.history.index, dead.history.draft = nil, nil
    end
    api.nvim_buf_set_lines(dead.input, 0, -1, false, {})
  end
  winbar.update(chat)
  return chat
end

--- Open a new chat that continues `chat`'s conversation in a fork of its session
--- (|:AcpFork|), on the same agent. Not during a turn: what a fork holds of a turn
--- still running would be the agent's guess.
---@param chat acp.Chat
---@return acp.Chat the new chat; a user error when `chat` cannot fork now
function M.fork(chat)
  local s = chat.status
  local unstarted = registry.unstarted(chat)
  local refusal
  if s.state == "running" then
    refusal = "cannot fork during a turn: cancel it first"
  elseif unstarted then
    refusal = "cannot fork: " .. unstarted
  elseif s.state ~= "ready" or chat.host_failed then
    refusal = "cannot fork: the chat has no running session"
  elseif not s.can_fork then
    refusal = ("%s does not offer fork"):format(s.agent)
  end
  if refusal then
    util.user_error(refusal)
  end
  return M.open({ agent = s.agent, fork = chat })
end

--- The open chats, oldest first, as plain tables (acp.chats()).
function M.list()
  local list = {}
  for id, chat in pairs(registry.chats) do
    if valid(chat) then
      local worktree = workspace.worktree(chat)
      table.insert(list, {
        id = id,
        agent = chat.status.agent,
        title = registry.title(chat),
        state = chat.status.state or "starting",
        permissions = #(chat.prompts or {}),
        cwd = registry.cwd(chat),
        -- The shown branch's prompts (a turn op keeps them): no walk over every
        -- block, and a message steered into a turn is of that turn.
        turns = #(chat.status.turns or {}),
        active_at = chat.active_at,
        worktree = worktree and worktree.path,
        waiting = worktree and workspace.waiting(chat) or 0,
      })
    end
  end
  table.sort(list, function(a, b)
    return a.id < b.id
  end)
  return list
end

--- Show `chat` in place of the current chat's windows (beside them when the
--- current tab page shows neither), and make it the current chat.
---@param chat acp.Chat
function M.switch(chat)
  local current = registry.current and registry.chats[registry.current]
  registry.current = chat.id
  if layout.shown(chat) or not (current and current ~= chat and valid(current) and layout.take_over(current, chat)) then
    layout.show(chat)
  end
end

--- Name `chat` (empty: it goes by its session's title again); the Python side
--- keeps the name with the chat in the history (|acp-chat-history|).
---@param chat acp.Chat
---@param name string
local function rename(chat, name)
  name = util.one_line(name)
  chat.status.name = name ~= "" and name or nil
  winbar.update(chat)
  if host.running() then
    host.notify("rename", { chat = chat.id, name = chat.status.name })
  end
end

--- :AcpChats: pick a chat, then switch to it, close it or rename it.
function M.pick()
  local list = M.list()
  if #list == 0 then
    util.notify("no chat is open (:AcpChat)", "info")
    return
  end
  vim.ui.select(list, {
    prompt = "Chats",
    format_item = function(item)
      local asking = item.permissions > 0 and (" · %s pending"):format(util.count(item.permissions, "permission")) or ""
      -- A worktree chat works in its worktree, named by its branch as in the winbar.
      local worktree = workspace.worktree(registry.chats[item.id])
      local where = worktree and workspace.label(registry.chats[item.id])[1] or vim.fn.fnamemodify(item.cwd, ":~")
      if item.waiting > 0 then
        where = ("%s, %s waiting"):format(where, util.count(item.waiting, "hunk"))
      end
      local turns = util.count(item.turns, "turn")
      return ("%s · %s · %s · %s · %s · %s%s"):format(item.agent, item.title, where, util.age(item.active_at), turns, item.state, asking)
    end,
  }, function(item)
    local chat = item and registry.chats[item.id]
    if not chat then
      return
    end
    vim.ui.select({ "switch", "close", "rename" }, { prompt = item.title }, function(action)
      if action == "switch" then
        M.switch(chat)
      elseif action == "close" then
        M.close(chat, true)
      elseif action == "rename" then
        vim.ui.input({ prompt = "Name: ", default = item.title }, function(name)
          if name then
            rename(chat, name)
          end
        end)
      end
    end)
  end)
end

--- :AcpToggle: hide every chat the current tab page shows, or show again the
--- ones the last toggle in this tab page hid, as they were, when no chat window
--- opened or closed another way since. A toggle undoes the one before: in the tab
--- page that toggle left the user in, it shows them again even where that tab page
--- shows another chat (closing a chat's own tab page lands in another chat's).
--- False when neither was done.
---@return boolean
function M.toggle()
  local tab = api.nvim_get_current_tabpage()
  local hidden = vim.tbl_filter(function(id)
    return valid(registry.chats[id])
  end, toggled[tab] or {})
  toggled[tab] = nil
  local shown = {}
  for _, item in ipairs(#hidden > 0 and {} or M.list()) do
    if layout.shown(registry.chats[item.id]) then
      table.insert(shown, item.id)
    end
  end
  if #shown == 0 and #hidden == 0 then
    return false
  end
  toggling = true
  local ok, err = pcall(function()
    for _, id in ipairs(#shown > 0 and shown or hidden) do -- oldest first: each opens at the side, as before
      (#shown > 0 and layout.hide or layout.show)(registry.chats[id])
    end
    if #shown == 0 then
      local chat = registry.chats[registry.current]
      registry.current = valid(chat) and vim.tbl_contains(hidden, registry.current) and registry.current
        or hidden[#hidden]
      layout.show(registry.chats[registry.current])
    end
  end)
  toggling = false
  assert(ok, err)
  if #shown > 0 then
    toggled[api.nvim_get_current_tabpage()] = shown
  end
  return true
end

--- Put text that was not handed over back in the input (after what is there;
--- `rank`: a queued prompt's, see prompt_history.give_back).
local function give_back(chat, text, rank)
  prompt_history.give_back(chat, vim.split(text, "\n", { plain = true }), rank)
end

--- Start again, in place, a chat whose Python side failed before its session
--- began: the transcript only held the failure, the input keeps what was typed.
---@param chat acp.Chat
function M.retry(chat)
  chat.host_failed = nil
  chat.blocks = render.reset(chat.transcript)
  chat.status = { state = "starting", agent = chat.status.agent }
  queue.draw(chat)
  winbar.update(chat)
  start(chat)
end

--- Send `text`; `context` items (acp.chat.context) are attached, and the `@` mentions
--- in `text` add theirs. `opts.rewind`: first go back to before that turn (an edited
--- earlier prompt); `opts.now`: into the running turn, or ahead of the queue.
---@param chat acp.Chat
---@param text string
---@param context? table[]
---@param opts? {rewind?: integer, now?: boolean}
function M.send(chat, text, context, opts)
  opts = opts or {}
  local mentioned = mentions.items(chat, text)
  for _, item in ipairs(mentioned) do
    item.mentioned = true -- an edit of the prompt resolves these again (not `context`'s)
  end
  context = vim.list_extend(vim.deepcopy(context or {}), mentioned)
  -- Sent while the chat starts: should the start fail, it comes back to the input,
  -- whether it reached Python before the failure or after it (withdraw).
  local starting = chat.status.state == "starting" or nil
  chat.sent_starting = chat.sent_starting or starting
  local params =
    { chat = chat.id, text = text, context = context, rewind = opts.rewind, now = opts.now, starting = starting }
  -- The prompt leaves first: the history's file is written after it (acp.history).
  if chat.host_failed or not host.notify("send", params) then
    give_back(chat, text)
    if chat.host_failed then
      util.notify(host.failure and host.failure.message or "the Python side is not running")
    end
  else
    sent.add(chat, text)
  end
  prompt_history.add(chat, text)
end

---@param chat acp.Chat
function M.restart(chat)
  host.notify("restart", { chat = chat.id })
end

--- Put the prompt of `turn` (default: the last) back in the input (|:AcpEdit|): the
--- Python side sends it as an "edit" op; sent again, it rewinds to that turn first.
---@param chat acp.Chat
---@param turn? integer
function M.edit(chat, turn)
  host.notify("edit", { chat = chat.id, turn = turn })
end

---@param chat acp.Chat
function M.cancel(chat)
  host.notify("cancel", { chat = chat.id })
end

--- Close `chat` at once; `keep`: the user's word on its worktree (nil: none asked);
--- `wiped`: its buffer Neovim is wiping out (deleting it again would fail with E937
--- and stop the wipe); `looked`: the execute bits in its worktree were looked at as
--- it asked (acp.chat.workspace.confirm_close).
---@param chat acp.Chat
---@param keep? boolean
---@param wiped? integer
---@param looked? boolean
function close_now(chat, keep, wiped, looked)
  if not registry.chats[chat.id] then
    return
  end
  registry.chats[chat.id] = nil
  if registry.current == chat.id then
    -- :AcpChat shows the newest chat left (hidden or not) rather than a new one.
    local left = M.list()
    registry.current = #left > 0 and left[#left].id or nil
  end
  if host.running() then
    host.notify("close", { chat = chat.id, keep_worktree = keep, modes_looked = looked })
  end
  keep_unsent(chat) -- a close never costs what was typed
  require("acp.editor.terminal").close_chat(chat.id)
  -- No buffer may go in the command-line window (E11): they go once it closes.
  util.outside_cmdwin(function()
    for _, buf in ipairs({ chat.input, chat.transcript }) do
      if buf ~= wiped and api.nvim_buf_is_valid(buf) then
        pcall(api.nvim_buf_delete, buf, { force = true })
      end
    end
  end)
end

--- Close `chat`. `ask`: while work waits in its worktree, ask first whether to
--- remove the worktree (else it stays while it holds work: acp.chat.workspace).
---@param chat acp.Chat
---@param ask? boolean
function M.close(chat, ask)
  if not registry.chats[chat.id] then
    return
  end
  if ask then
    return workspace.confirm_close(chat, function(keep, looked)
      close_now(chat, keep, nil, looked)
    end)
  end
  close_now(chat)
end

api.nvim_create_autocmd("VimResized", {
  group = api.nvim_create_augroup("acp.layout", { clear = true }),
  callback = function()
    layout.resize(registry.chats)
  end,
})

-- Neovim scrolls a window to the cursor render.done set only in the tab page shown:
-- a chat that answered in another one showed the top of its reply there, the end
-- (and the cursor) far below, until you went into its window.
api.nvim_create_autocmd("TabEnter", {
  group = api.nvim_create_augroup("acp.follow", { clear = true }),
  callback = function()
    local shown = {}
    for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
      shown[api.nvim_win_get_buf(win)] = true
    end
    for _, chat in pairs(registry.chats) do
      if shown[chat.transcript] then
        render.keep_end(chat.transcript)
      end
    end
  end,
})

---@class acp.RenderBatch what the ops of one render item did to their chat
---@field chat acp.Chat
---@field status table the status fields they set
---@field created acp.Block[] the blocks they created
---@field tools table[] their tool call block ops (prompts and locations)
---@field summaries? boolean they drew a change summary or took turns out of or into view
---@field refused? string why what the chat was opened for cannot be (RefusedOp)
---@field at integer how many of its ops were drawn (or raised)

--- Every render op Python sends, by its `op`: the kinds of RenderOp in
--- acp_nvim/client/editor.py, which documents each (tests/nvim/test_contract.py
--- holds the two lists together). Called in order between render.begin and
--- render.done; M.render finishes what they leave in the batch.
---@type table<string, fun(batch: acp.RenderBatch, op: table)>
M.ops = {
  block = function(batch, op)
    local chat = batch.chat
    if render.block(chat.transcript, chat.blocks, op) then
      table.insert(batch.created, chat.blocks.by_id[op.id])
      if op.kind == "user" then
        sent.drawn(chat, op.id)
      end
    end
    if op.kind == "tool" then
      table.insert(batch.tools, op)
    elseif op.kind == "changes" then
      batch.summaries = true
    end
  end,
  append = function(batch, op)
    render.append(batch.chat.transcript, batch.chat.blocks, op)
  end,
  status = function(batch, op)
    for key, value in pairs(op) do
      if key ~= "op" then
        batch.status[key] = value
      end
    end
  end,
  turn = function(batch, op)
    -- A turn began: the turns and branches the status holds are kept in step in
    -- place, not sent whole again at each turn of a long chat (decision 0110).
    local status = batch.status
    local turns = status.turns or batch.chat.status.turns or {}
    for number = #turns, op.number, -1 do
      turns[number] = nil
    end
    turns[op.number] = op.prompt
    local branches = status.branches or batch.chat.status.branches or {}
    branches[1] = op.branch -- the shown branch comes first
    status.turns, status.branches = turns, branches
  end,
  more_commands = function(batch, op)
    -- A long list of commands comes in slices: each follows the ones before it.
    local commands = batch.status.commands or batch.chat.status.commands or {}
    vim.list_extend(commands, op.commands)
    batch.status.commands = commands
  end,
  input = function(batch, op)
    give_back(batch.chat, op.text, op.queued)
  end,
  elicit = function(batch, op)
    elicit.add(batch.chat, op)
  end,
  elicit_gone = function(batch, op)
    elicit.gone(batch.chat, op.id)
  end,
  cut = function(batch, op)
    editing.changed(batch.chat, op.since)
    render.cut(batch.chat.transcript, batch.chat.blocks, op.turns)
    batch.summaries = true
  end,
  drop = function(batch, op)
    render.drop(batch.chat.transcript, batch.chat.blocks, op.blocks)
    batch.summaries = true
  end,
  uncut = function(batch, op)
    vim.list_extend(batch.created, render.uncut(batch.chat.transcript, batch.chat.blocks, op.turns))
    batch.summaries = true
  end,
  edit = function(batch, op)
    local chat = batch.chat
    prompt_history.recall(chat, op.text)
    editing.start(chat, op.turn)
    layout.show(chat)
  end,
  refused = function(batch, op)
    batch.refused = op.error
  end,
}

--- What `chat` was opened for cannot be (`why`): a session the agent does not
--- know, a directory or worktree that cannot be made. A typo in :AcpResume, or
--- :AcpWorktree outside git, costs no chat to close: it closes and gives its
--- windows back to the chat it took them from; text in its input, or a prompt sent
--- to it while it started (on its way back), keeps it open, failed.
---@return boolean closed
local function withdraw(chat, why)
  if registry.typed(chat) or chat.sent_starting then
    return false
  end
  local before = chat.opened.took_over and registry.chats[chat.opened.took_over]
  if valid(before) then
    layout.take_over(chat, before)
    registry.current = before.id
  end
  close_now(chat)
  util.notify(why, "error")
  return true
end

--- Draw `ops` after the `batch.at`-th, counting them in `batch.at`.
---@param batch acp.RenderBatch
---@param ops table[]
---@param handlers table<string, fun(batch: acp.RenderBatch, op: table)>
local function draw_from(batch, ops, handlers)
  while batch.at < #ops do
    batch.at = batch.at + 1
    local op = ops[batch.at]
    local handle = handlers[op.op]
    if handle then
      handle(batch, op)
    end
  end
end

--- A render item from Python (acp_nvim/nvim/batcher.py RenderItem): the ops for
--- chat `item.chat`, in order.
---@param item {chat: integer, ops: table[]}
function M.render(item)
  local chat = registry.chats[item.chat]
  if not valid(chat) then
    return
  end
  kept.load(chat)
  local ops, handlers = item.ops, M.ops
  chat.active_at = os.time()
  flood(chat, rows_of(ops))
  sent.render(chat, ops)
  local batch = { chat = chat, status = {}, created = {}, tools = {}, at = 0 }
  local following = render.begin(chat.transcript)
  -- One protected call an item: an op that raises costs only itself (host.failed),
  -- the ops after it are drawn, and the transcript is read-only again.
  while true do
    local ok, err = xpcall(draw_from, debug.traceback, batch, ops, handlers)
    if ok then
      break
    end
    render.unmade(chat.blocks, ops[batch.at])
    host.failed(("the %s op"):format(ops[batch.at].op), err)
  end
  render.done(chat.transcript, following)
  if #batch.created > 0 then
    hint.clear(chat)
  end
  if batch.summaries then -- the newest change summary in view may be another
    chat_keys.hint_review(chat)
  end
  render.open_folds(chat.transcript, batch.created)
  if #batch.tools > 0 then
    permission.update(chat, batch.tools)
    tools.follow(chat, batch.tools)
  end
  local status = batch.status
  if next(status) then
    local before = chat.status.state or "starting"
    for key, value in pairs(status) do
      -- Python's None arrives as vim.NIL: the field is cleared.
      chat.status[key] = value ~= vim.NIL and value or nil
    end
    if status.history == vim.NIL and chat.opened then
      -- Deleted from the history: a stored chat given its number later is not this one.
      chat.opened.history = nil
    end
    if type(status.cwd) == "string" and chat.opened and chat.opened.history then
      -- A stored chat was opened in the directory it worked in, known once read.
      chat.cwd = status.cwd
    end
    winbar.update(chat)
    notice.after(chat, before, status)
    if type(status.stop_reason) == "string" then -- a turn ended: what it made is garbage now
      util.collect_garbage()
    end
  end
  if batch.refused and withdraw(chat, batch.refused) then
    return
  end
  if status.queue or chat.queue_mark then
    queue.draw(chat)
  end
end

--- Show in `chat` why the Python side is not running (one paragraph with the
--- fix): the chat is in error and AcpError fires. The next :AcpChat retries.
---@param chat acp.Chat
---@param message string
function M.fail(chat, message)
  chat.host_failed = true
  chat.failures = (chat.failures or 0) + 1
  local ops = permission.unanswered(chat, "not answered: the Python side exited")
  vim.list_extend(ops, {
    { op = "block", id = "host-error-" .. chat.failures, kind = "error", lines = { "**Error:** " .. message } },
    { op = "status", state = "error", error = message, connected = false, queued = 0, queue = {} },
  })
  -- The queue died with the Python side: what waited in it goes back to the input,
  -- and what was sent after it that it never showed.
  local unsent = vim.list_extend(vim.list_slice(chat.status.queue or {}), sent.take(chat))
  if #unsent > 0 then
    table.insert(ops, { op = "input", text = table.concat(unsent, "\n\n") })
  end
  -- The batch the Python side would send, through the one place that fires events.
  host.apply({
    { kind = "render", chat = chat.id, ops = ops },
    { kind = "event", name = "AcpError", data = { chat = chat.id, message = message } },
  })
  permission.forget_all(chat)
  elicit.forget(chat)
end

--- The Python side failed to start or died: every chat it served says so.
---@param message string
function M.host_failed(message)
  for _, chat in pairs(registry.chats) do
    if not chat.host_failed then
      M.fail(chat, message)
    end
  end
end

--- Whether a window shows a chat that shows why the Python side is not running.
function M.failure_shown()
  for _, chat in pairs(registry.chats) do
    if chat.host_failed and valid(chat) and #vim.fn.win_findbuf(chat.transcript) > 0 then
      return true
    end
  end
  return false
end

--- After :AcpInstall: start again the chats whose Python side never started.
function M.retry_failed()
  for _, chat in pairs(registry.chats) do
    if chat.host_failed and not chat.status.session_id and valid(chat) then
      M.retry(chat)
    end
  end
end

host.handle("render", M.render)
review.on_update(function(chat_id)
  local chat = registry.chats[chat_id]
  if valid(chat) then
    kept.load(chat)
    chat_keys.hint_review(chat)
  end
end)
host.on_failure(M.host_failed, M.failure_shown)

return M
