-- File buffers for the Python side: read one, apply minimal line edits, save,
-- reload after a disk change. Each function is one atomic step on the main
-- loop; Python computes the edits and retries when the buffer moved on.
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local seen = require("acp.editor.seen")
local util = require("acp.util")

local M = {}
local api = vim.api

local eols = { unix = "\n", dos = "\r\n", mac = "\r" }

--- The reason in an error of :write ("...Vim(write):E514: Write error ..." -> "Write
--- error ..."), or of libuv ("ENOSPC: no space left on device: /p" -> "no space...").
local function reason(err)
  err = tostring(err)
  local vim_error = err:match("E%d+: ([^\n]*)$")
  if vim_error then
    return (vim_error:gsub(" %(add ! to override%)$", ""))
  end
  return (err:gsub("^%u+: ", ""):gsub(": /.*$", ""))
end

local function is_file_buffer(buf)
  return api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == ""
end

--- The loaded buffer holding `path` (absolute), or nil: the buffer of that name,
--- else one of the same file by another name (through a symlink, to the file or
--- to a directory on its way).
---@param path string
---@return integer?
function M.find(path)
  -- Names compared as they are: bufnr() takes a pattern, costs more than this loop
  -- with many buffers, and found no buffer for a name holding "{a,b}", escaped.
  local buffers = api.nvim_list_bufs()
  for _, buf in ipairs(buffers) do
    if api.nvim_buf_get_name(buf) == path and is_file_buffer(buf) then
      return buf
    end
  end
  -- By the file the names lead to now. Not Neovim's own lookup by file: it keeps
  -- the inode a buffer last read, and a save through a new file (decision 0037)
  -- replaces it.
  local file = vim.uv.fs_stat(path)
  for _, buf in ipairs(file and buffers or {}) do
    local name = api.nvim_buf_get_name(buf)
    -- File buffers only: a stat is a system call, on Neovim's loop.
    local other = name ~= "" and is_file_buffer(buf) and vim.uv.fs_stat(name)
    if other and other.ino == file.ino and other.dev == file.dev then
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

-- Whether `buf` holds no line at all (:write writes no byte), not one empty line
-- (:write writes a newline): both read as {""}; only the byte count tells them apart.
local function empty(buf)
  if api.nvim_buf_line_count(buf) > 1 or api.nvim_buf_get_lines(buf, 0, 1, false)[1] ~= "" then
    return false
  end
  return api.nvim_buf_call(buf, function()
    return vim.fn.wordcount().bytes == 0
  end)
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
    bomb = bo.bomb,
    tick = tick,
    empty = empty(buf),
  }
end

--- A buffer for `path` loaded without a window, or nil and why not. Not
--- where Neovim finds a swap file of it (another Neovim edits the file, or one
--- crashed editing it): bufload() asks nothing, loads the file anyway and raises
--- E325, and the user, whose windows would then show the loaded buffer, would
--- never be offered the swap file's text to recover. The buffer is taken back
--- (decision 0090).
---@param path string
---@return integer?, string?
function M.load(path)
  local existed = vim.fn.bufexists(path) == 1
  local buf = vim.fn.bufadd(path)
  local ok, err = pcall(vim.fn.bufload, buf)
  local swap = not ok and tostring(err):find("E325:", 1, true)
  -- Loaded, an autocommand of the user's failing (a plugin's BufReadPost or
  -- FileType): the file is there, as :edit shows it past the error.
  if ok or (not swap and api.nvim_buf_is_loaded(buf)) then
    return buf
  end
  api.nvim_buf_delete(buf, { unload = existed, force = true })
  if swap then
    return nil, "a swap file exists for it: it is open in another Neovim, or one crashed editing it"
  end
  return nil, reason(err)
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
    local why
    buf, why = M.load(path)
    if not buf then
      return { error = why }
    end
    vim.bo[buf].buflisted = true
  end
  if not buf then
    return nil
  end
  local moved = check and checktime(buf) or nil
  local result = state(buf, want, known)
  result.moved = moved
  return result
end

--- Run `fn` with global options set to `values`, then put them back.
local function with_options(values, fn)
  local saved = {}
  for name, value in pairs(values) do
    saved[name], vim.o[name] = vim.o[name], value
  end
  local ok, err = pcall(fn)
  for name, value in pairs(saved) do
    vim.o[name] = value
  end
  if not ok then
    error(err, 0)
  end
