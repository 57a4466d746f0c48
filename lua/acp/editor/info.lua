-- What an agent may learn about the editor through the editor MCP server
-- (acp_nvim/client/mcp): the open buffers, the visual selection, diagnostics, and the
-- attached language servers. Plain data out; lines and columns 1-based, columns
-- in characters. Language server requests are asynchronous: their answers go to
-- the host as a notification, so the UI never waits on a server.
if jit then jit.off(true, true) end -- decision 0068
local M = {}
local api = vim.api

local buffers = require("acp.editor.buffers")
local host = require("acp.host")

--- `text` as a Vim string: a Lua string with a NUL byte reaches vim.fn as a Blob
--- (E1174), and Vim keeps a NUL in a line as "\n" anyway.
local function vim_string(text)
  return (text:gsub("%z", "\n"))
end

--- Line `row` (0-based) of `buf`, as a Vim string.
local function line_of(buf, row)
  return vim_string(api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or "")
end

--- 1-based character column of 0-based byte column `col` of row `row` (0-based).
local function charcol(buf, row, col)
  local line = line_of(buf, row)
  return vim.fn.charidx(line, math.min(col, #line)) + 1
end

local function is_file(buf)
  return api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" and api.nvim_buf_get_name(buf) ~= ""
end

local function path_of(buf)
  return vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ":p")
end

--- The loaded, listed file buffers.
function M.buffers()
  local shown = {}
  for _, win in ipairs(api.nvim_list_wins()) do
    local buf = api.nvim_win_get_buf(win)
    if not shown[buf] or win == api.nvim_get_current_win() then
      shown[buf] = win
    end
  end
  local result = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if is_file(buf) and vim.bo[buf].buflisted then
      local win, cursor = shown[buf], vim.NIL
      if win then
        local pos = api.nvim_win_get_cursor(win)
        cursor = { pos[1], charcol(buf, pos[1] - 1, pos[2]) }
      end
      table.insert(result, {
        path = path_of(buf),
        modified = vim.bo[buf].modified,
        filetype = vim.bo[buf].filetype,
        line_count = api.nvim_buf_line_count(buf),
        visible = win ~= nil,
        cursor = cursor,
      })
    end
  end
  return result
end

-- The window of the file the user works in: the current one, else the previous
-- one (the user is typing in the chat), else any window showing a file.
local function work_window()
  for _, win in ipairs({ api.nvim_get_current_win(), vim.fn.win_getid(vim.fn.winnr("#")) }) do
    if win ~= 0 and api.nvim_win_is_valid(win) and is_file(api.nvim_win_get_buf(win)) then
      return win
    end
  end
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if is_file(api.nvim_win_get_buf(win)) then
      return win
    end
  end
end

--- The visual selection in progress, else the last one of the file the user works in.
function M.selection()
  local win = work_window()
  if not win then
    return nil
  end
  local buf = api.nvim_win_get_buf(win)
  local mode = api.nvim_get_mode().mode:sub(1, 1)
  local first, last
  if win == api.nvim_get_current_win() and (mode == "v" or mode == "V" or mode == "\22") then
    first, last = vim.fn.getpos("v"), vim.fn.getpos(".")
  else
    mode = api.nvim_buf_call(buf, vim.fn.visualmode) -- the buffer's own last mode
    local a, b = api.nvim_buf_get_mark(buf, "<"), api.nvim_buf_get_mark(buf, ">")
    if mode == "" or a[1] == 0 or b[1] == 0 then
      return nil
    end
    -- A linewise selection's '> column is v:maxcol: one more overflows, and
    -- getregion() then returns nothing.
    local function pos(mark)
      return { buf, mark[1], math.min(mark[2], vim.v.maxcol - 1) + 1, 0 }
    end
    first, last = pos(a), pos(b)
  end
  if first[2] > last[2] or (first[2] == last[2] and first[3] > last[3]) then
    first, last = last, first
  end
  local text = api.nvim_buf_call(buf, function()
    return vim.fn.getregion(first, last, { type = mode })
  end)
  for i, line in ipairs(text) do
    text[i] = line:gsub("\n", "\0") -- Vim's "\n" in a line is the file's NUL byte
  end
  local function at(pos)
    local line = line_of(buf, pos[2] - 1)
    local col = math.min(pos[3], math.max(#line, 1)) -- V selections end at MAXCOL
    return { pos[2], vim.fn.charidx(line, col - 1) + 1 }
  end
  local start, finish = at(first), at(last)
  if mode == "V" then
    start[2] = 1
    finish[2] = math.max(1, vim.fn.strchars(line_of(buf, last[2] - 1)))
  end
  return {
    path = path_of(buf),
    mode = ({ v = "char", V = "line" })[mode] or "block",
    start = start,
    ["end"] = finish,
    text = table.concat(text, "\n"),
  }
end

local severities = { "error", "warning", "info", "hint" }

--- Diagnostics of the buffer of `path` (nil: of every buffer).
---@param path? string
function M.diagnostics(path)
  local buf
  if path then
    buf = buffers.find(path)
    if not buf then
      return {}
    end
  end
  local result = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if api.nvim_buf_is_valid(d.bufnr) then
      local end_lnum = d.end_lnum or d.lnum
      table.insert(result, {
        path = path_of(d.bufnr),
        line = d.lnum + 1,
        column = charcol(d.bufnr, d.lnum, d.col),
        end_line = end_lnum + 1,
        end_column = charcol(d.bufnr, end_lnum, d.end_col or d.col),
        severity = severities[d.severity] or "error",
        message = d.message,
        source = d.source or vim.NIL,
        code = d.code ~= nil and tostring(d.code) or vim.NIL,
      })
    end
  end
  return result
end

-- Language server requests in flight: id -> function cancelling them.
local pending = {}

local methods = {
  definition = "textDocument/definition",
  references = "textDocument/references",
  hover = "textDocument/hover",
  document_symbols = "textDocument/documentSymbol",
  workspace_symbols = "workspace/symbol",
}

local function request(client, method, params, handler, buf)
  if vim.fn.has("nvim-0.11") == 1 then
    return client:request(method, params, handler, buf)
  end
  return client.request(method, params, handler, buf)
end

--- Each symbol of `result` (children too) as a location that names it: its own
--- (SymbolInformation; a WorkspaceSymbol's may have no range), else its selection
--- in `buf` (DocumentSymbol).
local function symbol_locations(result, buf, out)
  for _, symbol in ipairs(result) do
    local location = symbol.location
    if not location and symbol.selectionRange then
      location = { uri = vim.uri_from_bufnr(buf), range = symbol.selectionRange }
    end
    if location and location.range then
      local kind = vim.lsp.protocol.SymbolKind[symbol.kind] or "Unknown"
      local order = #out + 1
      out[order] = { uri = location.uri, range = location.range, kind = kind, name = symbol.name, order = order }
    end
    symbol_locations(symbol.children or {}, buf, out)
  end
  return out
end

local function items_of(kind, result, client, buf)
  local symbols = kind == "document_symbols" or kind == "workspace_symbols"
  -- Not symbols_to_items: it measures every symbol's column in bytes, on the lines of
  -- `buf` (the current buffer for a workspace's symbols). As locations, each symbol
  -- is measured on its own file's line, which comes back as its text.
  local locations = symbols and symbol_locations(result, buf, {}) or vim.islist(result) and result or { result }
  local items = vim.lsp.util.locations_to_items(locations, client.offset_encoding)
  if symbols then -- in the server's order (a workspace search's: best first), not by file
    table.sort(items, function(a, b)
      return a.user_data.order < b.user_data.order
    end)
  end
  local out = {}
  for _, item in ipairs(items) do
    local symbol = symbols and item.user_data or {}
    table.insert(out, {
      path = item.filename,
      line = item.lnum,
      column = vim.fn.charidx(vim_string(item.text or ""), item.col - 1) + 1,
      -- Symbols' text is "[Kind] name", locations' the line itself.
      text = symbol.kind and ("[%s] %s"):format(symbol.kind, symbol.name) or item.text or "",
      kind = symbol.kind or vim.NIL,
    })
  end
  return out
end

--- Send `kind` (a key of `methods`) to the language servers of the buffer of
--- `path` (loaded without a window when needed) at `pos` ({line, column}); without
--- `path`, a workspace symbol search asks every server. Returns the names of the
--- servers asked (none: nothing will follow); the answer reaches the host as
--- "lsp_answer" {id, items?, hover?, errors}.
---@param id integer
---@param kind string
---@param path? string
---@param pos? {[1]: integer, [2]: integer}
---@param query string
function M.lsp(id, kind, path, pos, query)
  local method = methods[kind]
  local buf
  if path then
    buf = buffers.find(path) or buffers.load(path)
    if not buf then
      return {} -- a swap file of it exists: not loaded, no server asked
    end
  end
  local clients = vim.lsp.get_clients({ bufnr = buf, method = method })
  if #clients == 0 then
    return {}
  end
  local params = { query = query }
  if buf then
    params.textDocument = { uri = vim.uri_from_bufnr(buf) }
  end
  local left, answer, names, cancels = #clients, { items = {}, hover = {}, errors = {} }, {}, {}
  -- Set first: an in-process server may answer before request() returns.
  pending[id] = function()
    for _, cancel in ipairs(cancels) do
      cancel()
    end
  end
  local function finish()
    pending[id] = nil
    host.notify("lsp_answer", { id = id, items = answer.items, hover = answer.hover, errors = answer.errors })
  end
  for _, client in ipairs(clients) do
    table.insert(names, client.name)
    local p = vim.deepcopy(params)
    if pos and buf then
      local row = pos[1] - 1
      local line = line_of(buf, row)
      local byte = vim.fn.byteidx(line, pos[2] - 1)
      byte = byte < 0 and #line or byte
      p.position = { line = row, character = vim.lsp.util.character_offset(buf, row, byte, client.offset_encoding) }
    end
    if kind == "references" then
      p.context = { includeDeclaration = true }
    end
    local ok, request_id = request(client, method, p, function(err, result)
      if pending[id] == nil then
        return -- timed out: the host stopped waiting
      end
      if err then
        table.insert(answer.errors, ("%s: %s"):format(client.name, err.message or tostring(err)))
      elseif result ~= nil then
        if kind == "hover" then
          local contents = result.contents and vim.lsp.util.convert_input_to_markdown_lines(result.contents) or {}
          vim.list_extend(answer.hover, contents)
        else
          vim.list_extend(answer.items, items_of(kind, result, client, buf))
        end
      end
      left = left - 1
      if left == 0 then
        finish()
      end
    end, buf)
    if ok then
      table.insert(cancels, function()
        pcall(client.cancel_request, client, request_id)
      end)
    else
      left = left - 1
      table.insert(answer.errors, client.name .. ": the request was not sent")
    end
  end
  if left == 0 and pending[id] then
    vim.schedule(finish)
  end
  return names
end

--- The host stopped waiting for request `id`: cancel what is still running.
---@param id integer
function M.lsp_cancel(id)
  local cancel = pending[id]
  pending[id] = nil
  if cancel then
    cancel()
  end
end

local watching = false

--- Tell the host when file buffers come and go (at most once per event loop turn).
function M.watch()
  if watching then
    return
  end
  watching = true
  local queued = false
  api.nvim_create_autocmd({ "BufAdd", "BufDelete", "BufWipeout", "BufFilePost" }, {
    group = api.nvim_create_augroup("acp_mcp_buffers", {}),
    callback = function()
      if not queued then
        queued = true
        vim.schedule(function()
          queued = false
          if host.running() then
            host.notify("buffers_changed", {})
          end
        end)
      end
    end,
  })
end

return M
