-- Completion in the chat input: `/` at the start of the input offers the agent's
-- slash commands, `@` offers context (files of the chat's directory and its
-- workspace roots, open buffers, @selection, @diagnostics, @buffers, @quickfix,
-- @diff: acp.chat.context). Built in through 'omnifunc' and opened as you type;
-- lua/acp/completion/{blink,cmp}.lua serve the same items to blink.cmp and
-- nvim-cmp. After a command, its input hint shows as virtual text.
if jit then jit.off(true, true) end -- decision 0068
local escape = require("acp.chat.context").escape
local registry = require("acp.chat.registry")
local workspace = require("acp.chat.workspace")

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace("acp.hint")

-- The files of the chat's directory and roots are listed in the background (git,
-- else rg, else find), never on Neovim's loop: a 50k-file tree took 300 ms there. A
-- listing is reused for a while; one keeps at most MAX_FILES paths (a home directory
-- stops there), and a completion shows at most MAX_ITEMS of those its prefix
-- matches: typing more of the path narrows the list again, so every file is found.
local MAX_FILES = 200000
local MAX_ITEMS = 500
local TTL_MS = 10000
-- After what the prefix matches, the paths its letters match in order (`@main`:
-- src/main.py), best first (|matchfuzzy()|), among a directory's first FUZZY_FILES
-- files: 200k paths took ~100 ms of the loop a key.
local FUZZY_FILES = 20000
---@type table<string, {at: integer, files: string[]}> by directory
local cache = {}
---@type table<string, true> directories being listed
local listing = {}
-- By input buffer: where the token being typed at the last change began ("row:col").
local token_at = {}
-- By input buffer: the token whose menu you closed (<C-e>) or chose from (<C-y>).
local closed = {}
-- By input buffer: the 'changedtick' last asked about (a menu opened on TextChangedI
-- is followed by a TextChangedP for the same change).
local asked = {}

--- Open the menu at `start` (0-based) with the items for `word`.
local function open_menu(chat, start, word)
  vim.fn.complete(start + 1, (M.items(chat, word)))
end

local LISTERS = {
  { "git", "ls-files", "--cached", "--others", "--exclude-standard" },
  { "rg", "--files" },
  { "find", ".", "-type", "f", "-not", "-path", "*/.git/*" },
}

--- List the files under `dir` with the first lister that works, then `done(files)`
--- on the main loop (an empty list when none does).
local function list(dir, done, from)
  from = from or 1
  local cmd = LISTERS[from]
  if not cmd then
    vim.schedule(function()
      done({})
    end)
    return
  end
  local ok = pcall(vim.system, cmd, { cwd = dir, text = true }, function(result)
    if result.code ~= 0 or not result.stdout then
      list(dir, done, from + 1)
      return
    end
    local files, count = {}, 0
    for line in result.stdout:gmatch("[^\n]+") do
      count = count + 1
      files[count] = line:gsub("^%./", "")
      if count >= MAX_FILES then
        break
      end
    end
    vim.schedule(function()
      done(files)
    end)
  end)
  if not ok then -- not installed
    list(dir, done, from + 1)
  end
end

--- What the chat's input is completing now: the chat and the `@` token, or nil.
local function completing()
  local chat = registry.of_buffer(api.nvim_get_current_buf())
  if chat and api.nvim_get_mode().mode:sub(1, 1) == "i" then
    local start, word = M.token()
    if start and word:sub(1, 1) == "@" and closed[chat.input] ~= token_at[chat.input] then
      return chat, start, word
    end
  end
end

--- The files under directory `dir`, relative to it, as last listed; a listing that
--- is old (or none) starts a new one, and the menu is refreshed when it arrives.
local function files_of(dir)
  local cached = cache[dir]
  if not (cached and vim.uv.now() - cached.at < TTL_MS) and not listing[dir] then
    listing[dir] = true
    list(dir, function(files)
      listing[dir] = nil
      cache[dir] = { at = vim.uv.now(), files = files }
      local chat, start, word = completing()
      if chat then
        open_menu(chat, start, word)
      end
    end)
  end
  return cached and cached.files or {}
end

