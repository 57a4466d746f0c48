-- Benchmark probes inside the benchmarked Neovim, and the Lua floor client.
-- Every probe reports to the driver with rpcnotify(chan, "bench", tag, ...),
-- timestamps from vim.uv.hrtime() (CLOCK_MONOTONIC, the agent's clock too).
local api = vim.api
local M = {}

local function report(chan, tag, ...)
  local args = { ... }
  vim.schedule(function()
    vim.rpcnotify(chan, "bench", tag, unpack(args))
  end)
end

--- Report `tag` with the time `needle` first appears in the last lines of `buf`.
--- Checked on every change of the buffer (nvim_buf_attach on_bytes), so the time
--- is that of the edit that made the text complete.
function M.watch(buf, needle, chan, tag, timeout_ms)
  local done = false
  api.nvim_buf_attach(buf, false, {
    on_bytes = function()
      if done then
        return true
      end
      local count = api.nvim_buf_line_count(buf)
      for _, text in ipairs(api.nvim_buf_get_lines(buf, math.max(0, count - 6), count, false)) do
        if text:find(needle, 1, true) then
          done = true
          report(chan, tag, vim.uv.hrtime())
          return true
        end
      end
    end,
  })
  vim.defer_fn(function()
    if not done then
      done = true
      report(chan, tag, vim.NIL, "timeout")
    end
  end, timeout_ms or 120000)
end

--- Report `tag` with the time `buf` first holds `rows` lines (a screen of a reopened chat).
function M.rows(buf, rows, chan, tag)
  api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if api.nvim_buf_line_count(buf) >= rows then
        report(chan, tag, vim.uv.hrtime())
        return true
      end
    end,
  })
end

--- Wake the driver after `ms` (its wait for a notification has no timeout).
function M.tick(chan, ms)
  vim.defer_fn(function()
    vim.rpcnotify(chan, "bench", "tick")
  end, ms)
end

--- CPU time Neovim has used (ns): user and system, all its threads. os.clock() is
--- C's clock(), CLOCK_PROCESS_CPUTIME_ID in glibc (µs steps, as getrusage's): a
--- number, where vim.uv.getrusage() built a table of 18 fields at each of the loop
--- prober's two reads per loop turn, garbage no user's Neovim makes.
local function cpu_ns()
  return os.clock() * 1e9
end

--- CPU time Neovim has used so far (ns), for the driver.
function M.cpu_used()
  return cpu_ns()
end

--- The terminal floor: the shell line `line` in a hidden terminal buffer, as an
--- agent's command runs but with nothing of ours around it (no wrapper, no output
--- callback). Reports `terminal_floor` with its start and exit (hrtime) and
--- Neovim's CPU time in between (ns).
function M.terminal_floor(line, chan)
  local buf = api.nvim_create_buf(false, true)
  local start, used = vim.uv.hrtime(), cpu_ns()
  api.nvim_buf_call(buf, function()
    vim.fn.jobstart(line, {
      term = true,
      on_exit = function()
        report(chan, "terminal_floor", start, vim.uv.hrtime(), cpu_ns() - used)
      end,
    })
  end)
end

--- Neovim's busy stretches from now on: from libuv's poll returning (a check
--- handle) to the next poll (a prepare handle), i.e. the work of one turn of the
--- event loop (requests, callbacks, the redraw). M.stretches holds each over 0.1 ms
--- as {start, length} (ns); with `cpu`, every turn's start and CPU time used (ns)
--- go in two flat arrays, reused (no table per turn), until M.cpu_between takes them.
local turns = { count = 0, woke = {}, cpu = {} }
function M.busy(cpu)
  local woke, used = nil, nil
  M.stretches = {}
  vim.uv.new_check():start(function()
    woke, used = vim.uv.hrtime(), cpu and cpu_ns()
  end)
  vim.uv.new_prepare():start(function()
    if woke then
      local took = vim.uv.hrtime() - woke
      if took > 100000 then
        table.insert(M.stretches, { woke, took })
      end
      if cpu then
        local count = turns.count + 1
        turns.count, turns.woke[count], turns.cpu[count] = count, woke, cpu_ns() - used
      end
      woke = nil
    end
  end)