end

--- Save the current buffer for the agent in place, as :write does, a backup made
--- first (written nothing when none can be made, copied back when the write fails),
--- with events as |acp-option-save_events| says: BufWritePre never runs, so a
--- format-on-save hook cannot change the text under review; BufWritePost does
--- unless "none", so language servers and linters see the save.
local function write_in_place()
  local quiet = config.options.save_events == "none" and "noautocmd " or ""
  local ignored = vim.o.eventignore
  -- Backups go outside the project: one a failed write keeps is no agent's file.
  local backups = vim.fn.stdpath("state") .. "/acp/backup"
  vim.fn.mkdir(backups, "p")
  local options = { writebackup = true, backupskip = "", backupdir = backups .. "//" }
  options.eventignore = (ignored ~= "" and ignored .. "," or "") .. "BufWritePre,FileWritePre"
  with_options(options, function()
    vim.cmd("silent " .. quiet .. "keepalt keepjumps write")
  end)
end

-- Take the file of `buf` as it is now as seen, without a reload or a warning
-- (FileChangedShell answered with nothing to do stores its time): we wrote it.
local function settle(buf)
  local autoread = vim.bo[buf].autoread
  vim.bo[buf].autoread = false
  local id = api.nvim_create_autocmd("FileChangedShell", {
    buffer = buf,
    callback = function()
      vim.v.fcs_choice = ""
    end,
  })
  pcall(vim.cmd.checktime, buf)
  api.nvim_del_autocmd(id)
  vim.bo[buf].autoread = autoread
end

--- Whether a BufWriteCmd autocmd of someone else's may write `buf` (its file
--- `name`): by buffer, or by a pattern that matches the name or cannot be read
--- plainly. Pattern rules as in |autocmd-pattern|: without a slash, the tail.
local function written_by_others(buf, name)
  for _, au in ipairs(api.nvim_get_autocmds({ event = "BufWriteCmd" })) do
    if au.buflocal then
      if au.buffer == buf then
        return true
      end
    elseif au.pattern:find("[~$<]") then
      return true
    else
      local target = au.pattern:find("/", 1, true) and name or vim.fs.basename(name)
      local ok, regex = pcall(vim.regex, vim.fn.glob2regpat(au.pattern))
      if not ok or regex:match_str(target) then
        return true
      end
    end
  end
  return false
end

--- The file of `buf` changed behind its unsaved edits by our doing (`before`: its
--- stat then, acp.editor.seen), and the buffer holds that change too. Where the
--- file was still as Neovim last read or wrote it, Neovim's "changed since reading
--- it" question at the next :write has nothing to guard: it is answered here. A
--- :write! that a BufWriteCmd of ours turns into nothing makes Neovim take the file
--- as read, the buffer staying modified, its undo states and changedtick as they
--- were, no other event run. Not where another BufWriteCmd would write the file.
local function vouch(buf, before)
  local name = api.nvim_buf_get_name(buf)
  if not seen.was(buf, before) or written_by_others(buf, name) then
    return
  end
  local id = api.nvim_create_autocmd("BufWriteCmd", { buffer = buf, command = "" })
  api.nvim_buf_call(buf, function()
    pcall(vim.cmd, "silent keepalt keepjumps write!")
  end)
  api.nvim_del_autocmd(id)
  seen.record(buf)
end

