-- Prompt history of the chat input: what was sent, per agent and project, kept
-- in stdpath("state") across restarts. Each chat walks its own copy with <Up> on
-- the input's first line and <Down> on its last (decision 0022). What an input
-- holds unsent is kept there too when its chat closes or Neovim quits, and on disk
-- as it is typed (acp.chat.drafts) for a Neovim that a signal ends (decision 0086).
if jit then jit.off(true, true) end -- decision 0068
local drafts = require("acp.chat.drafts")
local editing = require("acp.chat.editing")
local keys = require("acp.keys")

local M = {}
local api = vim.api
local registry = require("acp.chat.registry")
local util = require("acp.util")

local LIMIT = 100 -- prompts kept per agent and project
-- A send's file write waits this long: the turn start (its prompt's way to the agent,
-- a few milliseconds) has Neovim's loop and the cores; prompts sent meanwhile go in
-- one write. Quitting writes what waits (M.flush).
local WRITE_AFTER_MS = 200

local function file()
  return vim.fs.joinpath(vim.fn.stdpath("state"), "acp", "history.json")
end

---@type {[1]: string, [2]: string}[] prompts sent and not yet written: key, text
local waiting = {}
---@type {[1]: string, [2]: string}[] the prompts the write under way takes to disk
local in_flight = {}
---@type fun()[] what is to run once the prompts waiting are on disk
local when_waiting_written = {}
---@type fun()[] what is to run once the write under way is done
local when_written = {}
local writing = false
local due = false -- a write is to start after WRITE_AFTER_MS

--- The prompts not on disk yet, as `read_merged` takes them: a chat opened in the
--- moment after a send (or a close, which keeps what its input held) has them too.
local function unwritten()
  return vim.json.encode(vim.list_extend(vim.list_extend({}, in_flight), waiting))
end

local function key(chat)
  return (chat.status.agent or "?") .. "\t" .. chat.cwd
end

