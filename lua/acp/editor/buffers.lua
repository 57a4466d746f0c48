-- File buffers for the Python side: read one, apply minimal line edits, save,
-- reload after a disk change. Each function is one atomic step on the main
-- loop; Python computes the edits and retries when the buffer moved on.
local config = require("acp.config")

local M = {}
local api = vim.api

local eols = { unix = "\n", dos = "\r\n", mac = "\r" }

--- The loaded buffer holding `path` (absolute), or nil.
---@param path string
---@return integer?
function M.find(path)
  local buf = vim.fn.bufnr(vim.fn.fnameescape(path))
  if buf > 0 and api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
    -- bufnr() matches patterns; make sure it is this very file.
    if vim.fn.fnamemodify(api.nvim_buf_get_name(buf), ":p") == path then
      return buf
    end
  end
  return nil
end

-- Neovim's own check of a buffer against its file (:checktime, W11/W12), settled
-- without a prompt: an unmodified buffer whose file changed is reloaded (as
-- 'autoread' would); a modified one keeps the user's text and Neovim takes the
-- file's new time as seen. Returns true when the file had changed behind unsaved
-- edits. Neovim's "changed since reading it" question still guards the next :write.
local function checktime(buf)
  if vim.fn.filereadable(api.nvim_buf_get_name(buf)) == 0 then
    return false
  end
  if not vim.bo[buf].modified then
    local autoread = vim.bo[buf].autoread
    vim.bo[buf].autoread = true
    pcall(vim.cmd.checktime, buf)
    vim.bo[buf].autoread = autoread
    return false
  end
  local moved = false
  local id = api.nvim_create_autocmd("FileChangedShell", {
    buffer = buf,
    callback = function()
      moved = vim.v.fcs_reason == "conflict"
      vim.v.fcs_choice = ""
    end,
  })
  pcall(vim.cmd.checktime, buf)
  api.nvim_del_autocmd(id)
  return moved
end

-- The text crosses msgpack as ONE string (pynvim converts a list of 100k lines
-- item by item), joined by Vimscript's join(): making 100k Lua strings first
-- took twice as long (bench/: 120 vs 70 ms). `count` lets Python notice a line
-- holding "\n" (a NUL byte) and ask for the list instead.
local function state(buf, want, known)
  local bo = vim.bo[buf]
  local tick = api.nvim_buf_get_changedtick(buf)
  -- Python's copy of this buffer is current: the text need not cross at all.
  local current = type(known) == "table" and known[1] == buf and known[2] == tick
  return {
    buf = buf,
    text = want == "text" and not current and api.nvim_eval(('join(getbufline(%d, 1, "$"), "\\n")'):format(buf)) or nil,
    lines = want == "lines" and api.nvim_buf_get_lines(buf, 0, -1, false) or nil,
    count = api.nvim_buf_line_count(buf),
    eol = eols[bo.fileformat] or "\n",
    -- What :write does: 'fixeol' adds a missing final newline.
    final_newline = bo.eol or (bo.fixeol and not bo.binary),
    modified = bo.modified,
    readonly = bo.readonly or not bo.modifiable,
    tick = tick,
  }
end

--- The state of the buffer of `path` (absolute), or nil when none is loaded; with
--- `load`, a hidden buffer is created for it (no window) first. `want` is "meta"
--- (no text), "text" (the lines joined by "\n") or "lines". `known` is {buf, tick}
--- of Python's copy of a buffer (acp_nvim/nvim/mirror.py): when that is this buffer
--- at its current changedtick, the text is left out. With `check` the buffer is
--- first checked against its file (see checktime() above): `moved` is then true
--- when the file changed behind the buffer's unsaved edits.
---@param path string
---@param load boolean
---@param want "meta"|"text"|"lines"
---@param known? {[1]: integer, [2]: integer}
---@param check? boolean
function M.read(path, load, want, known, check)
  local buf = M.find(path)
  if not buf and load then
    buf = vim.fn.bufadd(path)
    vim.bo[buf].buflisted = true
    vim.fn.bufload(buf)
  end
  if not buf then
    return nil
  end
  local moved = check and checktime(buf) or nil
  local result = state(buf, want, known)
  result.moved = moved
  return result
end

--- Save the current buffer for the agent (|acp-option-save_events|): BufWritePre
--- never runs, so a format-on-save hook cannot change the text under review;
--- BufWritePost does unless "none", so language servers and linters see the save.
local function write_for_agent()
  if config.options.save_events == "none" then
    vim.cmd("silent noautocmd keepalt keepjumps write!")
    return
  end
  local ignored = vim.o.eventignore
  vim.o.eventignore = (ignored ~= "" and ignored .. "," or "") .. "BufWritePre,FileWritePre"
  local ok, err = pcall(vim.cmd, "silent keepalt keepjumps write!")
  vim.o.eventignore = ignored
  if not ok then
    error(err, 0)
  end
end

--- Apply `edits` ({start, end, lines}, bottom to top) when the buffer is still at
--- `tick`; one undo step; then write it when `save`. Returns false when stale,
--- including when the file changed on disk since the buffer was read (it is
--- reloaded first, never written over). `disk_changed`: Python just wrote the file
--- behind the buffer's unsaved edits; Neovim takes that as seen (no W12 for it).
---@param path string
---@param tick integer
---@param edits {[1]: integer, [2]: integer, [3]: string[]}[]
---@param save boolean
---@param disk_changed? boolean
function M.edit(path, tick, edits, save, disk_changed)
  local buf = M.find(path)
  if buf and (disk_changed or (save and not vim.bo[buf].modified)) then
    checktime(buf)
  end
  if not buf or api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  if #edits > 0 then
    api.nvim_buf_call(buf, function()
      -- Close the user's undo block so the agent's edit is a step of its own.
      vim.cmd("let &undolevels = &undolevels")
    end)
    for _, e in ipairs(edits) do
      api.nvim_buf_set_lines(buf, e[1], e[2], false, e[3])
    end
  end
  if save and (vim.bo[buf].modified or vim.fn.filereadable(path) == 0) then
    vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
    api.nvim_buf_call(buf, write_for_agent)
  end
  return api.nvim_buf_get_changedtick(buf)
end

--- Delete the buffer of `path` (its file was deleted) when it is still at `tick`;
--- windows showing it get the alternate buffer, or a new empty one.
---@param path string
---@param tick integer
---@return boolean
function M.delete(path, tick)
  local buf = M.find(path)
  if not buf or api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local alt = api.nvim_win_call(win, function()
      return vim.fn.bufnr("#")
    end)
    local other = alt > 0 and alt ~= buf and vim.fn.buflisted(alt) == 1 and alt or api.nvim_create_buf(true, false)
    api.nvim_win_set_buf(win, other)
  end
  api.nvim_buf_delete(buf, { force = true })
  return true
end

--- Reload the buffers of `paths` that have no unsaved edits (cursor kept);
--- returns the paths whose buffers do have unsaved edits.
---@param paths string[]
---@return string[]
function M.reload(paths)
  local dirty = {}
  for _, path in ipairs(paths) do
    local buf = M.find(path)
    if buf and vim.bo[buf].modified then
      -- Left to Neovim's own W12 warning: the user decides.
      table.insert(dirty, path)
    elseif buf then
      checktime(buf)
    end
  end
  return dirty
end

return M
