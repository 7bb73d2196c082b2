--- Lets a plugin manager install Seam's Neovim plugin from the repository as it is: the plugin
--- lives in editors/nvim, and this file (sourced when Neovim loads the repository as a plugin)
--- puts that folder on 'runtimepath' and loads its plugin/seam.lua. lua/seam/init.lua at the
--- root does the same for `require("seam")`, which a config may call before this file runs.

local here = debug.getinfo(1, "S").source:sub(2)
local plugin = vim.fs.joinpath(vim.fs.dirname(vim.fs.dirname(vim.fs.abspath(here))), "editors", "nvim")
if not vim.tbl_contains(vim.opt.runtimepath:get(), plugin) then
  vim.opt.runtimepath:append(plugin)
end
dofile(vim.fs.joinpath(plugin, "plugin", "seam.lua"))
