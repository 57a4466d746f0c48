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

--- Remember `text` as sent from `chat`, in the chat now and on disk in a later
--- turn of the event loop (reading, merging and writing the file takes 0.2-0.7 ms:
--- not in the same turn as sending the prompt and drawing it). Another Neovim's
--- prompts are kept: the file is read again before it is written.
---@param chat acp.Chat
---@param text string
function M.add(chat, text)
  local history = of(chat)
  history.index, history.draft = nil, nil
  if history.entries[#history.entries] ~= text then
    table.insert(history.entries, text)
  end
  local name = key(chat)
  vim.schedule(function()
    local data = load()
    local stored = data[name] or {}
    if stored[#stored] ~= text then
      table.insert(stored, text)
    end
    data[name] = vim.list_slice(stored, math.max(1, #stored - LIMIT + 1))
    vim.fn.mkdir(vim.fs.dirname(file()), "p")
    -- All or nothing: a full disk must not cost the history.
    util.write_lines(file(), { vim.json.encode(data) })
  end)
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