--- Write the current buffer `buf` to `target` (its file, symlinks resolved;
--- `old`: its stat, nil when new) through a new file beside it: Neovim writes the
--- text as :write would ('fileencoding', 'fileformat', 'bomb', 'fsync') to a file
--- created in the same directory, which takes the old one's mode and owner and
--- replaces it in one rename. Returns nil, or why nothing was written; "in place"
--- when the owner cannot be kept or no file can be created there.
local function replace(buf, target, old)
  local uv = vim.uv
  local dir, base = vim.fs.dirname(target), vim.fs.basename(target)
  local temporary, fd, err, code
  for _ = 1, 100 do
    local nonce = ("%d.%08x"):format(uv.os_getpid(), math.random(0, 0x7fffffff))
    temporary = ("%s/.%s.%s.acp~"):format(dir, base, nonce)
    -- Mode 0600 until the old file's is set (0666 less the umask for a new file).
    fd, err, code = uv.fs_open(temporary, "wx", old and tonumber("600", 8) or tonumber("666", 8))
    if code ~= "EEXIST" then
      break
    end
  end
  if not fd then
    return (old and code == "EACCES") and "in place" or reason(err)
  end
  uv.fs_close(fd)
  -- Without 'A' in 'cpoptions': with it (the default), `:write {file}` adds a buffer
  -- for {file}, keepalt or not, and each save would leave one behind (`:ls!`).
  local options = { writebackup = false, backup = false, cpoptions = (vim.o.cpoptions:gsub("A", "")) }
  local ok, write_err = pcall(with_options, options, function()
    vim.cmd("silent noautocmd keepalt keepjumps write! " .. vim.fn.fnameescape(temporary))
  end)
  local made = ok and old and uv.fs_stat(temporary)
  if made then
    ok, write_err = uv.fs_chmod(temporary, old.mode % 4096)
    if ok and (made.uid ~= old.uid or made.gid ~= old.gid) then
      if not uv.fs_chown(temporary, old.uid, old.gid) then
        uv.fs_unlink(temporary)
        return "in place"
      end
    end
  end
  if ok then
    ok, write_err = uv.fs_rename(temporary, target)
  end
  if not ok then
    uv.fs_unlink(temporary)
    return reason(write_err)
  end
  local dirfd = uv.fs_open(dir, "r", 0)
  if dirfd then -- the rename itself made durable, where the system can
    uv.fs_fsync(dirfd)
    uv.fs_close(dirfd)
  end
  vim.bo[buf].modified = false
end

--- Save the current buffer `buf` (its file `name`) for the agent, all or nothing
--- (decision 0037): :write runs with a BufWriteCmd of ours that writes through a
--- new file (see replace()), so Neovim takes the buffer as written (undo marks a
--- later undo as a change) while no byte of the old file is touched until the new
--- one is whole. A file whose inode must stay (hard links, another user's, a
--- directory we may not create files in) is written in place by Neovim itself.
--- Events as |acp-option-save_events| says: BufWritePre never runs, so a
--- format-on-save hook cannot change the text under review; BufWritePost does
--- unless "none", so language servers and linters see the save. Returns nil, or
--- why nothing was written.
local function write_buffer(buf, name)
  local uv = vim.uv
  local target = uv.fs_realpath(name) or name
  local old = uv.fs_stat(target)
  local failed = "in place"
  if not (old and (old.nlink > 1 or (uv.getuid() ~= 0 and old.uid ~= uv.getuid()))) then
    local id = api.nvim_create_autocmd("BufWriteCmd", {
      buffer = buf,
      callback = function()
        failed = replace(buf, target, old)
      end,
    })
    local ok, err = pcall(vim.cmd, "silent keepalt keepjumps write!")
    api.nvim_del_autocmd(id)
    if failed == nil and not ok then
      failed = reason(err)
    end
  end
  if failed == "in place" then
    local ok, err = pcall(write_in_place)
    return not ok and reason(err) or nil
  elseif failed then
    return failed
  end
  settle(buf)
  seen.record(buf)
  if vim.bo[buf].undofile then
    pcall(vim.cmd, "silent wundo! " .. vim.fn.fnameescape(vim.fn.undofile(name)))
  end
  if config.options.save_events ~= "none" then
    api.nvim_exec_autocmds("BufWritePost", { buffer = buf, modeline = false })
  end
end

-- Why `buf`'s 'fileencoding' cannot hold the text `edits` ({start, end, lines},
-- bottom to top) bring, or nil. :write! writes such a character as "?" or "¿"
-- (its conversion error is no error with "!"), the buffer showing the agent's.
local function unconvertible(buf, edits)
  local fenc = vim.bo[buf].fileencoding
  if fenc == "" or fenc:find("^utf") or fenc:find("^ucs") then
    return nil -- Unicode: every character fits
  end
  local function fits(text)
    local back = vim.fn.iconv(vim.fn.iconv(text, "utf-8", fenc), fenc, "utf-8")
    return not text:find("[\128-\255]") or back == text
  end
  local shift = 0 -- lines the edits above this one added
  for k = #edits, 1, -1 do
    local e = edits[k]
    for i, line in ipairs(e[3]) do
      if not fits(line) then
        for _, char in ipairs(vim.fn.split(line, "\\zs")) do
          if not fits(char) then
            return ("its encoding %s cannot hold '%s' (line %d)"):format(fenc, char, e[1] + shift + i)
          end
        end
      end
    end
    shift = shift + #e[3] - (e[2] - e[1])
  end
  return nil
