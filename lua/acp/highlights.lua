-- Highlight groups: one list that nvim_set_hl and the doc generator both read.
local M = {}

-- { name, default link, description }
M.groups = {
  { "AcpUserHeader", "Title", "Header of the user's messages" },
  { "AcpAgentHeader", "Title", "Header of the agent's messages" },
  { "AcpThoughtHeader", "Comment", "Header of the agent's thoughts" },
  { "AcpThought", "Comment", "The agent's thoughts" },
  { "AcpToolHeader", "Function", "Title of a tool call" },
  { "AcpToolPending", "NonText", "Tool call status: pending" },
  { "AcpToolRunning", "DiagnosticInfo", "Tool call status: in progress" },
  { "AcpToolCompleted", "DiagnosticOk", "Tool call status: completed" },
  { "AcpToolFailed", "DiagnosticError", "Tool call status: failed" },
  { "AcpToolCancelled", "DiagnosticWarn", "Tool call status: cancelled" },
  { "AcpPlanHeader", "Title", "Header of the agent's plan" },
  { "AcpTurnEnd", "NonText", "The line that ends a turn, with its stop reason" },
  { "AcpError", "ErrorMsg", "Errors shown in the chat" },
  { "AcpInfo", "Comment", "Notices from acp.nvim in the chat" },
}

function M.setup()
  for _, group in ipairs(M.groups) do
    vim.api.nvim_set_hl(0, group[1], { link = group[2], default = true })
  end
end

return M
