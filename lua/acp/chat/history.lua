-- The chat history (|acp-chat-history|): every chat kept by the Python side in a
-- SQLite file. Here: the search (answered at once, read on the Python side's own
-- thread), the :AcpHistory picker, and export to Markdown. Not the prompt history
-- of the input (acp.chat.prompt_history).
if jit then jit.off(true, true) end -- decision 0068
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
  return ask("history", { query = opts.query, agent = opts.agent, cwd = opts.cwd, limit = opts.limit })
end

--- Markdown `text` of chat `name` written to `path`, else shown in a new buffer.
---@return string|integer? done the path written, or the buffer
---@return string? error why not
local function deliver(text, path, name)
  if type(text) ~= "string" then
    return nil, ("no chat %s in the history"):format(name)
  end
  local lines = vim.split(text, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  if path and path ~= "" then
    path = vim.fn.fnamemodify(vim.fn.expand(path), ":p")
    local failed = util.write_lines(path, lines) -- all or nothing: a file it replaces stays whole
    if failed then
      return nil, ("cannot write %s: %s"):format(path, failed)
    end
    util.notify("exported to " .. path, "info")
    return path
  end
  vim.cmd("tabnew")
  local buf = vim.api.nvim_get_current_buf()
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].filetype = "markdown"
  vim.bo[buf].modified = false
  return buf
end

--- The chat's Markdown (the current chat's, else stored chat `opts.history`):
--- written to `path`, else shown in a new buffer. With `opts.on_done`, Neovim goes
--- on while Python writes the Markdown (a long chat's takes a while), and
--- `on_done(path or buffer)` runs once it is there (a failure is told instead);
--- else this waits for it.
---@param path? string
---@param opts? {history?: integer, on_done?: fun(done: string|integer)}
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
  local name, on_done = opts.history or params.chat, opts.on_done
  if not on_done then
    local done, error = deliver(ask("export", params), path, name)
    if error then
      util.user_error(error)
    end
    return done
  end
  host.call("export", params, function(text, error)
    local done
    if not error then
      done, error = deliver(text, path, name)
    end
    if error then
      util.notify(error)
    else
      on_done(done)
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
      local snippet = e.snippet ~= "" and ("  " .. e.snippet) or ""
      return ("%s · %s · %s · %s%s"):format(e.title, e.agent, vim.fn.fnamemodify(e.cwd, ":~"), util.age(e.updated_at), snippet)
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
          if path then
            M.export(path, { history = entry.id, on_done = function() end })
          end
        end)
      elseif action == "rename" then
        vim.ui.input({ prompt = "Name: ", default = entry.title }, function(name)
          if name then
            host.notify("history_rename", { id = entry.id, name = vim.trim(name) })
          end
        end)
      elseif action == "delete" then
        M.forget(entry.id)
      end
    end)
  end)
end

return M
