-- Highlight groups: one list that nvim_set_hl and the doc generator both read.
if jit then jit.off(true, true) end -- decision 0068
local M = {}

-- { name, default link, description }
M.groups = {
  { "AcpUserHeader", "Title", "Header of the user's messages" },
  { "AcpAgentHeader", "Title", "Header of the agent's messages" },
  { "AcpThoughtHeader", "Comment", "Header of the agent's thoughts" },
  { "AcpThought", "Comment", "The agent's thoughts" },
  { "AcpHint", "Comment", "What a new chat's empty transcript says to type; an edit in the input" },
  { "AcpToolHeader", "Function", "Title of a tool call" },
  { "AcpToolPending", "NonText", "Tool call status: pending" },
  { "AcpToolRunning", "DiagnosticInfo", "Tool call status: in progress" },
  { "AcpToolCompleted", "DiagnosticOk", "Tool call status: completed" },
  { "AcpToolFailed", "DiagnosticError", "Tool call status: failed" },
  { "AcpToolCancelled", "DiagnosticWarn", "Tool call status: cancelled" },
  { "AcpDiffAdd", "DiffAdd", "Added lines of a diff in a tool call" },
  { "AcpDiffDelete", "DiffDelete", "Removed lines of a diff in a tool call" },
  { "AcpDiffHunk", "Statement", "The @@ line that starts a hunk of a diff" },
  { "AcpLocation", "Directory", "A file location of a tool call (<CR> opens it)" },
  { "AcpPermission", "DiagnosticWarn", "The question of a pending permission prompt" },
  { "AcpPermissionKey", "Special", "The key that picks an option of a permission prompt" },
  { "AcpPermissionAnswer", "Comment", "The answer a permission prompt got" },
  { "AcpReviewAdd", "DiffAdd", "Lines the agent added or changed, until reviewed" },
  { "AcpReviewDelete", "DiffDelete", "Lines the agent removed, until reviewed" },
  { "AcpReviewConflict", "DiffText", "Lines where the agent's write clashed with your edit" },
  { "AcpReviewSignAdd", "Added", "Sign of lines the agent added" },
  { "AcpReviewSignChange", "Changed", "Sign of lines the agent changed" },
  { "AcpReviewSignDelete", "Removed", "Sign where the agent removed lines" },
  { "AcpReviewSignConflict", "DiagnosticWarn", "Sign of a conflict with your edit" },
  { "AcpReviewFile", "Title", "A turn or file header in the review buffer" },
  { "AcpReviewHunk", "Statement", "A hunk header in the review buffer" },
  { "AcpReviewDecided", "Comment", "Accepted or rejected hunks in the review buffer" },
  { "AcpPlanHeader", "Title", "Header of the agent's plan" },
  { "AcpTurnEnd", "NonText", "The line that ends a turn, with its stop reason" },
  { "AcpError", "ErrorMsg", "Errors shown in the chat" },
  { "AcpInfo", "Comment", "Notices from acp.nvim in the chat" },
  { "AcpQueued", "Comment", "Prompts waiting to be sent, under the transcript" },
}

local function apply()
  for _, group in ipairs(M.groups) do
    vim.api.nvim_set_hl(0, group[1], { link = group[2], default = true })
  end
end

--- Define the groups, and again after each colorscheme (its `:hi clear` resets
--- them); `default` lets what the colorscheme or the user sets win.
function M.setup()
  apply()
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = vim.api.nvim_create_augroup("acp.highlights", { clear = true }),
    callback = apply,
  })
end

return M
