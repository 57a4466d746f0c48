-- :AcpPermission list|forget: the permission answers given "always", which the
-- Python side keeps per project across restarts (acp_nvim/client/services/grants.py).
if jit then jit.off(true, true) end -- decision 0068
local host = require("acp.host")
local util = require("acp.util")

local M = {}

local ANSWERS = { allow_always = "allow", reject_always = "reject" }

---@param grant {project: string, agent: string, kind: string, answer: string}
local function describe(grant)
  return ("%s `%s` for %s in %s"):format(ANSWERS[grant.answer] or grant.answer, grant.kind, grant.agent, vim.fn.fnamemodify(grant.project, ":~"))
end

--- The remembered answers; none says so.
local function remembered()
  local grants = host.request("permissions", {})
  if #grants == 0 then
    util.notify("no permission answer is remembered", "info")
  end
  return grants
end

--- Show the remembered answers.
function M.list()
  local grants = remembered()
  if #grants > 0 then
    util.notify("remembered permission answers:\n" .. table.concat(vim.tbl_map(describe, grants), "\n"), "info")
  end
end

--- Pick a remembered answer and revoke it: its tool calls are asked again.
function M.forget()
  local grants = remembered()
  if #grants == 0 then
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
