-- The chat history (|acp-chat-history|): every chat kept by the Python side in a
-- SQLite file. Here: the search (answered at once, read on the Python side's own
-- thread), the :AcpHistory picker, and export to Markdown. Not the prompt history
-- of the input (acp.chat.prompt_history).
if jit then jit.off(true, true) end -- decision 0068
local api = vim.api
local host = require("acp.host")
local registry = require("acp.chat.registry")
local util = require("acp.util")

local M = {}

--- A request to the Python side; its failure becomes a user error of one line.
local function ask(method, params)
  local ok, result = pcall(host.request, method, params)
  if not ok then
    local message = tostring(result)
    util.user_error(message:match("(history: .-)\n") or message:match("(history: .*)$") or message)
  end
  return result
end

--- Stored chats, newest first (see |acp.history()|).
---@param opts? {query?: string, agent?: string, cwd?: string, limit?: integer}
---@return acp.HistoryEntry[]
function M.search(opts)
  opts = opts or {}
  -- Checked here: the store took a limit of "x" for a damaged file (datatype
  -- mismatch) and said to move it away.
  util.options("history", opts, { query = "string", agent = "string", cwd = "string", limit = "integer" })
  -- 0 is none (as a limit left to fill would mean); below it is no count at all.
  if type(opts.limit) == "number" and opts.limit < 0 then
    util.user_error(("history: opts.limit: expected 0 or more, got %d"):format(opts.limit))
  end
  -- The directory as chats store it: absolute, no trailing slash (the Python side
  -- adds its resolved form).
  local cwd = opts.cwd and util.directory(opts.cwd)
  return ask("history", { query = opts.query, agent = opts.agent, cwd = cwd, limit = opts.limit })
end

-- Lines a loop turn puts in the export's buffer: a long chat's Markdown (100k
-- lines filled it in one 40-60 ms turn) comes in over several turns of a few ms.
local FILL_LINES = 5000

