-- The first screen of a new chat: what to type and where help is, as virtual lines
-- over the empty transcript (never transcript text: the history, a copy or an export
-- of the chat holds none of it). The first block drawn takes it away.
local config = require("acp.config")

local M = {}
local api = vim.api
local ns = api.nvim_create_namespace("acp.first_screen")

--- The keys that send the input, as the user set them (an empty list: none).
local function send_keys()
  local keys = { "<CR> (Normal mode)" }
  local insert = config.options.chat.send_key
  if insert ~= "" then
    table.insert(keys, insert .. " (Insert mode too)")
  end
  return keys
end

--- The hint's lines, each a list of {text, highlight} chunks.
local function lines()
  local function line(...)
    local chunks = {}
    for _, text in ipairs({ ... }) do
      table.insert(chunks, { text, "AcpHint" })
    end
    return chunks
  end
  return {
    line("Type your prompt in the input below; send it with " .. table.concat(send_keys(), " or ") .. "."),
    line("@ attaches a file, a buffer, the selection, diagnostics… (completion offers them)."),
    line("/ runs one of the agent's commands; q hides the chat, <C-c> cancels a turn."),
    line(":help acp for everything else."),
  }
end

--- Show the hint over `chat`'s empty transcript.
---@param chat acp.Chat
function M.show(chat)
  api.nvim_buf_set_extmark(chat.transcript, ns, 0, 0, { virt_lines = lines(), virt_lines_above = false })
end

--- Take the hint away (the transcript has its first block).
---@param chat acp.Chat
function M.clear(chat)
  api.nvim_buf_clear_namespace(chat.transcript, ns, 0, -1)
end

return M
