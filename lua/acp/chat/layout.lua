-- The chat's windows: the transcript over the input, one pair that opens, closes
-- and comes back together. Laid out by the `chat` options (right, left, bottom,
-- float or tab), sized as a share of the editor within bounds, and sized again on
-- every VimResized. Every option is set window-local, so a buffer shown later in
-- one of these windows gets the user's values back. Buffers and sessions are
-- acp.chat's.
if jit then jit.off(true, true) end -- decision 0068
local config = require("acp.config")
local util = require("acp.util")

local M = {}
local api = vim.api

local INPUT = { wrap = true, linebreak = true, number = false, relativenumber = false, signcolumn = "no" }
-- The transcript wraps at words with wrapped list items indented under their text
-- (list:-1 measures the item's marker with the markdown 'formatlistpat'), and
-- folds each thought and tool call under its header line ("" shows it as it is).
local TRANSCRIPT = vim.tbl_extend("force", INPUT, {
  breakindent = true,
  breakindentopt = "list:-1",
  showbreak = "NONE",
  foldmethod = "expr",
  foldexpr = "b:acp_foldexpr(v:lnum)",
  foldtext = "",
  foldlevel = 99,
  conceallevel = 2,
})

--- Options of a chat buffer that enters window `win`, however it gets there.
---@param win integer
---@param is_transcript boolean
function M.decorate(win, is_transcript)
  util.set_local(win, is_transcript and TRANSCRIPT or INPUT)
end

--- `value` cells, or that share of `total` cells (a value up to 1), within [min, max].
local function size(value, total, min, max)
  local cells = value <= 1 and math.floor(value * total) or value
  return math.max(min, math.min(max, cells))
end

--- Columns and lines of the chat (input included) for the editor's size now. A
--- size not given: a float over the editor takes most of it (its borders cost
--- four lines), a split beside the code less.
local function dimensions()
  local o = config.options.chat
  local share = o.position == "float" and 0.8 or 0.4
  return size(o.width or share, vim.o.columns, o.min_width, o.max_width),
    size(o.height or share, vim.o.lines - vim.o.cmdheight, o.min_height, o.max_height)
end

--- Configs of the centred float pair: the transcript's box over the input's.
local function floats()
  local lines = vim.o.lines - vim.o.cmdheight
  local width, height = dimensions()
  width, height = math.min(width, vim.o.columns), math.min(height, lines)
  local input = config.options.chat.input_height
  -- Each box has a border line above and below its text.
  local transcript = math.max(1, height - input - 4)
  local row, col = math.floor((lines - height) / 2), math.floor((vim.o.columns - width) / 2)
  local function box(top, rows)
    return { relative = "editor", row = top, col = col, width = math.max(1, width - 2), height = rows, border = "rounded" }
  end
  return box(row, transcript), box(row + transcript + 2, input)
end

local function is_float(win)
  return api.nvim_win_get_config(win).relative ~= ""
end

--- The windows showing the pair in tab page `tab` (0: the current one).
---@return integer? transcript, integer? input
local function pair(chat, tab)
  local transcript, input
  for _, win in ipairs(api.nvim_tabpage_list_wins(tab)) do
    local buf = api.nvim_win_get_buf(win)
    if buf == chat.transcript then
      transcript = transcript or win
    elseif buf == chat.input then
      input = input or win
    end
  end
  return transcript, input
end

--- Give `win` `height` lines, when it has a window above or below it to take them
--- from or give them to. One that spans its tab page's height (alone, or with
--- windows only beside it) would change 'cmdheight' instead: after `:only` in the
--- input, the command line took 15 of 24 lines.
local function set_height(win, height)
  local function stacked(node, in_column)
    if node[1] == "leaf" then
      return node[2] == win and in_column
    end
    for _, child in ipairs(node[2]) do
      if stacked(child, in_column or node[1] == "col") then
        return true
      end
    end
    return false
  end
  local tab = api.nvim_tabpage_get_number(api.nvim_win_get_tabpage(win))
  if stacked(vim.fn.winlayout(tab), false) then
    api.nvim_win_set_height(win, height)
  end
end

