-- The transcript's winbar: the chat's state and agent, then what it works with
-- (workspace, protocol, queue, mode, model, context meter, title), fitted to each
-- window's width by whole fields: a narrow chat drops the ones a user needs least
-- and shortens the title and the directory, rather than cutting through the middle
-- of a field.
if jit then jit.off(true, true) end -- decision 0068
local registry = require("acp.chat.registry")
local util = require("acp.util")
local workspace = require("acp.chat.workspace")

local M = {}
local api = vim.api

local SEPARATOR = " · "
local SEPARATOR_WIDTH = vim.fn.strdisplaywidth(SEPARATOR)
-- The fewest columns a title is shortened to before it gives way altogether.
local TITLE_MIN = 12

local function tokens(n)
  return n >= 1000 and ("%dk"):format(math.floor(n / 1000 + 0.5)) or tostring(n)
end

--- `amount` to the cent, and one under a cent to two significant digits: a cheap
--- model's session cost "0.0031", not "0.00" (Python's view.money says it alike).
---@param amount number
---@return string
local function money(amount)
  if math.abs(amount) >= 0.01 or math.abs(amount) < 1e-6 then
    return ("%.2f"):format(amount)
  end
  local digits = 1 - math.floor(math.log10(math.abs(amount)))
  return (("%." .. digits .. "f"):format(amount):gsub("0+$", ""))
end

--- "ctx 12k/200k 6% $0.04" from a usage_update (nil without one).
---@param usage? {used: integer, size: integer, cost?: {amount: number, currency: string}}
---@return string?
function M.usage_text(usage)
  if type(usage) ~= "table" or not usage.size or usage.size <= 0 then
    return nil
  end
  local text = ("ctx %s/%s %d%%"):format(tokens(usage.used), tokens(usage.size), math.floor(100 * usage.used / usage.size + 0.5))
  local cost = usage.cost
  if type(cost) == "table" and cost.amount then
    local sign = cost.currency == "USD" and "$" or ""
    text = text .. (" %s%s%s"):format(sign, money(cost.amount), sign == "" and (" " .. cost.currency) or "")
  end
  return text
end

---@class acp.WinbarField
---@field text string
---@field rank integer the lowest gives way first
---@field title? boolean shortened before it gives way
---@field short? string what it shows before it gives way

-- What a chat waiting for the session its conversation goes on in says (status().waiting).
local WAITING = { rewind = "going back…", branch = "switching branch…" }

--- The state shown: a running turn that waits for the user, or is being cancelled, says
--- so; so does a chat waiting for the session a rewind or a branch goes on in.
local function state_of(s)
  local state = s.state or "starting"
  if s.waiting and (state == "ready" or state == "starting") then
    return WAITING[s.waiting] or state
  elseif state == "running" and s.turn_state == "requires_action" then
    return "waiting for you"
  elseif state == "running" and s.turn_state == "cancelling" then
    return "cancelling…"
  end
  return state
end

