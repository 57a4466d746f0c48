-- :AcpPaste: an image from the clipboard, through the first clipboard tool there
-- is (wl-paste on Wayland, xclip on X11, pngpaste on macOS), saved under
-- stdpath("cache")/acp/ and mentioned in the chat's input: it goes with the next
-- prompt like any @image (to an agent that takes images), shown by name and size.
if jit then jit.off(true, true) end -- decision 0068
local context = require("acp.chat.context")
local registry = require("acp.chat.registry")
local util = require("acp.util")
local workspace = require("acp.chat.workspace")

local M = {}

-- Each tool with the argv that prints the clipboard's PNG image.
local TOOLS = {
  { "wl-paste", { "wl-paste", "--no-newline", "--type", "image/png" } },
  { "xclip", { "xclip", "-selection", "clipboard", "-target", "image/png", "-out" } },
  { "pngpaste", { "pngpaste", "-" } },
}

local PNG = "\137PNG\r\n\26\n"

local function tool()
  for _, entry in ipairs(TOOLS) do
    if vim.fn.executable(entry[1]) == 1 then
      return entry
    end
  end
end

--- Save the clipboard's image and mention it in the current chat's input.
function M.paste()
  local chat = registry.get()
  if not chat then
    util.user_error("no chat is open (:AcpChat)")
  end
  local found = tool()
  if not found then
    util.notify("no clipboard tool for images: install wl-paste (Wayland), xclip (X11) or pngpaste (macOS)", "warn")
    return
  end
  vim.system(found[2], { text = false }, function(result)
    vim.schedule(function()
      local data = result.stdout or ""
      if result.code ~= 0 or data:sub(1, #PNG) ~= PNG then
        local why = vim.trim(result.stderr or "")
        util.notify(("the clipboard holds no image (%s%s)"):format(found[1], why ~= "" and ": " .. why or ""), "warn")
        return
      end
      local dir = vim.fn.stdpath("cache") .. "/acp"
      vim.fn.mkdir(dir, "p")
      local path = ("%s/clipboard-%s-%d.png"):format(dir, os.date("%Y%m%d-%H%M%S"), vim.uv.hrtime() % 1000)
      local file, err = io.open(path, "wb")
      if not file then
        util.notify(("cannot save the clipboard's image: %s"):format(err), "error")
        return
      end
      file:write(data)
      file:close()
      if registry.valid(chat) then
        context.insert(chat, "@" .. workspace.mention(chat, path) .. " ")
      end
    end)
  end)
end

return M