end

--- Apply `edits` ({start, end, lines}, bottom to top) when the buffer is still at
--- `tick`; one undo step; then write it when `save`. Returns false when stale,
--- including when the file changed on disk since the buffer was read (it is
--- reloaded first, never written over). `disk_changed`: the file just changed
--- behind the buffer's unsaved edits (Python wrote it, or the agent did); Neovim
--- takes that as seen (no W12 for it), and with `before` (the file's stat before
--- the change) as read where it can (see vouch() above): the edits bring the change.
--- A save that fails returns {error = why}: the edits are undone, the file untouched.
---@param path string
---@param tick integer
---@param edits {[1]: integer, [2]: integer, [3]: string[]}[]
---@param save boolean
---@param disk_changed? boolean
---@param before? integer[]
function M.edit(path, tick, edits, save, disk_changed, before)
  local buf = M.find(path)
  if buf and (disk_changed or (save and not vim.bo[buf].modified)) then
    checktime(buf)
  end
  if not buf or api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  local unfit = save and unconvertible(buf, edits)
  if unfit then
    return { error = unfit }
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
    local failed = nil
    local ok, err = pcall(vim.fn.mkdir, vim.fn.fnamemodify(path, ":h"), "p")
    if not ok then
      failed = reason(err)
    else
      failed = api.nvim_buf_call(buf, function()
        return write_buffer(buf, path)
      end)
    end
    if failed then
      if #edits > 0 then -- the file is untouched: so is the buffer
        api.nvim_buf_call(buf, function()
          vim.cmd("silent undo")
        end)
      end
      return { error = failed }
    end
  end
  if disk_changed and type(before) == "table" then
    vouch(buf, before)
  end
  return api.nvim_buf_get_changedtick(buf)
end

--- Delete `buf`, its file gone: the windows showing it stay (util.show_instead).
local function drop(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    util.show_instead(win, buf)
  end
  api.nvim_buf_delete(buf, { force = true })
end

--- Delete the buffer of `path` (its file was deleted) when it is still at `tick`.
---@param path string
---@param tick integer
---@return boolean
function M.delete(path, tick)
  local buf = M.find(path)
  if not buf or api.nvim_buf_get_changedtick(buf) ~= tick then
    return false
  end
  drop(buf)
  return true
end

--- Mark the buffer of `path` modified (not `saved`: its file just removed, its
--- text kept, `:q` then asks before the text goes), or saved (its file was just
--- written with what it shows: an undo brought back the bytes of a file with no
--- text, written exactly), its undo states kept (a reload would end the redo) and
--- the file's new time taken as seen.
---@param path string
---@param saved boolean
function M.mark_saved(path, saved)
  local buf = M.find(path)
  if buf then
    if saved then
      settle(buf)
    end
    vim.bo[buf].modified = not saved
  end
end

--- Delete the buffers of files under `dir` (a worktree removed with its files)
--- that hold no unsaved edits; the names of those that do, kept.
---@param dir string absolute
---@return string[]
function M.drop_under(dir)
  local prefix = dir:gsub("/+$", "") .. "/"
  local kept = {}
  for _, buf in ipairs(api.nvim_list_bufs()) do
    local name = api.nvim_buf_get_name(buf)
    if vim.bo[buf].buftype == "" and vim.startswith(name, prefix) then
      if vim.bo[buf].modified then
        table.insert(kept, name)
      else
        drop(buf)
      end
    end
  end
  return kept
end

--- Reload the buffers of `paths` that have no unsaved edits (cursor kept): the
--- Python side merges the agent's change into the others.
---@param paths string[]
function M.reload(paths)
  for _, path in ipairs(paths) do
    local buf = M.find(path)
    if buf and not vim.bo[buf].modified then
      checktime(buf)
    end
  end
end

return M
