-- Minimal init for the headless test Neovim: only this plugin, events recorded.
local root = vim.env.ACP_TEST_ROOT
vim.opt.runtimepath:prepend(root)
vim.opt.swapfile = false
vim.cmd("runtime plugin/acp.lua")
dofile(root .. "/tests/nvim/events.lua")
