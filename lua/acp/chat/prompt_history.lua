-- Prompt history of the chat input: what was sent, per agent and project, kept
-- in stdpath("state") across restarts. Each chat walks its own copy with <Up> on
-- the input's first line and <Down> on its last (decision 0022).
local keys = require("acp.keys")

local M = {}
local api = vim.api
local util = require("acp.util")

local LIMIT = 100 -- prompts kept per agent and project

local function file()
  return vim.fs.joinpath(vim.fn.stdpath("state"), "acp", "history.json")
end

local function key(chat)
  return (chat.status.agent or "?") .. "\t" .. chat.cwd
end

local function load()
  local ok, data = pcall(function()
    return vim.json.decode(table.concat(vim.fn.readfile(file()), "\n"))
  end)
  return ok and type(data) == "table" and data or {}
end

--- The chat's history, oldest first (read from disk once per chat).
---@param chat acp.Chat
---@return {entries: string[], index?: integer, draft?: string[]}
local function of(chat)
  if not chat.history then
    chat.history = { entries = vim.deepcopy(load()[key(chat)] or {}) }
  end
  return chat.history
end

---@type {[1]: string, [2]: string}[] prompts sent and not yet written: key, text
local waiting = {}
local writing = false

--- The file's prompts with those waiting added (and taken).
local function merged()
  local data = load()
  for _, prompt in ipairs(waiting) do
    local name, text = prompt[1], prompt[2]
    local stored = data[name] or {}
    if stored[#stored] ~= text then
      table.insert(stored, text)
    end
    data[name] = vim.list_slice(stored, math.max(1, #stored - LIMIT + 1))
  end
  waiting = {}
  vim.fn.mkdir(vim.fs.dirname(file()), "p")
  return { vim.json.encode(data) }
end

-- One write at a time, each after reading the file again (another Neovim's prompts
-- are kept); all or nothing (a full disk must not cost the history), its sync off
-- the loop (a turn start must not wait for the disk).
local function store()
  if writing or #waiting == 0 then
    return
  end
  writing = true
  util.write_lines_later(file(), merged(), function()
    writing = false
    store()
  end)
end

--- Remember `text` as sent from `chat`, in the chat now and on disk in a later
--- turn of the event loop: reading and merging the file is not done in the same
--- turn as sending the prompt and drawing it, and writing it not on the loop.
---@param chat acp.Chat
---@param text string
function M.add(chat, text)
  local history = of(chat)
  history.index, history.draft = nil, nil
  if history.entries[#history.entries] ~= text then
    table.insert(history.entries, text)
  end
  table.insert(waiting, { key(chat), text })
  vim.schedule(store)
end

--- Have every prompt sent so far on disk before returning (Neovim is closing).
function M.flush()
  vim.wait(5000, function()
    return not writing
  end)
  if #waiting > 0 then
    util.write_lines(file(), merged())
  end
end

vim.api.nvim_create_autocmd("VimLeavePre", {
  group = vim.api.nvim_create_augroup("acp.prompt_history", { clear = true }),
  callback = M.flush,
})

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
  api.nvim_buf_set_lines(chat.input, 0, -1, false, lines)
  local win = api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) == chat.input then
    -- Up lands on the first line, down on the last, so the next press walks on.
    local row = step < 0 and 1 or #lines
    api.nvim_win_set_cursor(win, { row, step < 0 and 0 or #lines[row] })
  end
  return true
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
