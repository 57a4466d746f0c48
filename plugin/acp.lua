-- acp.nvim user commands. Bodies `require` on call, so start-up costs nothing.
if vim.g.loaded_acp then
  return
end
vim.g.loaded_acp = true

local function acp()
  return require("acp")
end

--- A command's turn number (its `at`th word, default the first); what is not one
--- goes on as typed, for the API to refuse.
local function turn_arg(args, at)
  local typed = args.fargs[at or 1]
  return typed and (tonumber(typed) or typed)
end

--- Completion of a turn of the branch shown (:AcpRewind, :AcpEdit).
local function shown_turns()
  return require("acp.chat.branches").turns()
end

--- Whether completion `item` fits `arglead`: a word starts with it; a choice
--- ({value, name}: a mode, a model) by its value or its name, in any case, as the
--- user may know either (the value is what is inserted).
local function fits(item, arglead)
  if type(item) == "string" then
    return vim.startswith(item, arglead)
  end
  local lead = arglead:lower()
  return vim.startswith(item.value:lower(), lead) or vim.startswith((item.name or ""):lower(), lead)
end

--- The `complete` of a command taking `nargs` from `candidates(args)`, which gives
--- every word (or choice, see `fits`) that may follow `args` (the arguments typed
--- before the one completed), or the name of a built-in completion ("dir"). Neovim
--- offers what a Lua function returns as it is: what does not fit what is typed
--- is left out here.
local function completion(candidates, nargs)
  return function(arglead, cmdline, cursorpos)
    local ok, parsed = pcall(vim.api.nvim_parse_cmd, cmdline:sub(1, cursorpos), {})
    if not ok then -- a line Neovim would refuse: no word makes it right
      return {}
    end
    local args = parsed.args
    if nargs == 1 or nargs == "?" then
      -- Neovim gives the rest of the line as one argument, its escapes kept: a
      -- word before the one completed (`arglead`, a `my\ docs` whole) is one too many.
      local rest = args[1] or ""
      if vim.trim(rest:sub(1, #rest - #arglead)) ~= "" then
        return {}
      end
      args = {}
    elseif arglead ~= "" then
      args = vim.list_slice(args, 1, #args - 1) -- split and unescaped by Neovim
    end
    local words = candidates(args)
    if type(words) == "string" then
      -- Inserted as returned: escaped as Neovim's own file completion is, so that
      -- a name with a space stays one argument.
      return vim.tbl_map(vim.fn.fnameescape, vim.fn.getcompletion(arglead, words))
    end
    return vim
      .iter(words)
      :filter(function(item)
        return fits(item, arglead)
      end)
      :map(function(item)
        return type(item) == "string" and item or item.value
      end)
      :totable()
  end
end

--- A user command whose user errors (acp.util.user_error) show as one line, not
--- as a Lua traceback; other errors go on as they are. Given in the command-line
--- window (q:), where no window may open (E11), one that opens a window says so
--- and runs again once that window closes. A `complete` function gives the
--- candidates that `completion` narrows to what is typed.
local function command(name, body, opts)
  if type(opts.complete) == "function" then
    opts.complete = completion(opts.complete, opts.nargs)
  end
  local function run(args)
    local ok, err = pcall(body, args)
    if ok then
      return
    end
    local util = require("acp.util")
    if type(err) == "string" and vim.startswith(err, "acp: ") then
      util.notify(err:sub(6))
    elseif type(err) == "string" and err:find("E11:", 1, true) and util.in_cmdwin() then
      util.notify((":%s opens once the command-line window closes"):format(name), "info")
      util.outside_cmdwin(function()
        run(args)
      end)
    else
      error(err, 0)
    end
  end
  vim.api.nvim_create_user_command(name, run, opts)
end

--- Refuse the words of a command's `args` past its `most`, as Vim refuses its own
--- commands' (E488), rather than drop them unsaid.
local function at_most(args, most)
  if #args.fargs > most then
    require("acp.util").user_error("E488: Trailing characters: " .. table.concat(args.fargs, " ", most + 1))
  end
end

-- A buffer's file as Neovim read or wrote it (acp.editor.seen). Not :w to another
-- file, which leaves the buffer's own as it was.
vim.api.nvim_create_autocmd({ "BufReadPost", "BufWritePost" }, {
  group = vim.api.nvim_create_augroup("acp.seen", {}),
  callback = function(ev)
    if ev.event == "BufReadPost" or vim.fn.fnamemodify(ev.match, ":p") == vim.api.nvim_buf_get_name(ev.buf) then
      require("acp.editor.seen").record(ev.buf)
    end
  end,
})

-- A session saved with a chat shown brings back empty buffers of the chat's names,
-- in windows of their own; a chat is not in a session (decision 0084): they go.
vim.api.nvim_create_autocmd("SessionLoadPost", {
  group = vim.api.nvim_create_augroup("acp.session", {}),
  callback = function()
    require("acp.bufnames").sweep_soon()
  end,
})

command("AcpChat", function(args)
  acp().open({ agent = args.fargs[1], new = args.bang })
end, {
  nargs = "?",
  bang = true,
  desc = "Open the agent chat (! starts a new session)",
  complete = function()
    return require("acp.config").agent_names()
  end,
})
command("AcpWorktree", function(args)
  acp().open({ agent = args.fargs[1], worktree = true })
end, {
  nargs = "?",
  desc = "Open a chat whose agent works in a new git worktree of the project",
  complete = function()
    return require("acp.config").agent_names()
  end,
})
command("AcpRoot", function(args)
  at_most(args, 2)
  require("acp.chat.workspace").root(args.fargs[1], args.fargs[2])
end, {
  nargs = "+",
  desc = "Add a workspace root to the chat, or remove one (add|remove [dir])",
  complete = function(args)
    return require("acp.chat.workspace").complete(args)
  end,
})
command("AcpToggle", function()
  acp().toggle()
end, { desc = "Hide the agent chats of this tab page, or show them again" })
command("AcpSend", function(args)
  acp().send(args.args, { now = args.bang })
end, { nargs = "+", bang = true, desc = "Send a message to the agent (! now: into the running turn)" })
command("AcpCancel", function()
  acp().cancel()
end, { desc = "Cancel the agent's current turn" })
command("AcpRestart", function()
  acp().restart()
end, { desc = "Start the chat's agent again, going on in the same transcript" })
command("AcpRestore", function(args)
  acp().restore(turn_arg(args))
end, {
  nargs = "?",
  desc = "Take the files back to before turn N (default: the last turn)",
  complete = function()
    return require("acp.review").turns_to_restore()
  end,
})
command("AcpTurnDiff", function(args)
  require("acp.review.turn").open(turn_arg(args))
end, {
  nargs = "?",
  desc = "Every file a turn changed (default: the latest), in one tab, its hunks inline",
  complete = function()
    return require("acp.review").turns_changed()
  end,
})
command("AcpRewind", function(args)
  acp().rewind(turn_arg(args))
end, {
  nargs = "?",
  desc = "Take the conversation and the files back to before turn N (no N: pick)",
  complete = shown_turns,
})
command("AcpBranches", function()
  local chat = require("acp.chat.registry").get()
  if not chat then
    require("acp.util").user_error("no chat is open (:AcpChat)")
  end
  require("acp.chat.branches").pick(chat)
end, { desc = "Pick a branch of the conversation to show and go on in" })
command("AcpRegenerate", function()
  acp().regenerate()
end, { desc = "Send the last prompt again, from before its answer" })
command("AcpQueue", function()
  acp().edit_queue()
end, { desc = "Edit, send now or remove a prompt waiting to be sent" })
command("AcpEdit", function(args)
  acp().edit(turn_arg(args))
end, {
  nargs = "?",
  desc = "Put a prompt (default: the last) back in the input; sent, it goes from there",
  complete = shown_turns,
})
command("AcpChats", function()
  acp().pick_chat()
end, { desc = "Pick an open chat to switch to, close or rename" })
command("AcpFork", function()
  acp().fork()
end, { desc = "Open a new chat continuing this one in a fork of its session" })
command("AcpClose", function()
  acp().close()
end, { desc = "Close the chat (its agent ends when no other chat uses it)" })
command("AcpTerminal", function(args)
  require("acp.editor.terminal").open(args.fargs[1])
end, {
  nargs = "?",
  desc = "Open an agent's terminal (default: the newest) in a split",
  complete = function()
    return require("acp.editor.terminal").keys()
  end,
})
command("AcpPermission", function(args)
  acp().permission(args.fargs[1])
end, {
  nargs = "?",
  desc = "Answer the agent's pending permission request; list or forget remembered answers",
  complete = function()
    return { "list", "forget" }
  end,
})
command("AcpReview", function()
  acp().review()
end, { desc = "Review the agent's file changes (accept or reject hunks)" })
command("AcpHunk", function(args)
  require("acp.review.hunks").act(args.fargs[1])
end, {
  nargs = 1,
  desc = "Accept, reject (and say why) or preview the agent hunk under the cursor",
  complete = function()
    return require("acp.review.hunks").actions
  end,
})
command("AcpDiff", function(args)
  at_most(args, 2)
  -- A lone number is the turn (of the current buffer's file); else the first word
  -- is the file and the second the turn, refused when it is none, never dropped.
  local file = not (#args.fargs == 1 and tonumber(args.fargs[1])) and args.fargs[1] or nil
  require("acp.review.diff").open(file, turn_arg(args, file and 2 or 1))
end, {
  nargs = "*",
  complete = function(args)
    return require("acp.review.diff").complete(args)
  end,
  desc = "Diff a file against its text before the agent's turn",
})
command("AcpConfig", function(args)
  at_most(args, 2)
  acp().config(args.fargs[1], args.fargs[2])
end, {
  nargs = "*",
  desc = "Change a session setting (mode, model, ...)",
  complete = function(args)
    return require("acp.chat.session").complete(args)
  end,
})
local function choices(category)
  return function()
    local chat = require("acp.chat.registry").get()
    local session = require("acp.chat.session")
    local option = chat and session.setting(chat, category)
    return option and session.choices(chat, option) or {}
  end
end
command("AcpAdd", function(args)
  acp().add({ file = args.args, range = args.range > 0 and { args.line1, args.line2 } or nil })
end, { nargs = "?", range = true, complete = "file", desc = "Mention a file, or the selected lines, in the chat input" })
command("AcpPaste", function()
  acp().paste_image()
end, { desc = "Attach an image from the clipboard to the next prompt" })
vim.keymap.set("x", "<Plug>(AcpAdd)", ":AcpAdd<CR>", { silent = true, desc = "acp: add the selection to the chat input" })
command("AcpMode", function(args)
  acp().set_mode(args.fargs[1])
end, { nargs = "?", desc = "Switch the agent's mode (no argument: pick)", complete = choices("mode") })
command("AcpModel", function(args)
  acp().set_model(args.fargs[1])
end, { nargs = "?", desc = "Switch the agent's model (no argument: pick)", complete = choices("model") })
command("AcpSessions", function()
  acp().sessions()
end, { desc = "Pick a saved session of the agent and resume it" })
command("AcpResume", function(args)
  acp().resume(args.fargs[1])
end, {
  nargs = 1,
  desc = "Resume a saved session in a new chat",
  complete = function()
    return require("acp.chat.session").complete_ids()
  end,
})
command("AcpDeleteSession", function(args)
  acp().delete_session(args.fargs[1])
end, {
  nargs = 1,
  desc = "Delete a saved session of the agent",
  complete = function()
    return require("acp.chat.session").complete_ids()
  end,
})
command("AcpHistory", function(args)
  require("acp.chat.history").pick(args.args ~= "" and args.args or nil, function(id)
    require("acp").open({ history = id })
  end)
end, { nargs = "*", desc = "Pick a stored chat (matching the words given) to open, export, rename or delete" })
command("AcpExport", function(args)
  -- Neovim goes on while the Markdown is made; the buffer or the notice says when it is done.
  acp().export(args.args ~= "" and args.args or nil, { force = args.bang, on_done = function() end })
end, {
  nargs = "?",
  bang = true,
  -- Completed as a file, but not expanded by Neovim: export() expands `%` as the
  -- chat means it (the file beside it, not acp://input/1).
  complete = function()
    return "file"
  end,
  desc = "Export the chat to Markdown (a file, else a buffer; ! writes over a file)",
})
command("AcpHandoff", function(args)
  acp().handoff(args.fargs[1])
end, {
  nargs = 1,
  desc = "Continue the conversation with another agent in a new chat",
  complete = function()
    return require("acp.config").agent_names()
  end,
})
command("AcpLogin", function(args)
  acp().login(args.fargs[1])
end, {
  nargs = "?",
  desc = "Log in to the agent",
  complete = function()
    return require("acp.chat.session").complete_logins()
  end,
})
command("AcpLogout", function()
  acp().logout()
end, { desc = "Log out of the agent" })
command("AcpInstall", function(args)
  require("acp.install").run({ python = args.fargs[1] })
end, {
  nargs = "?",
  complete = "file",
  desc = "Build or repair the plugin's Python environment ([python]: anew, with it)",
})
command("AcpLog", function()
  require("acp.log").open()
end, { desc = "Show the protocol log" })
