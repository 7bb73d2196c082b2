-- A lazy.nvim spec for Seam: copy it into your lazy.nvim plugin list (or save it as
-- lua/plugins/seam.lua of your config). lazy.nvim clones the repository; the root's plugin/ and
-- lua/seam/ load this folder, editors/nvim. `opts` goes to require("seam").setup(); see
-- :help seam-options.
return {
  "seam-complete/seam",
  -- Every file gets suggestions (Python's exact, the others' unchecked): load on the first
  -- file opened. `ft = "python"` (and settings.languages = { "python" }) for Python alone.
  event = { "BufReadPost", "BufNewFile" },
  opts = {
    -- cmd = { "/path/to/venv/bin/seam", "serve" },   -- default: { "seam", "serve" }
    settings = { model = "bundled" },
  },
}
