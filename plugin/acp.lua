-- acp.nvim user commands. Bodies `require` on call, so start-up costs nothing.
if vim.g.loaded_acp then
  return
end
vim.g.loaded_acp = true

local function acp()
  return require("acp")
end

local command = vim.api.nvim_create_user_command

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
command("AcpSend", function(args)
  acp().send(args.args)
end, { nargs = "+", desc = "Send a message to the agent" })
command("AcpCancel", function()
  acp().cancel()
end, { desc = "Cancel the agent's current turn" })
command("AcpClose", function()
  acp().close()
end, { desc = "Close the chat and stop its agent" })
command("AcpLog", function()
  require("acp.log").open()
end, { desc = "Show the protocol log" })