--- Up to `count` lines of `text` from byte `at` on (its last "\n" ends its last
--- line), and the byte after them.
---@return string[] lines, integer at
local function lines_from(text, at, count)
  local lines = {}
  while #lines < count and at <= #text do
    local newline = text:find("\n", at, true) or #text + 1
    lines[#lines + 1] = text:sub(at, newline - 1)
    at = newline + 1
  end
  return lines, at
end

--- Markdown `text` in a new buffer of a new tab page: all of it now, or with
--- `done`, FILL_LINES a loop turn (the buffer read-only meanwhile), then `done(buf)`.
---@param text string
---@param done? fun(buf: integer)
---@return integer buf
local function show(text, done)
  vim.cmd("tabnew")
  local buf = vim.api.nvim_get_current_buf()
  util.chat_markdown(buf)
  local at, count = 1, done and FILL_LINES or math.huge
  local function fill()
    if not vim.api.nvim_buf_is_valid(buf) then
      return -- closed before it was full
    end
    local first, lines = at == 1, nil
    lines, at = lines_from(text, at, count)
    vim.bo[buf].modifiable = true
    -- The first lines replace the new buffer's empty line; the others follow them.
    vim.api.nvim_buf_set_lines(buf, first and 0 or -1, -1, false, lines)
    if at <= #text then
      vim.bo[buf].modifiable = false
      vim.schedule(fill)
      return
    end
    vim.bo[buf].modified = false
    if done then
      done(buf)
    end
  end
  fill()
  return buf
end

--- The error of an export to directory `path`.
---@param path string
---@return string
local function is_a_directory(path)
  return ("%s is a directory"):format(vim.fn.fnamemodify(path, ":~:."))
end

--- `path` as typed, absolute: `%`, `#`, `~` and `$VAR` expanded, as `:write` takes
--- them. In a chat's buffer (its input, its transcript) `%` and `#` are those of the
--- window beside the chat, the file you work on: the chat's own name
--- (acp://input/1) is no place to write to.
---@param path string
---@return string
local function typed_path(path)
  local win = vim.b.acp_chat and require("acp.editor.windows").target_window()
  local ok, expanded = pcall(function()
    return win and api.nvim_win_call(win, function()
      return vim.fn.expandcmd(path)
    end) or vim.fn.expandcmd(path)
  end)
  if not ok then
    util.user_error(tostring(expanded):gsub("^Vim:", ""))
  elseif expanded:match("^%a[%w+.-]*://") then -- a buffer's URL-like name (acp://log)
    util.user_error(("%s names no file beside the chat (%s): give a path"):format(path, expanded))
  end
  return vim.fn.fnamemodify(expanded, ":p")
end

--- The chat's Markdown (the current chat's, else stored chat `opts.history`):
--- written to `path` (a file there only with `opts.force`, as Vim's :write!),
--- else shown in a new buffer. With `opts.on_done`, Neovim goes on while Python
--- makes the Markdown (a long chat's takes a while), writes the file or fills
--- the buffer, and `on_done(path or buffer)` runs once it is done (a failure is
--- told instead); else this waits for it.
---@param path? string
---@param opts? {history?: integer, force?: boolean, on_done?: fun(done: string|integer)}
---@return string|integer? done the path written, or the buffer (nil with on_done)
function M.export(path, opts)
  opts = opts or {}
  local params = { history = opts.history }
  if not opts.history then
    local chat = registry.get()
    if not chat then
      util.user_error("no chat is open (:AcpChat)")
    end
    params.chat = chat.id
  end
  local missing = ("no chat %s in the history"):format(opts.history or params.chat)
  path = path and path ~= "" and typed_path(path) or nil
  local found = path and vim.uv.fs_stat(path)
  if found and found.type == "directory" then
    util.user_error(is_a_directory(path)) -- no ! writes over it, as with :write
  elseif found and not opts.force then
    util.user_error(("%s exists (add ! to write over it)"):format(vim.fn.fnamemodify(path, ":~:.")))
  end
  local on_done = opts.on_done
  if not on_done then
    local text = ask("export", params)
    if type(text) ~= "string" then
      util.user_error(missing)
    end
    if not path then
      return show(text)
    end
    local failed = util.write_lines(path, (lines_from(text, 1, math.huge))) -- all or nothing
    if failed then
      util.user_error(("cannot write %s: %s"):format(path, failed))
    end
    util.notify("exported to " .. path, "info")
    return path
  end
  host.call("export", params, function(text, error)
    if not error and type(text) ~= "string" then
      error = missing
    end
    if error then
      util.notify(error)
    elseif not path then
      show(text, on_done)
    else
      util.write_later(path, text, function(failed) -- all or nothing, off the loop
        if failed then
          util.notify(("cannot write %s: %s"):format(path, failed))
          return
        end
        util.notify("exported to " .. path, "info")
        on_done(path)
      end)
    end
  end)
end

--- Forget stored chat `id` (a chat open here is no longer kept).
---@param id integer
function M.forget(id)
  host.notify("history_forget", { id = id })
end

--- :AcpHistory: pick a stored chat (its words matching `query`, if given), then
--- open (with `open`, given the stored chat's id), export, rename or delete it.
---@param query? string
---@param open fun(id: integer)
function M.pick(query, open)
  local entries = M.search({ query = query ~= "" and query or nil })
  if #entries == 0 then
    util.notify(query and ("no stored chat holds " .. query) or "no chat is stored yet", "info")
    return
  end
  vim.ui.select(entries, {
    prompt = query and ("History: " .. query) or "History",
    format_item = function(e)
      local open = registry.of_history(e.id)
      local where = open and (" · open in chat #%d"):format(open.id) or ""
      local snippet = e.snippet ~= "" and ("  " .. e.snippet) or ""
      return ("%s · %s · %s · %s%s%s"):format(e.title, e.agent, vim.fn.fnamemodify(e.cwd, ":~"), util.age(e.updated_at), where, snippet)
    end,
  }, function(entry)
    if not entry then
      return
    end
    vim.ui.select({ "open", "export", "rename", "delete" }, { prompt = entry.title }, function(action)
      if action == "open" then
        open(entry.id)
      elseif action == "export" then
        vim.ui.input({ prompt = "Export to (empty: a buffer): ", completion = "file" }, function(path)
          local function export(force)
            M.export(path, { history = entry.id, force = force, on_done = function() end })
          end
          local found = path and path ~= "" and vim.uv.fs_stat(typed_path(path))
          if found and found.type == "directory" then
            util.notify(is_a_directory(typed_path(path)))
          elseif found then
            vim.ui.select({ "write over it", "cancel" }, { prompt = path .. " exists" }, function(choice)
              if choice == "write over it" then
                export(true)
              end
            end)
          elseif path then
            export(false)
          end
        end)
      elseif action == "rename" then
        vim.ui.input({ prompt = "Name: ", default = entry.title }, function(name)
          if name then
            host.notify("history_rename", { id = entry.id, name = util.one_line(name) })
          end
        end)
      elseif action == "delete" then
        M.forget(entry.id)
      end
    end)
  end)
end

return M