-- A window closing gives its room to a neighbour, 'winfixheight' or not (the
-- input grew by a closed terminal split's lines), and a split opening may have
-- squeezed the pair before. So each pinned window remembers its size (w:acp_size)
-- as we set it, or as the user resized it: a resize that neither opened nor
-- closed a window. After another window closes, that size comes back.
local counts = {} ---@type table<integer, integer> tab page -> its windows at the last resize

local function remember(win)
  vim.w[win].acp_size = { api.nvim_win_get_width(win), api.nvim_win_get_height(win) }
end

local function restore(win)
  -- Closed meanwhile (`:only` closes them all, one WinClosed each).
  if not api.nvim_win_is_valid(win) then
    return
  end
  local size = vim.w[win].acp_size
  if not (size and vim.w[win].acp_pinned) then
    return
  end
  if vim.wo[win].winfixwidth then
    api.nvim_win_set_width(win, size[1])
  end
  if vim.wo[win].winfixheight then
    set_height(win, size[2])
  end
end

local kept = api.nvim_create_augroup("acp.layout.kept", { clear = true })
api.nvim_create_autocmd("WinResized", {
  group = kept,
  callback = function()
    local tab = api.nvim_get_current_tabpage()
    local count = #api.nvim_tabpage_list_wins(tab)
    if counts[tab] == count then
      for _, win in ipairs(vim.v.event.windows) do
        if vim.w[win].acp_pinned then
          remember(win)
        end
      end
    end
    counts[tab] = count
  end,
})
api.nvim_create_autocmd("WinClosed", {
  group = kept,
  callback = function(ev)
    local closed = tonumber(ev.match) --[[@as integer]]
    if not api.nvim_win_is_valid(closed) or is_float(closed) or vim.b[api.nvim_win_get_buf(closed)].acp_chat then
      return -- a chat window closing is M.rejoin's
    end
    local pinned = vim.tbl_filter(function(win)
      return vim.w[win].acp_pinned ~= nil
    end, api.nvim_tabpage_list_wins(api.nvim_win_get_tabpage(closed)))
    if #pinned > 0 then
      vim.schedule(function()
        vim.tbl_map(restore, pinned)
      end)
    end
  end,
})

--- Whether the pair's windows are all the tab page shows (floats aside): after
--- `:only` in one of them, it fills the tab page.
local function alone(transcript, input)
  for _, win in ipairs(api.nvim_tabpage_list_wins(api.nvim_win_get_tabpage(transcript))) do
    if win ~= transcript and win ~= input and not is_float(win) then
      return false
    end
  end
  return true
end

--- Size the pair's windows for the editor's size now.
local function resize(chat, transcript, input)
  local o = config.options.chat
  if is_float(transcript) and is_float(input) then
    local boxes = { floats() }
    api.nvim_win_set_config(transcript, boxes[1])
    api.nvim_win_set_config(input, boxes[2])
    return
  end
  local width, height = dimensions()
  -- The input first: with its 'winfixheight' the transcript then grows into the
  -- other windows, not into the input.
  set_height(input, o.input_height)
  if chat.layout == "right" or chat.layout == "left" then
    api.nvim_win_set_width(transcript, width)
  elseif chat.layout == "bottom" and not alone(transcript, input) then
    set_height(transcript, math.max(1, height - o.input_height - 1))
  end
  remember(transcript)
  remember(input)
end

--- Keep the pair's size when other windows open, close or are equalized.
local function pin(chat, transcript, input)
  local side = chat.layout == "right" or chat.layout == "left"
  util.set_local(transcript, { winfixwidth = side, winfixheight = chat.layout == "bottom" })
  util.set_local(input, { winfixwidth = side, winfixheight = true })
  vim.w[transcript].acp_pinned, vim.w[input].acp_pinned = true, true
end

-- 'winfixwidth' and 'winfixheight' belong to the window, not to the buffer shown
-- in it: another buffer in a chat window unpins it, or it would keep the chat's
-- size (and be squashed first when the editor shrinks).
api.nvim_create_autocmd("BufWinEnter", {
  group = api.nvim_create_augroup("acp.layout.pins", { clear = true }),
  callback = function(ev)
    local win = api.nvim_get_current_win()
    if vim.w[win].acp_pinned and not vim.b[ev.buf].acp_chat then
      util.set_local(win, { winfixwidth = false, winfixheight = false })
      vim.w[win].acp_pinned = nil
    end
  end,
})

-- When the current window has scrolled, Neovim tells the UI by how many screen
-- rows (win_viewport's scroll_delta), counting each wrapped row since the last
-- redraw at which that window was current, or since line 1 for a window never
-- current at one: the first key into a transcript that grew from the input
-- window walked all of it (215-418 ms at 100k lines). A jump past the screen it
-- last reported is only approximated, so a window current once at a redraw, at
-- its top, costs a screen from then on (decision 0073).
---@param win integer a transcript window
local function measure_from_top(win)
  if vim.w[win].acp_measured_from_top then
    return
  end
  if #api.nvim_list_uis() == 0 then
    vim.w[win].acp_measure_with_a_ui = true -- nobody to tell yet: UIEnter does it
    return
  end
  vim.w[win].acp_measured_from_top, vim.w[win].acp_measure_with_a_ui = true, nil
  api.nvim_win_call(win, function()
    local view = vim.fn.winsaveview()
    api.nvim_win_set_cursor(win, { 1, 0 })
    vim.cmd.redraw()
    vim.fn.winrestview(view)
  end)
end

-- A chat shown while no UI was attached (a UI that attaches later, to a headless
-- or remote Neovim): measured once one is.
api.nvim_create_autocmd("UIEnter", {
  group = api.nvim_create_augroup("acp.layout.measure", { clear = true }),
  callback = vim.schedule_wrap(function()
    for _, win in ipairs(api.nvim_list_wins()) do
      if vim.w[win].acp_measure_with_a_ui then
        measure_from_top(win)
      end
    end
  end),
})

--- A new pair in the layout of the `chat.position` option.
local function open(chat)
  local o = config.options.chat
  chat.layout = o.position
  if o.position == "float" then
    local transcript_box, input_box = floats()
    local transcript = api.nvim_open_win(chat.transcript, false, transcript_box)
    return transcript, api.nvim_open_win(chat.input, true, input_box)
  end
  local transcript
  if o.position == "tab" then
    vim.cmd.tabnew()
    vim.bo.bufhidden = "wipe" -- the empty buffer of the new tab page
    transcript = api.nvim_get_current_win()
    api.nvim_win_set_buf(transcript, chat.transcript)
  else
    local width, height = dimensions()
    local side = ({ left = "left", bottom = "below" })[o.position] or "right"
    local box = { split = side, win = -1 }
    if side == "below" then
      box.height = height
    else
      box.width = width
    end
    transcript = api.nvim_open_win(chat.transcript, false, box)
  end
  return transcript, api.nvim_open_win(chat.input, true, { split = "below", win = transcript, height = o.input_height })
end

--- M.show's work: its windows made (or found), sized, the cursor in the input.
local function place(chat)
  local transcript, input = pair(chat, 0)
  if not (transcript or input) and chat.layout == "tab" then
    for _, tab in ipairs(api.nvim_list_tabpages()) do
      local other_transcript, other_input = pair(chat, tab)
      if other_transcript and other_input then
        api.nvim_set_current_win(other_input)
        return
      end
    end
  end
  local opened, whole = not transcript, transcript and input
  if not (transcript or input) then
    transcript, input = open(chat)
  elseif not input then
    local box = is_float(transcript) and select(2, floats())
      or { split = "below", win = transcript, height = config.options.chat.input_height }
    input = api.nvim_open_win(chat.input, true, box)
  elseif not transcript then
    local box = is_float(input) and floats() or { split = "above", win = input }
    transcript = api.nvim_open_win(chat.transcript, false, box)
  end
  chat.layout = chat.layout or config.options.chat.position
  if not whole then -- a pair shown whole keeps the sizes it has, maybe the user's
    pin(chat, transcript, input)
    resize(chat, transcript, input)
  end
  measure_from_top(transcript)
  if opened and chat.closed_at_end then
    -- It followed the transcript when it closed: what came since is what to see.
    api.nvim_win_set_cursor(transcript, { api.nvim_buf_line_count(chat.transcript), 0 })
  elseif opened and chat.closed_top then
    -- Else what was being read: Neovim brings the cursor back, but centred.
    api.nvim_win_call(transcript, function()
      vim.fn.winrestview({ topline = chat.closed_top })
    end)
  end
  api.nvim_set_current_win(input)
end

--- Show the chat and put the cursor in its input: complete a half shown alone in
--- the current tab page, else open it here (a chat in a tab page of its own:
--- go to that tab page). Where Neovim has no room for both windows (E36, a
--- short editor), none is left open: half a pair would be a transcript without
--- its input, and the user is told in one line what to do.
function M.show(chat)
  local wins, tabs = api.nvim_list_wins(), api.nvim_list_tabpages()
  local ok, err = pcall(place, chat)
  if ok then
    return
  end
  if type(err) ~= "string" or not err:find("E36:", 1, true) then
    error(err, 0)
  end
  for _, buf in ipairs({ chat.transcript, chat.input }) do
    for _, win in ipairs(vim.fn.win_findbuf(buf)) do
      if not vim.tbl_contains(wins, win) then
        util.close_window(win)
      end
    end
  end
  for _, tab in ipairs(api.nvim_list_tabpages()) do -- `tab`'s, made before its windows
    if not vim.tbl_contains(tabs, tab) then
      vim.cmd.tabclose(api.nvim_tabpage_get_number(tab))
    end
  end
  util.user_error("no room for the chat's windows (E36): close a window or enlarge Neovim, then :AcpChat")
end

--- Whether one more pair fits beside those the tab page shows: in its own tab page,
--- or at the side with 20 columns left for the rest (a window squeezed to nothing
--- is of no use: a third chat took a first one's window down to one column).
function M.room_beside()
  local position = config.options.chat.position
  if position == "tab" then
    return true
  end
  local shown = 0
  for _, win in ipairs(api.nvim_tabpage_list_wins(0)) do
    if vim.startswith(api.nvim_buf_get_name(api.nvim_win_get_buf(win)), "acp://chat/") then
      shown = shown + 1
    end
  end
  local width = dimensions()
  return (position == "right" or position == "left") and vim.o.columns - (shown + 1) * (width + 1) >= 20
end

--- A new session takes over the windows that show chat `old` in the current tab
--- page (in any, for a chat in a tab page of its own); false when none do. Another
--- tab page's stay `old`'s: :AcpChat! in a second tab page replaced the first tab
--- page's chat too, leaving two tab pages showing the new one.
function M.take_over(old, chat)
  chat.layout = old.layout
  local here = api.nvim_get_current_tabpage()
  local shown = false
  for _, swap in ipairs({ { old.transcript, chat.transcript }, { old.input, chat.input } }) do
    for _, win in ipairs(vim.fn.win_findbuf(swap[1])) do
      if old.layout == "tab" or api.nvim_win_get_tabpage(win) == here then
        api.nvim_win_set_buf(win, swap[2])
        shown = true
      end
    end
  end
  if shown then
    M.show(chat)
  end
  return shown
end

--- Whether the current tab page shows the chat (or half of it).
function M.shown(chat)
  local transcript, input = pair(chat, 0)
  return (transcript or input) ~= nil
end

--- Close the chat's windows in every tab page; its buffers stay.
function M.hide(chat)
  for _, buf in ipairs({ chat.transcript, chat.input }) do
    for _, win in ipairs(vim.fn.win_findbuf(buf)) do
      util.close_window(win)
    end
  end
end

--- The one window of the pair tab page `tab` shows, when it shows half of it.
local function half(chat, tab)
  local transcript, input = pair(chat, tab)
  if (transcript == nil) ~= (input == nil) then
    return transcript or input
  end
end

--- After a window of the pair closed in tab page `tab`: the other half closes too
--- (`:q`, `:close` or `q` in one closes both), unless it is the current window and
--- the closed one was not (`:only` in it): then the pair is made whole around it.
--- CTRL-W T in one half makes a window in a new tab page and closes the one it
--- left: there the other half joins it, as the pair moved together.
---@param closed_current boolean the closed window was the current one
function M.rejoin(chat, tab, closed_current)
  local alone = api.nvim_tabpage_is_valid(tab) and half(chat, tab)
  if alone and not closed_current and alone == api.nvim_get_current_win() then
    return M.show(chat)
  elseif alone then
    -- From inside its tab page: after CTRL-W T in a float, closing the other float
    -- from the new tab page, then splitting there, crashed Neovim 0.11.
    api.nvim_win_call(alone, function()
      util.close_window(alone)
    end)
  end
  if tab ~= api.nvim_get_current_tabpage() and half(chat, 0) == api.nvim_get_current_win() then
    M.show(chat)
  end
end

--- VimResized: size every shown pair for the editor's new size.
---@param chats table<integer, acp.Chat>
function M.resize(chats)
  for _, chat in pairs(chats) do
    for _, tab in ipairs(api.nvim_list_tabpages()) do
      local transcript, input = pair(chat, tab)
      if transcript and input then
        resize(chat, transcript, input)
      end
    end
  end
end

return M