--- The completion items for `prefix` (`/...` or `@...`) in `chat`, as
--- |complete-items|: word, abbr, menu, info; then whether the next key must ask
--- again (the files are still being listed, more than MAX_ITEMS match, or fuzzy
--- matches are among them).
---@return table[] items
---@return boolean incomplete
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
    return items, false
  end
  add("@selection", "the last visual selection")
  add("@diagnostics", "diagnostics of your buffer")
  add("@buffers", "every file buffer")
  add("@quickfix", "the quickfix list")
  add("@diff", "the work tree's git diff, unsaved buffers included")
  local seen = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if vim.bo[buf].buflisted and vim.bo[buf].buftype == "" and name ~= "" then
      local mention = workspace.mention(chat, name)
      seen[mention] = true
      if workspace.absolute(chat, mention) ~= vim.fs.normalize(name) then
        add("@" .. escape(mention), "worktree's copy") -- not the buffer's unsaved text
      else
        add("@" .. escape(mention), vim.bo[buf].modified and "buffer [+]" or "buffer")
      end
    end
  end
  -- The chat's directory first, then each root's files by where they are.
  local dirs = registry.dirs(chat)
  local function mention_of(index, file)
    return index == 1 and file or workspace.mention(chat, vim.fs.joinpath(dirs[index], file))
  end
  local function add_file(index, mention)
    seen[mention] = true
    local menu = index == 1 and "file" or ("file of " .. vim.fs.basename(dirs[index]))
    table.insert(items, { word = "@" .. escape(mention), menu = menu, info = "", icase = 1 })
  end
  -- Compared in place: a copy of each path ("@" .. path) made 200k paths take 120 ms a key.
  local query = prefix:sub(2):gsub("\\ ", " ")
  local width = #query
  for index, dir in ipairs(dirs) do
    for _, file in ipairs(files_of(dir)) do
      local mention = mention_of(index, file)
      if mention:sub(1, width) == query and not seen[mention] then
        if #items >= MAX_ITEMS then
          return items, true
        end
        add_file(index, mention)
      end
    end
  end
  local prefixed = #items
  if width >= 2 then
    local shown = {}
    for _, item in ipairs(items) do
      shown[item.word] = true
    end
    for index, dir in ipairs(dirs) do
      local files = files_of(dir)
      local looked = #files > FUZZY_FILES and vim.list_slice(files, 1, FUZZY_FILES) or files
      local room = MAX_ITEMS - #items
      for _, file in ipairs(room > 0 and vim.fn.matchfuzzy(looked, query, { limit = room }) or {}) do
        local mention = mention_of(index, file)
        local word = "@" .. escape(mention)
        if not shown[word] then
          shown[word] = true
          add_file(index, mention)
        end
      end
    end
  end
  -- Fuzzy items do not begin with what is typed, by which the menu filters itself:
  -- the next key asks again.
  return items, #items > prefixed or next(listing) ~= nil
end

--- The `@` or `/` word that `before` (a line up to the cursor) ends with: its start
--- (1-based) and text, or nil. An escaped space (`@my\ docs/`,
--- acp.chat.context.escape) does not end it.
---@param before string
---@return integer?, string?
function M.word_before(before)
  local start = before:gsub("\\ ", "\\_"):match("()[@/][^%s]*$")
  if start then
    return start, before:sub(start)
  end
end

--- The token being completed before the cursor: its start column (0-based) and
--- text, or nil. `/` counts only at the start of the input.
function M.token()
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local before = api.nvim_get_current_line():sub(1, col)
  local start, word = M.word_before(before)
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
    local start = chat and M.token()
    return start or -3
  end
  return chat and (M.items(chat, base)) or {}
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

--- 'completeopt' in the input: a menu opened as you type neither inserts nor
--- selects an item until you choose one (the default inserted the first).
local function complete_without_inserting(buf)
  local function chosen(global)
    local flags = vim.split(global, ",", { trimempty = true })
    for _, flag in ipairs({ "menuone", "noinsert", "noselect" }) do
      if not vim.tbl_contains(flags, flag) then
        table.insert(flags, flag)
      end
    end
    return table.concat(flags, ",")
  end
  if vim.fn.has("nvim-0.11") == 1 then -- 'completeopt' is global-local
    vim.bo[buf].completeopt = chosen(vim.go.completeopt)
    return
  end
  local saved
  api.nvim_create_autocmd("InsertEnter", { buffer = buf, callback = function()
    saved = vim.go.completeopt
    vim.go.completeopt = chosen(saved)
  end })
  api.nvim_create_autocmd("InsertLeave", { buffer = buf, callback = function()
    vim.go.completeopt = saved or vim.go.completeopt
  end })
end

--- Completion for the input buffer of `chat`: omnifunc, opened on `/` and `@`.
function M.attach(chat)
  vim.bo[chat.input].omnifunc = "v:lua.require'acp.chat.complete'.omnifunc"
  complete_without_inserting(chat.input)
  -- Each key typed in a token asks again, as completion plugins do: Neovim's own
  -- filter would keep only the items that begin with what is typed (the paths matched
  -- by letters in order went), and a key that is not a word character (`/`, `.`)
  -- would end the menu. The token's listing is cached, so asking again is a scan of
  -- it (doc/performance.md).
  api.nvim_create_autocmd({ "TextChangedI", "TextChangedP" }, {
    buffer = chat.input,
    callback = function()
      local tick = api.nvim_buf_get_changedtick(chat.input)
      if asked[chat.input] == tick then
        return
      end
      asked[chat.input] = tick
      show_hint(chat)
      local start, word = M.token()
      local at = start and ("%d:%d"):format(api.nvim_win_get_cursor(0)[1], start)
      if at ~= token_at[chat.input] or (start and #word == 1) then
        closed[chat.input] = nil -- a token begun (or begun again) opens the menu
      end
      token_at[chat.input] = at
      local choosing = vim.fn.pumvisible() == 1 and vim.fn.complete_info({ "selected" }).selected ~= -1
      if start and closed[chat.input] ~= at and not choosing then
        open_menu(chat, start, word)
      end
    end,
  })
  -- Neovim 0.10 gives no reason: there the next key opens the menu again.
  api.nvim_create_autocmd("CompleteDone", { buffer = chat.input, callback = function()
    local reason = vim.v.event.reason
    if reason == "cancel" or reason == "accept" then
      closed[chat.input] = token_at[chat.input]
    end
  end })
  api.nvim_create_autocmd("TextChanged", { buffer = chat.input, callback = function()
    show_hint(chat)
  end })
end

return M