--- The fields after the state and agent, in the order shown, for a window whose
--- directory is `cwd`.
---@param chat acp.Chat
---@param cwd string
---@return acp.WinbarField[]
local function fields(chat, cwd)
  local s = chat.status
  local shown = {}
  -- Each field on one line, as a title is: the agent names its model, modes and
  -- session, and a line break or a NUL there (which Vim's functions refuse) left
  -- the winbar undrawn.
  local function add(text, rank, title)
    if text then
      table.insert(shown, { text = util.one_line(text), rank = rank, title = title })
    end
  end
  -- The chat's own directory outlasts its roots (decision 0079).
  local directory = workspace.directory(chat, cwd)
  if directory then
    add("in " .. directory, 6)
    shown[#shown].short = "in " .. vim.fn.pathshorten(util.one_line(directory))
  end
  for _, label in ipairs(workspace.label(chat)) do
    add(label, 5)
  end
  add(s.protocol_version and ("ACP v" .. s.protocol_version), 1)
  add((s.queued or 0) > 0 and (s.queued .. " queued") or nil, 8)
  add(s.mode and ("mode " .. s.mode), 7)
  add(s.model, 2)
  -- The meter outlasts the title: it is the figure that changes as you work, and
  -- :AcpChats lists every chat's title (decision 0079).
  add(M.usage_text(s.usage), 4)
  add(s.name or s.title, 3, true)
  return shown
end

--- The winbar of `chat`'s transcript in a window `width` columns wide, whose
--- directory is `cwd`.
---@param chat acp.Chat
---@param width integer
---@param cwd string
---@return string
function M.text(chat, width, cwd)
  local head = (" %s · %s"):format(state_of(chat.status), util.one_line(chat.status.agent or "?"))
  local shown = fields(chat, cwd)
  local used = vim.fn.strdisplaywidth(head)
  for _, field in ipairs(shown) do
    used = used + SEPARATOR_WIDTH + vim.fn.strdisplaywidth(field.text)
  end
  while used > width and #shown > 0 do
    local lowest = 1
    for i, field in ipairs(shown) do
      if field.rank < shown[lowest].rank then
        lowest = i
      end
    end
    local field = shown[lowest]
    local over, size = used - width, vim.fn.strdisplaywidth(field.text)
    if field.title and size - over >= TITLE_MIN then
      field.text = vim.fn.strcharpart(field.text, 0, size - over - 1) .. "…"
      used = width
    elseif field.short and field.short ~= field.text then
      field.text, field.short = field.short, nil
      used = used - size + vim.fn.strdisplaywidth(field.text)
    else
      used = used - SEPARATOR_WIDTH - size
      table.remove(shown, lowest)
    end
  end
  local texts = vim.tbl_map(function(field)
    return field.text
  end, shown)
  local text = table.concat({ head, unpack(texts) }, SEPARATOR)
  -- A field's `%` is text, not an item of 'winbar' ("100%" raised E539).
  return (text:gsub("%%", "%%%%"))
end

-- Every transcript window's 'winbar' is this expression, set once; it shows the
-- text `update` fitted to that window. A new text redraws that window's winbar
-- alone, where setting the option redrew every window and status line of the tab
-- page, twice a turn (decision 0096). The transcript's b:acp_winbar is `shown`: a
-- funcref call makes no Lua garbage, where `v:lua` compiles a chunk at each of
-- Neovim's redraws of the bar; another buffer shown in the window later has none.
local EXPRESSION = "%{%exists('b:acp_winbar')?b:acp_winbar():''%}"

-- What each window's winbar is to show, by window, and what Neovim last drew there.
---@type table<integer, string>
local texts, drawn = {}, {}

--- `chat`'s winbar text in window `win`. Narrower than the state and agent, their
--- end is cut (`%<` last: by default Neovim cuts a winbar's start, "<ting for you ·
--- demo").
local function fitted(chat, win)
  local cwd = vim.fn.getcwd(win, api.nvim_tabpage_get_number(api.nvim_win_get_tabpage(win)))
  return M.text(chat, api.nvim_win_get_width(win), cwd) .. "%<"
end

--- The winbar of the window being drawn (current while Neovim evaluates the
--- expression). A window that shows a transcript before `update` saw it (a
--- `:split` copies the option) gets its text made here; one that cannot be made
--- (the error is told where `update` meets it) shows nothing rather than have
--- Neovim empty the option.
---@return string
function M.shown()
  local win = api.nvim_get_current_win()
  local text = texts[win]
  if not text then
    local buf = api.nvim_win_get_buf(win)
    local chat = registry.of_buffer(buf)
    local ok, made = pcall(fitted, chat, win)
    text = chat and chat.transcript == buf and ok and made or ""
    texts[win] = text
  end
  drawn[win] = text
  return text
end

-- Windows whose new text waits for Neovim's next redraw, and whether a check of
-- them is scheduled.
---@type table<integer, true>
local waiting, checking = {}, false

--- Redraw the bars of the waiting windows Neovim's own redraw left as they were.
--- A batch that moves a transcript window's cursor (it follows the stream) has
--- Neovim draw that window's bar anyway; a bar drawn at once from `update` was
--- drawn twice then, with a flush of the screen to the UI in the middle of the
--- batch.
local function redraw_waiting()
  checking = false
  local tab = api.nvim_get_current_tabpage()
  for win in pairs(waiting) do
    waiting[win] = nil
    if api.nvim_win_is_valid(win) and drawn[win] ~= texts[win] and api.nvim_win_get_tabpage(win) == tab then
      api.nvim__redraw({ win = win, winbar = true })
    end
  end
end

--- Draw `chat`'s winbar in every window that shows its transcript, where its text
--- changed: after Neovim's next redraw, where that did not draw it. A window not
--- drawn yet shows the text at its first draw: asked for here, that draw would
--- happen at once, inside the command that opens the window (with a whole pass of
--- its folds, decision 0074). One in another tab page is drawn when that tab page
--- is entered.
---@param chat acp.Chat
function M.update(chat)
  for _, win in ipairs(vim.fn.win_findbuf(chat.transcript)) do
    util.set_local(win, { winbar = EXPRESSION })
    local text = fitted(chat, win)
    texts[win] = text
    if drawn[win] and drawn[win] ~= text then
      waiting[win] = true
      if not checking then
        checking = true
        vim.schedule(redraw_waiting)
      end
    end
  end
end

local group = api.nvim_create_augroup("acp.winbar", { clear = true })
-- A transcript's window made narrower or wider fits its winbar again.
api.nvim_create_autocmd("WinResized", {
  group = group,
  callback = function()
    for _, win in ipairs(vim.v.event.windows) do
      local chat = api.nvim_win_is_valid(win) and registry.of_buffer(api.nvim_win_get_buf(win))
      if chat and chat.transcript == api.nvim_win_get_buf(win) then
        M.update(chat)
      end
    end
  end,
})
-- Each chat's directory is shown as it differs from Neovim's, which changed.
api.nvim_create_autocmd("DirChanged", {
  group = group,
  callback = function()
    for _, chat in pairs(registry.chats) do
      if registry.valid(chat) then
        M.update(chat)
      end
    end
  end,
})
api.nvim_create_autocmd("WinClosed", {
  group = group,
  callback = function(ev)
    local win = tonumber(ev.match) --[[@as integer]]
    texts[win], drawn[win], waiting[win] = nil, nil, nil
  end,
})

return M
