--- `require("seam")` for a plugin manager that installed the repository as it is: the plugin
--- lives in editors/nvim, so this puts that folder on 'runtimepath' (where `seam.health`,
--- plugin/seam.lua and doc/seam.txt are then found) and returns its module.

local here = debug.getinfo(1, "S").source:sub(2)
local root = vim.fs.dirname(vim.fs.dirname(vim.fs.dirname(vim.fs.abspath(here))))
local plugin = vim.fs.joinpath(root, "editors", "nvim")
if not vim.tbl_contains(vim.opt.runtimepath:get(), plugin) then
  vim.opt.runtimepath:append(plugin)
end
return dofile(vim.fs.joinpath(plugin, "lua", "seam", "init.lua"))
