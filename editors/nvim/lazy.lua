-- A lazy.nvim spec for Seam: copy it into your lazy.nvim plugin list (or save it as
-- lua/plugins/seam.lua of your config). lazy.nvim clones the repository; the root's plugin/ and
-- lua/seam/ load this folder, editors/nvim. `opts` goes to require("seam").setup(); see
-- :help seam-options.
return {
  "seam-complete/seam",
  ft = "python",
  opts = {
    -- cmd = { "/path/to/venv/bin/seam", "serve" },   -- default: { "seam", "serve" }
    settings = { model = "bundled" },
  },
}
