-- :AcpPermission list|forget: the permission answers given "always", which the
-- Python side keeps per project across restarts (acp_nvim/client/services/grants.py).
local host = require("acp.host")
local util = require("acp.util")

local M = {}

local ANSWERS = { allow_always = "allow", reject_always = "reject" }

---@param grant {project: string, agent: string, kind: string, answer: string}
local function describe(grant)
  return ("%s `%s` for %s in %s"):format(ANSWERS[grant.answer] or grant.answer, grant.kind, grant.agent, vim.fn.fnamemodify(grant.project, ":~"))
end

--- Show the remembered answers.
function M.list()
  local grants = host.request("permissions", {})
  if #grants == 0 then
    util.notify("no permission answer is remembered", "info")
    return
  end
  util.notify("remembered permission answers:\n" .. table.concat(vim.tbl_map(describe, grants), "\n"), "info")
end

--- Pick a remembered answer and revoke it: its tool calls are asked again.
function M.forget()
  local grants = host.request("permissions", {})
  if #grants == 0 then
    util.notify("no permission answer is remembered", "info")
    return
  end
  vim.ui.select(grants, { prompt = "Forget which answer", format_item = describe }, function(grant)
    if grant then
      host.request("permissions", { forget = grant })
      util.notify("forgot: " .. describe(grant), "info")
    end
  end)
end

return M
