-- Context for a prompt: `@` mentions in the input become items the Python side
-- reads (a buffer's unsaved text included) and sends the way the agent accepts.
--   @path          a file (an image when it is png/jpeg/gif/webp)
--   @path:10-20    lines 10 to 20 of a file (@path:10 one line)
--   @dir/          a directory's files
--   @selection     the last visual selection in the window you came from (exactly
--                  its characters or block)
--   @diagnostics   the diagnostics of that window's buffer
--   @buffers       every file buffer; @quickfix the quickfix list; @diff the git
--                  diff of the work tree (unsaved buffers included); @https://...
-- :AcpAdd {file} and :'<,'>AcpAdd put such a mention into the input. A relative
-- path is the chat's directory's (acp.chat.workspace), not Neovim's; a space in
-- it is written `\ `.
if jit then jit.off(true, true) end -- decision 0068
local registry = require("acp.chat.registry")
local util = require("acp.util")
local workspace = require("acp.chat.workspace")

local M = {}

local api = vim.api

local IMAGE = { png = true, jpg = true, jpeg = true, gif = true, webp = true }

--- The window the user worked in before the chat: the previous window when it
--- shows no chat buffer, else the first window that shows a file.
local function work_window(chat)
  local function is_chat(win)
    local buf = api.nvim_win_get_buf(win)
    return buf == chat.transcript or buf == chat.input or vim.bo[buf].buftype ~= ""
  end
  local previous = vim.fn.win_getid(vim.fn.winnr("#"))
  if previous ~= 0 and not is_chat(previous) then
    return previous
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if not is_chat(win) then
      return win
    end
  end
end

local function lines_of(path, first, last)
  local buf = vim.fn.bufnr(path)
  if buf ~= -1 and api.nvim_buf_is_loaded(buf) then
    return api.nvim_buf_get_lines(buf, first - 1, last, false)
  end
  local ok, all = pcall(vim.fn.readfile, path, "", last)
  return ok and vim.list_slice(all, first, last) or {}
end

---@param text? string what is selected (default: the lines, whole)
local function selection_item(buf, first, last, text)
  local path = api.nvim_buf_get_name(buf)
  return {
    type = "selection",
    path = path,
    range = { first, last },
    text = text or table.concat(api.nvim_buf_get_lines(buf, first - 1, last, false), "\n"),
  }
end

--- The last visual selection of `buf` as it was selected: characters, lines or a
--- block ('<,'> and the last visual mode).
local function last_selection(buf)
  local from, to = api.nvim_buf_get_mark(buf, "<"), api.nvim_buf_get_mark(buf, ">")
  if from[1] == 0 then
    return nil
  end
  local mode = api.nvim_buf_call(buf, vim.fn.visualmode) -- the buffer's own last mode
  if mode == "" then
    mode = "v"
  end
  local ok, lines = pcall(vim.fn.getregion, { buf, from[1], from[2] + 1, 0 }, { buf, to[1], to[2] + 1, 0 }, { type = mode })
  local text = ok and table.concat(lines, "\n") or nil
  return selection_item(buf, from[1], to[1], mode ~= "V" and text or nil)
end

--- @buffers: every listed file buffer, a file each.
local function buffer_items()
  local items = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if vim.bo[buf].buflisted and vim.bo[buf].buftype == "" and name ~= "" and api.nvim_buf_is_loaded(buf) then
      table.insert(items, { type = "file", path = name })
    end
  end
  return items
end

--- @quickfix: the entries of the quickfix list.
local function quickfix_item()
  local entries = {}
  for _, e in ipairs(vim.fn.getqflist()) do
    table.insert(entries, {
      path = e.bufnr > 0 and api.nvim_buf_get_name(e.bufnr) or "",
      lnum = e.lnum,
      col = e.col,
      text = vim.trim(e.text),
      type = e.type ~= "" and e.type or nil,
    })
  end
  return { type = "quickfix", items = entries }
end

--- @diff: the Python side runs git; the text of modified buffers goes along.
local function diff_item()
  local buffers = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if api.nvim_buf_is_loaded(buf) and vim.bo[buf].modified and vim.bo[buf].buftype == "" and name ~= "" then
      local text = table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
      table.insert(buffers, { path = name, text = vim.bo[buf].eol and text .. "\n" or text })
    end
  end
  return { type = "diff", buffers = buffers }
end

-- Mentions that are words, not paths.
local WORDS = { buffers = buffer_items, quickfix = quickfix_item, diff = diff_item }

local function diagnostics_item(buf)
  local items = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(items, { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message, source = d.source })
  end
  return { type = "diagnostics", path = api.nvim_buf_get_name(buf), items = items }
end

--- One mention (without its @) as an item (or a list of them: @buffers), or nil
--- with the reason.
---@return table?, string?
local function item(chat, mention)
  if WORDS[mention] then
    return WORDS[mention]()
  elseif mention:match("^https?://") then
    return { type = "url", url = mention }
  elseif mention == "selection" or mention == "diagnostics" then
    local win = work_window(chat)
    if not win then
      return nil, "no window to take the " .. mention .. " from"
    end
    local buf = api.nvim_win_get_buf(win)
    if mention == "diagnostics" then
      return diagnostics_item(buf)
    end
    local selection = last_selection(buf)
    if not selection then
      return nil, "no visual selection in " .. workspace.mention(chat, api.nvim_buf_get_name(buf))
    end
    return selection
  end
  local path, first, last = mention:match("^(.-):(%d+)%-(%d+)$")
  if not path then
    path, first = mention:match("^(.-):(%d+)$")
    last = first
  end
  path = path or mention
  local full = workspace.absolute(chat, path)
  if not first and vim.fn.isdirectory(full) == 1 then
    return { type = "directory", path = full }
  end
  if vim.fn.filereadable(full) == 0 and vim.fn.bufnr(full) == -1 then
    return nil -- not a file: an @ that is only text
  end
  if first then
    first, last = tonumber(first), tonumber(last)
    return { type = "selection", path = full, range = { first, last }, text = table.concat(lines_of(full, first, last), "\n") }
  end
  local ext = full:match("%.(%w+)$")
  return { type = (ext and IMAGE[ext:lower()]) and "image" or "file", path = full }
end

--- `path` as a mention writes it (after its `@`): a space in it as `\ `, which
--- does not end the mention.
---@param path string
---@return string
function M.escape(path)
  return (path:gsub(" ", "\\ "))
end

--- The context items of the `@` mentions in `text`; a mention that names nothing
--- is left as text, one that cannot be read is reported.
---@return table[]
function M.items(chat, text)
  local items, seen = {}, {}
  -- A mention starts the text or follows a space (the frontier %f[%S] never
  -- matches at the first character: a leading mention was plain text). An
  -- escaped space (M.escape) is a NUL while it is matched.
  for mention in (" " .. text):gsub("\\ ", "\0"):gmatch("%s@([^%s]+)") do
    mention = mention:gsub("[,.;:!?)]+$", ""):gsub("%z", " ")
    if not seen[mention] then
      seen[mention] = true
      local found, why = item(chat, mention)
      if found then
        vim.list_extend(items, vim.islist(found) and found or { found })
      elseif why then
        util.notify(("@%s: %s"):format(mention, why), "warn")
      end
    end
  end
  return items
end

--- An item of |acp.send()|'s `context` as the Python side takes it: buffers by
--- number become paths (their unsaved text is what is read), selections and
--- diagnostics carry what the editor holds.
---@param item table
---@return table
function M.normalize(item)
  local buf = item.bufnr and (item.bufnr == 0 and api.nvim_get_current_buf() or item.bufnr)
  if item.type == "buffer" then
    return { type = "file", path = api.nvim_buf_get_name(buf) }
  elseif item.type == "selection" and buf then
    return selection_item(buf, item.range[1], item.range[2])
  elseif item.type == "diagnostics" and buf then
    return diagnostics_item(buf)
  end
  return item
end

--- Put `text` at the end of the chat's input (a space apart from what is there,
--- one: a mention ends with the space typing goes on after).
---@param chat acp.Chat
---@param text string
function M.insert(chat, text)
  local lines = api.nvim_buf_get_lines(chat.input, 0, -1, false)
  local last = lines[#lines]
  lines[#lines] = (last == "" or last:match("%s$")) and (last .. text) or (last .. " " .. text)
  api.nvim_buf_set_lines(chat.input, 0, -1, false, lines)
end

--- :AcpAdd [file] (a range: those lines of the current buffer): mention it in the
--- input of the current chat.
---@param opts {file?: string, range?: integer[]}
function M.add(opts)
  local chat = registry.get()
  if not chat then
    util.user_error("no chat is open (:AcpChat)")
  end
  local mention
  if opts.file and opts.file ~= "" then
    local path = vim.fn.fnamemodify(opts.file, ":p")
    if not vim.uv.fs_stat(path) and vim.fn.bufloaded(path) == 0 then
      util.user_error(("no file or buffer %s to mention"):format(opts.file))
    end
    mention = "@" .. M.escape(workspace.mention(chat, path))
  else
    local name = api.nvim_buf_get_name(0)
    if name == "" or api.nvim_get_current_buf() == chat.input then
      util.user_error(":AcpAdd needs a file, or a range of a file's buffer")
    end
    mention = "@" .. M.escape(workspace.mention(chat, name))
    if opts.range then
      local first, last = opts.range[1], opts.range[2]
      mention = mention .. (first == last and (":" .. first) or (":%d-%d"):format(first, last))
    end
  end
  M.insert(chat, mention .. " ")
end

return M