--- What the history file holds of `name` (JSON of its prompts, oldest first) and,
--- with `sent` (JSON of key, text pairs) added, the file's new text ("" when nothing
--- was sent), after true; false and why when that failed; then `name` and `chat_id`
--- (what the caller gave, for the callback). It runs in one of libuv's threads (a
--- chat's first read, every write: a hundred prompts per agent and project make a
--- file whose decoding and encoding must not hold up a send on Neovim's loop), so it
--- has only its arguments, vim.uv and vim.json (a thread's function takes no
--- upvalues).
---@param path string
---@param sent string
---@param limit integer
---@param name string
---@param chat_id integer?
---@return boolean, string, string?, string, integer?
local function read_merged(path, sent, limit, name, chat_id)
  local uv, json = vim.uv, vim.json
  local ok, entries, text = pcall(function()
    local data
    local fd = uv.fs_open(path, "r", 0)
    if fd then
      local stat = uv.fs_fstat(fd)
      local content = stat and uv.fs_read(fd, stat.size, 0)
      uv.fs_close(fd)
      local decoded, value = pcall(json.decode, content or "")
      data = decoded and type(value) == "table" and value or nil
    end
    data = data or {}
    local prompts = json.decode(sent)
    for _, prompt in ipairs(prompts) do
      local key, text = prompt[1], prompt[2]
      local stored = data[key] or {}
      if stored[#stored] ~= text then
        table.insert(stored, text)
      end
      local kept = {}
      for i = math.max(1, #stored - limit + 1), #stored do
        kept[#kept + 1] = stored[i]
      end
      data[key] = kept
    end
    return json.encode(data[name] or {}), #prompts > 0 and json.encode(data) .. "\n" or ""
  end)
  if vim.is_thread() then
    -- A thread's Lua state collects only as it allocates, so each run left its
    -- garbage (the decoded file) in that thread's malloc arena: Neovim's RSS grew
    -- by ~10 KB a send. Its live data is gone by now; the collection is cheap.
    collectgarbage()
  end
  return ok, entries, text, name, chat_id
end

--- A chat's history as read ahead in a thread, unless something read it meanwhile.
local read = vim.uv.new_work(
  read_merged,
  vim.schedule_wrap(function(ok, entries, _, name, chat_id)
    local chat = registry.chats[chat_id]
    if ok and chat and not chat.history then
      chat.history = { entries = vim.json.decode(entries), read_as = name }
    end
  end)
)

--- Have the chat's history read in a thread before its first send or <Up> needs it.
---@param chat acp.Chat
function M.prefetch(chat)
  read:queue(file(), unwritten(), LIMIT, key(chat), chat.id)
end

--- The chat's history, oldest first (read from disk once per chat).
---@param chat acp.Chat
---@return {entries: string[], index?: integer, draft?: string[], read_as?: string}
local function of(chat)
  local history = chat.history
  -- Read ahead as the chat opened: a reopened chat learns its directory later.
  if history and history.read_as and history.read_as ~= key(chat) then
    history = nil
  end
  if not history then
    local ok, entries = read_merged(file(), unwritten(), LIMIT, key(chat))
    history = { entries = ok and vim.json.decode(entries) or {} }
  end
  history.read_as = nil
  chat.history = history
  return history
end

--- The prompts waiting, as `read_merged` takes them (and no longer waiting).
local function take()
  in_flight, waiting = waiting, {}
  when_written, when_waiting_written = when_waiting_written, {}
  vim.fn.mkdir(vim.fs.dirname(file()), "p")
  return vim.json.encode(in_flight)
end

-- One write at a time, each after reading the file again (another Neovim's prompts
-- are kept); all or nothing (a full disk must not cost the history); the reading,
-- merging and writing all off the loop.
local store

local merged = vim.uv.new_work(
  read_merged,
  vim.schedule_wrap(function(ok, result, text) -- result: why, when not ok
    local function written(err)
      local done = not err and when_written or {}
      writing, in_flight, when_written = false, {}, {}
      for _, run in ipairs(done) do
        run()
      end
      store()
    end
    if not ok then
      vim.notify("acp.nvim: the prompt history was not written: " .. result, vim.log.levels.WARN)
      return written(result)
    end
    util.write_later(file(), text, written)
  end)
)

--- Have the prompts waiting written WRITE_AFTER_MS from now, with what comes meanwhile.
local function store_later()
  if not due then
    due = true
    vim.defer_fn(function()
      due = false
      store()
    end, WRITE_AFTER_MS)
  end
end

function store()
  if writing or #waiting == 0 then
    return
  end
  writing = true
  merged:queue(file(), take(), LIMIT, "")
end

local given_ns = api.nvim_create_namespace("acp.given_back")

--- The row of the first queued prompt given back to `chat`'s input that ranked
--- after `rank` in the queue and is still there (its first line not deleted).
local function ranked_after(chat, rank)
  for _, mark in ipairs(api.nvim_buf_get_extmarks(chat.input, given_ns, 0, -1, { details = true })) do
    if not mark[4].invalid and chat.given_back[mark[1]] > rank then
      return mark[2]
    end
  end
end

--- Put `lines` back in the chat's input: in place of an empty one, else after what
--- is there, a paragraph of their own (nothing typed is written over). `rank`: the
--- queued prompt's they are (its place in the queue): they go before the queued
--- prompts given back earlier that came after it, so a cancel gives the queue back
--- in its order around those taken out to edit (\e takes the last one).
---@param chat acp.Chat
---@param lines string[]
---@param rank? integer
function M.give_back(chat, lines, rank)
  local buf = chat.input
  if not api.nvim_buf_is_valid(buf) then
    return
  end
  local current = api.nvim_buf_get_lines(buf, 0, -1, false)
  local row, before = 0, rank and ranked_after(chat, rank)
  if #current == 1 and current[1] == "" then
    api.nvim_buf_clear_namespace(buf, given_ns, 0, -1)
    chat.given_back = {}
    api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  elseif before then
    row = before
    api.nvim_buf_set_lines(buf, row, row, false, vim.list_extend(vim.list_slice(lines), { "" }))
  else
    local after = current[#current] == "" and lines or vim.list_extend({ "" }, lines)
    row = #current + #after - #lines
    api.nvim_buf_set_lines(buf, -1, -1, false, after)
  end
  if rank then
    chat.given_back = chat.given_back or {}
    chat.given_back[api.nvim_buf_set_extmark(buf, given_ns, row, 0, { invalidate = true })] = rank
  end
end

--- Add `text` to `chat`'s history: in the chat now, on disk once a thread has
--- merged it into the file (see `store`), WRITE_AFTER_MS later.
local function remember(chat, text)
  local history = of(chat)
  if history.entries[#history.entries] ~= text then
    table.insert(history.entries, text)
  end
  table.insert(waiting, { key(chat), text })
  store_later()
end

--- Remember `text` as sent from `chat`. Sent from the walk through the history
--- (<Up>, :AcpEdit), the text typed before the walk comes back to the input:
--- sending an earlier prompt never costs what you were writing.
---@param chat acp.Chat
---@param text string
function M.add(chat, text)
  local history = of(chat)
  local draft = history.index and history.draft
  history.index, history.draft = nil, nil
  if draft and (#draft > 1 or draft[1] ~= "") then
    M.give_back(chat, draft)
  end
  remember(chat, text)
end

--- What `chat`'s input holds that was never sent, oldest first: what was typed
--- before walking the prompt history (<Up>, :AcpEdit), then what the input shows,
--- unless that is the walk's prompt as it was. Nothing when the input is not
--- loaded (a signal ends Neovim: its buffers are gone before VimLeavePre).
---@param chat acp.Chat
---@return string[]
function M.unsent(chat)
  local texts = {}
  if not api.nvim_buf_is_loaded(chat.input) then
    return texts
  end
  local walk = chat.history and chat.history.index and chat.history
  local before = walk and table.concat(walk.draft, "\n")
  if before and before:find("%S") then
    table.insert(texts, before)
  end
  local typed = registry.typed(chat)
  if typed and not (walk and walk.entries[walk.index] == typed) then
    table.insert(texts, typed)
  end
  return texts
end

-- What the inputs hold is kept on disk this long after they change: a key costs a
-- flag's check, no more (the keeping reads each input once); a signal that ends
-- Neovim costs at most what was typed in the last moment.
local KEEP_AFTER_MS = 500
local keeping = vim.uv.new_timer()
local keep_due = false

local function keep_drafts()
  keep_due = false
  if vim.v.exiting ~= vim.NIL then
    return -- Neovim ends (its buffers maybe gone already): VimLeavePre settles the file
  end
  local ids = vim.tbl_keys(registry.chats)
  table.sort(ids)
  local kept = {}
  for _, id in ipairs(ids) do
    local chat = registry.chats[id]
    for _, text in ipairs(M.unsent(chat)) do
      table.insert(kept, { key(chat), text })
    end
  end
  drafts.keep(kept)
end

--- An input changed (or a chat closed): what the inputs hold is kept on disk
--- KEEP_AFTER_MS later, with what changes meanwhile.
function M.changed()
  if not keep_due then
    keep_due = true
    keeping:start(KEEP_AFTER_MS, 0, vim.schedule_wrap(keep_drafts))
  end
end

--- Keep what `chat`'s input holds as it is typed (acp.chat.drafts).
---@param chat acp.Chat
function M.watch(chat)
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "TextChangedP" }, {
    buffer = chat.input,
    callback = M.changed,
  })
end

--- Keep what `chat`'s input holds, not sent, in its history, where <Up> finds it
--- (the chat closes, a buffer command empties the input, Neovim quits): whether it
--- held anything. A walk through the history ends with it.
---@param chat acp.Chat
---@return boolean
function M.keep_unsent(chat)
  local texts = M.unsent(chat)
  if chat.history then
    chat.history.index, chat.history.draft = nil, nil
  end
  for _, text in ipairs(texts) do
    remember(chat, text)
  end
  M.changed()
  return #texts > 0
end

--- Have every prompt sent so far on disk before returning (Neovim is closing):
--- whether they are.
---@return boolean
function M.flush()
  vim.wait(5000, function()
    return not writing
  end)
  if #waiting == 0 then
    return not writing
  end
  local ok, _, text = read_merged(file(), take(), LIMIT, "")
  local done = when_written
  when_written = {}
  if not (ok and util.write_lines(file(), { text:sub(1, -2) }) == nil) then
    return false
  end
  for _, run in ipairs(done) do
    run()
  end
  return true
end

vim.api.nvim_create_autocmd("VimLeavePre", {
  group = vim.api.nvim_create_augroup("acp.prompt_history", { clear = true }),
  callback = function()
    -- A signal (SIGHUP, SIGTERM) unloaded every buffer before this: what the inputs
    -- held is in this Neovim's drafts file then, which stays for the next Neovim.
    local dying = vim.v.dying > 0
    if not dying then
      for _, chat in pairs(registry.chats) do
        M.keep_unsent(chat)
      end
    end
    keeping:stop()
    drafts.finish(not M.flush() or dying)
  end,
})

-- What the inputs of a Neovim that is gone held (a signal ended it): taken into the
-- history file, off the loop as a send's prompt is, before any chat reads it; the
-- drafts files go once it is on disk.
do
  local left, paths = drafts.left_behind()
  vim.list_extend(waiting, left)
  if #paths > 0 then
    table.insert(when_waiting_written, function()
      drafts.forget(paths)
    end)
  end
  if #left > 0 then
    local said = "%s from a Neovim that ended %s in the prompt history (<Up> in the input)"
    util.notify(said:format(util.count(#left, "unsent prompt"), #left == 1 and "is" or "are"), "info")
  end
  store()
end

--- Show the previous (`step` -1) or next (+1) prompt in the input; past the newest
--- the text typed before walking comes back. False when there is nothing there.
---@param chat acp.Chat
---@param step -1|1
---@return boolean
function M.step(chat, step)
  local history = of(chat)
  local count = #history.entries
  local index = (history.index or count + 1) + step
  if index < 1 or index > count + 1 or (step > 0 and not history.index) then
    return false
  end
  if not history.index then
    history.draft = api.nvim_buf_get_lines(chat.input, 0, -1, false)
  end
  local lines = index > count and history.draft
    or vim.split(history.entries[index], "\n", { plain = true })
  history.index = index <= count and index or nil
  editing.stop(chat) -- walked off the prompt being edited: what is sent is a prompt again
  api.nvim_buf_set_lines(chat.input, 0, -1, false, lines)
  local win = api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) == chat.input then
    -- Up lands on the first line, down on the last, so the next press walks on.
    local row = step < 0 and 1 or #lines
    api.nvim_win_set_cursor(win, { row, step < 0 and 0 or #lines[row] })
  end
  return true
end

--- Put `text`, a prompt sent before (:AcpEdit), in the input as <Up> would have: what
--- was typed is set aside, for <Down> past the newest prompt to bring back, and
--- comes back by itself once the prompt is sent (M.add).
---@param chat acp.Chat
---@param text string
function M.recall(chat, text)
  local history = of(chat)
  if not history.index then
    history.draft = api.nvim_buf_get_lines(chat.input, 0, -1, false)
  end
  local index
  for i = #history.entries, 1, -1 do
    if history.entries[i] == text then
      index = i
      break
    end
  end
  if not index then -- a stored chat's prompt, sent from elsewhere
    table.insert(history.entries, text)
    index = #history.entries
  end
  history.index = index
  api.nvim_buf_set_lines(chat.input, 0, -1, false, vim.split(text, "\n", { plain = true }))
end

--- Map keys.input.prev_prompt/next_prompt (<Up>/<Down>) in the input: on its
--- first/last line they walk the history, else (and over the completion menu) they
--- do what they always do.
---@param chat acp.Chat
function M.map(chat)
  for name, step in pairs({ prev_prompt = -1, next_prompt = 1 }) do
    local lhs = keys.lhs("input", name)
    keys.map(chat.input, { "n", "i" }, "input", name, function()
      local row = api.nvim_win_get_cursor(0)[1]
      local edge = step < 0 and 1 or api.nvim_buf_line_count(chat.input)
      local menu = api.nvim_get_mode().mode == "i" and vim.fn.pumvisible() == 1
      if menu or row ~= edge or not M.step(chat, step) then
        api.nvim_feedkeys(vim.keycode(lhs), "n", false)
      end
    end, step < 0 and "previous prompt" or "next prompt")
  end
end

return M
