-- An nvim-cmp source for the chat input (optional): the same slash commands and
-- `@` context as the built-in completion (acp.chat.complete). Register it:
--   require("cmp").register_source("acp", require("acp.completion.cmp").new())
-- and add { name = "acp" } to the sources of the markdown filetype.
if jit then jit.off(true, true) end -- decision 0068
local complete = require("acp.chat.complete")
local registry = require("acp.chat.registry")

local source = {}

function source.new()
  return setmetatable({}, { __index = source })
end

function source:is_available()
  return registry.of_buffer(vim.api.nvim_get_current_buf()) ~= nil
end

function source:get_trigger_characters()
  return { "/", "@" }
end

function source:get_keyword_pattern()
  return [[[@/]\%(\\ \|\S\)*]] -- an escaped space (`@my\ docs/`) goes on
end

function source:complete(params, callback)
  local chat = registry.of_buffer(vim.api.nvim_get_current_buf())
  local _, word = complete.word_before(params.context.cursor_before_line)
  if not chat or not word then
    callback({ items = {}, isIncomplete = false })
    return
  end
  local items = {}
  local found, incomplete = complete.items(chat, word)
  for _, item in ipairs(found) do
    table.insert(items, {
      label = item.word,
      detail = item.menu,
      documentation = item.info ~= "" and item.info or nil,
    })
  end
  -- Incomplete: the files are still being listed, or more match than were given.
  callback({ items = items, isIncomplete = incomplete })
end

return source