end

--- The CPU time (ns) of the loop turns M.busy saw start in [from, to); forgets
--- every turn seen so far.
function M.cpu_between(from, to)
  local sum = 0
  for i = 1, turns.count do
    if turns.woke[i] >= from and turns.woke[i] < to then
      sum = sum + turns.cpu[i]
    end
  end
  turns.count = 0
  return sum
end

--- Report every AcpTurnEnd and AcpSessionReady (with its time) to the driver.
function M.events(chan)
  api.nvim_create_autocmd("User", {
    pattern = { "AcpTurnEnd", "AcpSessionReady", "AcpError", "AcpPermissionRequest" },
    callback = function(ev)
      report(chan, ev.match, vim.uv.hrtime(), ev.data)
    end,
  })
end

--- Keep the windows of `buf` at its last line, as a transcript follows its stream.
local function follow(buf)
  local last = api.nvim_buf_line_count(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    api.nvim_win_set_cursor(win, { last, 0 })
  end
end

--- Append `texts` (joined) at the end of `buf`, one nvim_buf_set_text.
local function append(buf, texts)
  local lines = vim.split(table.concat(texts), "\n", { plain = true })
  local row = api.nvim_buf_line_count(buf) - 1
  local col = #api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  api.nvim_buf_set_text(buf, row, col, row, col, lines)
  follow(buf)
end

--- A buffer in a window of its own, shown like a transcript.
local function floor_buffer()
  vim.cmd("botright 80vsplit")
  local buf = api.nvim_create_buf(false, true)
  api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = true
  return buf
end

--- What every floor does with one decoded message: collect a chunk's text, answer
--- the handshake (`agent.send`), then `on.session(id)` once the session is there
--- and `on.answer()` at a prompt's answer.
local function floor_message(msg, texts, agent, cwd, on)
  if msg.method == "session/update" then
    if msg.params.update.sessionUpdate == "agent_message_chunk" then
      texts[#texts + 1] = msg.params.update.content.text
    end
  elseif msg.id == 1 then
    agent.send(2, "session/new", { cwd = cwd, mcpServers = {} })
  elseif msg.id == 2 then
    on.session(msg.result.sessionId)
  elseif not msg.method then
    on.answer()
  end
end

--- floor_message's `on` for a floor that sends `prompt` as soon as its session is
--- there and stops `agent` at its answer.
local function one_prompt(agent, prompt, chan)
  return {
    session = function(session)
      agent.send(3, "session/prompt", { sessionId = session, prompt = { { type = "text", text = prompt } } })
    end,
    answer = function()
      agent.stop()
      report(chan, "floor_end", vim.uv.hrtime())
    end,
  }
end

--- The weak floor (the one of the first rounds): the agent read with jobstart,
--- each line decoded with vim.json.decode, the text of all chunks of one on_stdout
--- callback appended with one nvim_buf_set_text.
function M.floor(cmd, prompt, chan)
  local buf = floor_buffer()
  local cwd = vim.fn.getcwd()
  local job
  local partial = ""
  local function send(id, method, params)
    vim.fn.chansend(job, vim.json.encode({ jsonrpc = "2.0", id = id, method = method, params = params }) .. "\n")
  end
  local function stop()
    vim.fn.jobstop(job)
  end
  local agent = { send = send, stop = stop }
  local on = one_prompt(agent, prompt, chan)
  job = vim.fn.jobstart(cmd, {
    on_stdout = function(_, data)
      data[1] = partial .. data[1]
      partial = table.remove(data)
      local texts = {}
      for _, line in ipairs(data) do
        floor_message(vim.json.decode(line), texts, agent, cwd, on)
      end
      if #texts > 0 then
        append(buf, texts)
      end
    end,
  })
  send(1, "initialize", { protocolVersion = 1, clientCapabilities = vim.empty_dict() })
  return buf
end

--- Start `cmd` the strong floor's way: vim.system with a stdout callback (on
--- libuv's read, no job layer), the lines split and each decoded with
--- vim.json.decode in that callback, `on_message(msg, texts)` for each, then one
--- scheduled nvim_buf_set_text of the texts it collected into `buf` per read.
--- Returns send(id, method, params) and stop().
local function strong_agent(cmd, cwd, buf, on_message)
  local proc
  local partial = ""
  local function send(id, method, params)
    proc:write(vim.json.encode({ jsonrpc = "2.0", id = id, method = method, params = params }) .. "\n")
  end
  local function stop()
    proc:kill("sigterm")
  end
  proc = vim.system(cmd, {
    cwd = cwd,
    stdin = true,
    stdout = function(_, data)
      if not data then
        return
      end
      local texts = {}
      local start = 1
      while true do
        local nl = data:find("\n", start, true)
        if not nl then
          break
        end
        local line = data:sub(start, nl - 1)
        if start == 1 and partial ~= "" then
          line, partial = partial .. line, ""
        end
        on_message(vim.json.decode(line), texts)
        start = nl + 1
      end
      partial = partial .. data:sub(start)
      if #texts > 0 then
        vim.schedule(function()
          append(buf, texts)
        end)
      end
    end,
  })
  send(1, "initialize", { protocolVersion = 1, clientCapabilities = vim.empty_dict() })
  return send, stop
end

--- The strong floor, the best a Lua client can do (strong_agent), sending `prompt`
--- as soon as its session is there.
function M.strong_floor(cmd, prompt, chan)
  local buf = floor_buffer()
  local cwd = vim.fn.getcwd()
  local agent = {}
  local on = one_prompt(agent, prompt, chan)
  agent.send, agent.stop = strong_agent(cmd, cwd, buf, function(msg, texts)
    floor_message(msg, texts, agent, cwd, on)
  end)
  return buf
end

--- The strong floor as a chat in `cwd`: "floor_ready" once its session is there,
--- then M.floor_send(text) sends a prompt the way a client does (the prompt drawn
--- in its buffer, the request written) and returns when it began; "floor_end" at
--- each prompt's answer.
function M.floor_chat(cmd, cwd, chan)
  local buf = floor_buffer()
  local session
  local sent = 2
  local agent = {}
  local on = {
    session = function(id)
      session = id
      report(chan, "floor_ready", vim.uv.hrtime())
    end,
    answer = function()
      report(chan, "floor_end", vim.uv.hrtime())
    end,
  }
  agent.send, agent.stop = strong_agent(cmd, cwd, buf, function(msg, texts)
    floor_message(msg, texts, agent, cwd, on)
  end)
  function M.floor_send(text)
    local start = vim.uv.hrtime()
    append(buf, { "\n\n" .. text .. "\n\n" })
    sent = sent + 1
    agent.send(sent, "session/prompt", { sessionId = session, prompt = { { type = "text", text = text } } })
    return start
  end
  return buf
end

--- Send `text` in `ms`, as a key typed then would: in chat `chat` (a chat id), or
--- through the strong floor (chat nil or vim.NIL, as Python's None arrives). When it
--- was sent is M.sent. The driver then waits in a blocking read, so its own work is
--- not in the cores' way (its reading of an RPC answer, ~1 ms of Python, would fall
--- in the turn start measured).
function M.send_later(ms, text, chat)
  vim.defer_fn(function()
    M.sent = vim.uv.hrtime()
    if chat and chat ~= vim.NIL then
      require("acp.chat").send(require("acp.chat.registry").chats[chat], text)
    else
      M.floor_send(text)
    end
  end, ms)
end

--- `:AcpChat` timed from the command to AcpSessionReady.
function M.startup(chan, agent)
  local start = vim.uv.hrtime()
  api.nvim_create_autocmd("User", {
    pattern = "AcpSessionReady",
    once = true,
    callback = function()
      report(chan, "startup", vim.uv.hrtime() - start)
    end,
  })
  vim.cmd("AcpChat " .. agent)
end

--- Time each batch the host applies (vim.uv.hrtime around acp.host.apply) and, in
--- it, the marks of agent hunks (acp.review.hunks.draw) and the previews of pending
--- permission prompts (acp.review.preview.sync with prompts) drawn; report the batches
--- that drew either: "batch", total, marks, preview (ns). M.answer() answers the
--- last permission request.
function M.batches(chan)
  local host, hunks, preview = require("acp.host"), require("acp.review.hunks"), require("acp.review.preview")
  local parts = {}
  local function timed(module, name, counts)
    local inner = module[name]
    module[name] = function(...)
      local start = vim.uv.hrtime()
      inner(...)
      if counts(...) then
        parts[name] = (parts[name] or 0) + vim.uv.hrtime() - start
      end
    end
  end
  timed(hunks, "draw", function()
    return true
  end)
  timed(preview, "sync", function(_, entries)
    return #entries > 0
  end)
  local apply = host.apply
  host.apply = function(batch)
    parts = {}
    local start = vim.uv.hrtime()
    apply(batch)
    local total = vim.uv.hrtime() - start
    if parts.draw or parts.sync then
      report(chan, "batch", total, parts.draw or 0, parts.sync or 0)
    end
  end
  api.nvim_create_autocmd("User", {
    pattern = "AcpPermissionRequest",
    callback = function(ev)
      M.request = ev.data
    end,
  })
end

--- Time every batch the host applies (vim.uv.hrtime around acp.host.apply, and
--- the CPU time Neovim used meanwhile: a batch's wall time also holds the time
--- another process had Neovim's core): M.applied() returns {wall, cpu} of each (ns)
--- since the last call, and forgets them.
function M.time_batches()
  local host = require("acp.host")
  local apply = host.apply
  M.durations = {}
  host.apply = function(batch)
    local start, used = vim.uv.hrtime(), cpu_ns()
    apply(batch)
    table.insert(M.durations, { vim.uv.hrtime() - start, cpu_ns() - used })
  end
end

function M.applied()
  local taken = M.durations
  M.durations = {}
  return taken
end

--- Answer the last permission request with its first option.
function M.answer()
  local request = M.request
  require("acp.host").notify("answer", { chat = request.chat, request = request.request, option = request.options[1].id })
end

local typing

--- Change line 10 of the buffers of `paths` every `ms` (an empty list stops it),
--- as a user typing while the agent reads.
function M.typist(paths, ms)
  if typing then
    typing:stop()
    typing:close()
    typing = nil
  end
  if #paths == 0 then
    return
  end
  local count = 0
  typing = vim.uv.new_timer()
  typing:start(ms, ms, vim.schedule_wrap(function()
    count = count + 1
    for _, path in ipairs(paths) do
      local buf = vim.fn.bufnr(path)
      vim.api.nvim_buf_set_lines(buf, 9, 10, false, { ("typed = %d"):format(count) })
    end
  end))
end

--- Neovim's work for `keys` typed in window `win`, the redraw the UI gets for them
--- included: each key of `keys` (a list) is fed, executed and drawn on its own;
--- returns the nanoseconds of each. With `insert`, each key is typed in Insert mode
--- entered for it and left after it ("a", the key, <Esc>: an upper bound of a key
--- typed in Insert mode, as feedkeys cannot return while Insert mode goes on).
function M.keys(win, keys, insert)
  api.nvim_set_current_win(win)
  local took = {}
  for _, key in ipairs(keys) do
    local codes = api.nvim_replace_termcodes(insert and ("a" .. key .. "<Esc>") or key, true, false, true)
    local start = vim.uv.hrtime()
    api.nvim_feedkeys(codes, "xt", false)
    vim.cmd("redraw")
    table.insert(took, vim.uv.hrtime() - start)
  end
  return took
end

return M
