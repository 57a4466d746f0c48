-- What the chat inputs hold, unsent, on disk as it is typed: one small file per
-- Neovim, stdpath("state")/acp/drafts/PID.json, a list of (agent and directory,
-- text) pairs. A signal that ends Neovim (SIGHUP: a terminal window closed, an SSH
-- connection dropped; SIGTERM) unloads every buffer before VimLeavePre runs, so
-- what the inputs held is known only from here then. The next Neovim takes what a
-- gone one left into the prompt history (acp.chat.prompt_history, which decides
-- what is kept and when); a Neovim that quits removes its own file. Not the prompt
-- history's own file: that one (every project's prompts) is not to be rewritten at
-- each pause in typing (decision 0086).
if jit then jit.off(true, true) end -- decision 0068
local util = require("acp.util")

local M = {}
local uv = vim.uv

local function dir()
  return vim.fs.joinpath(vim.fn.stdpath("state"), "acp", "drafts")
end

local function own()
  return vim.fs.joinpath(dir(), uv.os_getpid() .. ".json")
end

local on_disk = "" -- what our file holds ("": there is none)
local next_text ---@type string? what it is to hold once the write under way is done
local writing = false
local warned = false

local function write(text)
  writing = true
  local function done(err)
    writing = false
    if err and not warned then
      warned = true -- once: the next pause in typing would say it again
      util.notify("what the chat input holds is not kept on disk: " .. err, "warn")
    elseif not err then
      on_disk = text
    end
    local waiting = next_text
    next_text = nil
    if waiting and waiting ~= on_disk then
      write(waiting)
    end
  end
  if text == "" then
    uv.fs_unlink(own(), vim.schedule_wrap(function()
      done(nil)
    end))
  else
    vim.fn.mkdir(dir(), "p")
    util.write_later(own(), text, done)
  end
end

--- Keep `drafts` ({key, text} pairs: every chat's unsent text) as this Neovim's,
--- off Neovim's loop, all or nothing; none: the file goes.
---@param drafts {[1]: string, [2]: string}[]
function M.keep(drafts)
  local text = #drafts > 0 and vim.json.encode(drafts) or ""
  if writing then
    next_text = text
  elseif text ~= on_disk then
    write(text)
  end
end

--- Whether process `pid` is gone (a pid reused since keeps its drafts waiting).
local function gone(pid)
  return select(3, uv.kill(pid, 0)) == "ESRCH"
end

--- What the drafts files of Neovims that are gone hold ({key, text} pairs), and
--- those files, to remove once the history holds their text. A file with this
--- Neovim's pid was left by one before it: its text is taken too (M.forget spares
--- it once this Neovim has kept its own there).
---@return {[1]: string, [2]: string}[] drafts, string[] paths
function M.left_behind()
  local drafts, paths = {}, {}
  for name, kind in vim.fs.dir(dir()) do
    local pid = kind == "file" and tonumber(name:match("^(%d+)%.json$"))
    if pid and (pid == uv.os_getpid() or gone(pid)) then
      local path = vim.fs.joinpath(dir(), name)
      local read, lines = pcall(vim.fn.readfile, path)
      local ok, pairs = pcall(vim.json.decode, read and table.concat(lines, "\n") or "")
      for _, pair in ipairs(ok and type(pairs) == "table" and pairs or {}) do
        if type(pair) == "table" and type(pair[1]) == "string" and type(pair[2]) == "string" then
          table.insert(drafts, { pair[1], pair[2] })
        end
      end
      table.insert(paths, path)
    end
  end
  return drafts, paths
end

--- Remove drafts files whose text the prompt history now holds; this Neovim's own
--- file only while it has kept nothing there itself.
---@param paths string[]
function M.forget(paths)
  for _, path in ipairs(paths) do
    if path ~= own() or (on_disk == "" and not writing) then
      uv.fs_unlink(path)
    end
  end
end

--- Neovim ends: let the write under way land; `keep` false (what the inputs held
--- is in the prompt history now) removes this Neovim's file, else it stays for the
--- next Neovim.
---@param keep boolean
function M.finish(keep)
  vim.wait(1000, function()
    return not writing
  end)
  next_text = nil
  if not keep then
    uv.fs_unlink(own())
  end
end

return M
