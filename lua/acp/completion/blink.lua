-- A blink.cmp source for the chat input (optional): the same slash commands and
-- `@` context as the built-in completion (acp.chat.complete). In your blink.cmp spec:
--   sources = { per_filetype = { markdown = { inherit_defaults = true, "acp" } },
--               providers = { acp = { name = "acp", module = "acp.completion.blink" } } }
if jit then jit.off(true, true) end -- decision 0068
local complete = require("acp.chat.complete")
local registry = require("acp.chat.registry")

local source = {}

function source.new()
  return setmetatable({}, { __index = source })
end

function source:enabled()
  return registry.of_buffer(vim.api.nvim_get_current_buf()) ~= nil
end

function source:get_trigger_characters()
  return { "/", "@" }
end

function source:get_completions(ctx, callback)
  local chat = registry.of_buffer(ctx.bufnr)
  local before = ctx.line:sub(1, ctx.cursor[2])
  local start, word = complete.word_before(before)
  if not chat or not start then
    callback({ items = {}, is_incomplete_forward = false, is_incomplete_backward = false })
    return
  end
  local items = {}
  local found, incomplete = complete.items(chat, word)
  for _, item in ipairs(found) do
    table.insert(items, {
      label = item.word,
      labelDetails = { description = item.menu },
      documentation = item.info ~= "" and item.info or nil,
      textEdit = {
        newText = item.word,
        range = {
          start = { line = ctx.cursor[1] - 1, character = start - 1 },
          ["end"] = { line = ctx.cursor[1] - 1, character = ctx.cursor[2] },
        },
      },
    })
  end
  -- Incomplete: the files are still being listed, or more match than were given.
  callback({ items = items, is_incomplete_forward = incomplete, is_incomplete_backward = incomplete })
end

return source
