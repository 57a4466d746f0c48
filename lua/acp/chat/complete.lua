-- Completion in the chat input: `/` at the start of the input offers the agent's
-- slash commands, `@` offers context (files of the session's directory, open
-- buffers, @selection, @diagnostics: acp.chat.context). Built in through 'omnifunc'
-- and opened as you type; lua/acp/completion/{blink,cmp}.lua serve the same items
-- to blink.cmp and nvim-cmp. After a command, its input hint shows as virtual text.
local registry = require("acp.chat.registry")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("acp.hint")

-- Files listed at most, and how long a listing is reused.
local MAX_FILES = 5000
local TTL_MS = 10000
local cache = { cwd = nil, at = 0, files = {} }

local function run(cmd)
  local ok, result = pcall(function()
    return vim.system(cmd, { text = true }):wait(2000)
  end)
  if ok and result.code == 0 and result.stdout then
    return vim.split(result.stdout, "\n", { trimempty = true })
  end
end

--- Files under the working directory: git's list, else rg's, else a bounded walk.
local function project_files()
  local cwd = vim.fn.getcwd()
  local now = vim.uv.now()
  if cache.cwd == cwd and now - cache.at < TTL_MS then
    return cache.files
  end
  local files = run({ "git", "ls-files", "--cached", "--others", "--exclude-standard" })
  if not files and vim.fn.executable("rg") == 1 then
    files = run({ "rg", "--files" })
  end
  if not files then
    files = {}
    for name, kind in vim.fs.dir(cwd, { depth = 6 }) do
      if kind == "file" and not name:match("^%.git/") then
        table.insert(files, name)
        if #files >= MAX_FILES then
          break
        end
      end
    end
  end
  cache = { cwd = cwd, at = now, files = vim.list_slice(files, 1, MAX_FILES) }
  return cache.files
end

--- The completion items for `prefix` (`/...` or `@...`) in `chat`, as
--- |complete-items|: word, abbr, menu, info.
---@return table[]
function M.items(chat, prefix)
  local items = {}
  local function add(word, menu, info)
    if vim.startswith(word, prefix) then
      table.insert(items, { word = word, menu = menu, info = info or "", icase = 1 })
    end
  end
  if prefix:sub(1, 1) == "/" then
    for _, command in ipairs(chat.status.commands or {}) do
      local hint = command.hint ~= vim.NIL and command.hint or nil
      add("/" .. command.name, command.description, hint and ("input: " .. hint))
    end
    return items
  end
  add("@selection", "the last visual selection")
  add("@diagnostics", "diagnostics of your buffer")
  local seen = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if vim.bo[buf].buflisted and vim.bo[buf].buftype == "" and name ~= "" then
      local rel = vim.fn.fnamemodify(name, ":.")
      seen[rel] = true
      add("@" .. rel, vim.bo[buf].modified and "buffer [+]" or "buffer")
    end
  end
  for _, file in ipairs(project_files()) do
    if not seen[file] then
      add("@" .. file, "file")
    end
  end
  return items
end

--- The token being completed before the cursor: its start column (0-based) and
--- text, or nil. `/` counts only at the start of the input.
local function token()
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local before = api.nvim_get_current_line():sub(1, col)
  local start, word = before:match("()([@/][^%s]*)$")
  if not start then
    return nil
  end
  local at_start = row == 1 and start == 1
  local after_space = start == 1 or before:sub(start - 1, start - 1):match("%s")
  if (word:sub(1, 1) == "/" and not at_start) or not after_space then
    return nil
  end
  return start - 1, word
end

--- 'omnifunc' of the input buffer.
function M.omnifunc(findstart, base)
  local chat = registry.of_buffer(api.nvim_get_current_buf())
  if findstart == 1 then
    local start = chat and token()
    return start or -3
  end
  return chat and M.items(chat, base) or {}
end

--- Show the hint of the slash command the input starts with, after it.
local function show_hint(chat)
  api.nvim_buf_clear_namespace(chat.input, ns, 0, -1)
  local line = api.nvim_buf_get_lines(chat.input, 0, 1, false)[1] or ""
  local name, rest = line:match("^/(%S+)(%s*)$")
  if not name then
    return
  end
  for _, command in ipairs(chat.status.commands or {}) do
    if command.name == name and command.hint and command.hint ~= vim.NIL then
      local text = (rest == "" and " " or "") .. command.hint
      api.nvim_buf_set_extmark(chat.input, ns, 0, #line, { virt_text = { { text, "Comment" } } })
    end
  end
end

--- Completion for the input buffer of `chat`: omnifunc, opened on `/` and `@`.
function M.attach(chat)
  vim.bo[chat.input].omnifunc = "v:lua.require'acp.chat.complete'.omnifunc"
  api.nvim_create_autocmd({ "TextChangedI", "TextChangedP" }, {
    buffer = chat.input,
    callback = function()
      show_hint(chat)
      local start, word = token()
      if start and #word == 1 and vim.fn.pumvisible() == 0 then
        vim.fn.complete(start + 1, M.items(chat, word))
      end
    end,
  })
  api.nvim_create_autocmd("TextChanged", { buffer = chat.input, callback = function()
    show_hint(chat)
  end })
end

return M
