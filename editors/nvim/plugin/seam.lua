--- Seam's commands and <Plug> keys, defined when Neovim loads its plugins, before (and without)
--- `require("seam").setup()`: `:SeamStatus` and `:SeamToggle` exist as soon as the plugin is
--- installed, and `:help seam` says how to set it up. The module itself (lua/seam/init.lua)
--- loads only when one of them is used or `setup()` is called.

if vim.g.loaded_seam then
  return
end
vim.g.loaded_seam = true

local function seam()
  return require("seam")
end

vim.api.nvim_create_user_command("SeamStatus", function()
  seam().show_status()
end, { desc = "Show the Seam server's model state" })

vim.api.nvim_create_user_command("SeamToggle", function()
  if not seam().supported() then
    vim.notify("seam.nvim needs Neovim 0.12 or newer", vim.log.levels.ERROR)
    return
  end
  seam().toggle()
end, { desc = "Toggle Seam's ghost text in this buffer" })

-- Keys to map yourself (`keymaps = false` in setup(), then e.g.
-- `vim.keymap.set("i", "<C-l>", "<Plug>(seam-accept-line)")`). With no suggestion shown they do
-- nothing.
local plugs = {
  ["<Plug>(seam-accept)"] = function()
    seam().accept()
  end,
  ["<Plug>(seam-accept-word)"] = function()
    seam().accept_word()
  end,
  ["<Plug>(seam-accept-line)"] = function()
    seam().accept_line()
  end,
  ["<Plug>(seam-next)"] = function()
    seam().cycle(0, 1)
  end,
  ["<Plug>(seam-prev)"] = function()
    seam().cycle(0, -1)
  end,
  ["<Plug>(seam-dismiss)"] = function()
    seam().dismiss(0)
  end,
}
for lhs, rhs in pairs(plugs) do
  vim.keymap.set("i", lhs, rhs, { silent = true })
end
