-- Records what a user would see but a headless Neovim cannot show: events, notices.
_G.acp_events = {}
vim.api.nvim_create_autocmd("User", {
  pattern = {
    "AcpSessionReady", "AcpTurnStart", "AcpTurnEnd", "AcpToolCall", "AcpChangesRecorded",
    "AcpQueued", "AcpError", "AcpPermissionRequest", "AcpSessionDeleted",
  },
  callback = function(ev)
    table.insert(_G.acp_events, { name = ev.match, data = ev.data })
  end,
})

_G.acp_notices = {}
vim.notify = function(msg, level)
  table.insert(_G.acp_notices, { msg = msg, level = level })
end
