--- Seam for Neovim: ghost-text completions that always parse, from `seam serve`.
---
--- Built on Neovim's own LSP client (`vim.lsp.config` / `vim.lsp.enable`) and its inline
--- completion (`vim.lsp.inline_completion`, Neovim >= 0.12). Usage:
---
---   require("seam").setup({ settings = { model = "bundled:qwen2.5-coder-1.5b" } })
---
--- See editors/nvim/README.md for every option.

local M = {}

--- Defaults; `setup()` merges the user's table over these.
M.defaults = {
  -- Command that starts the server; nil means `seam serve` from $PATH.
  cmd = nil,
  -- Connect to a running `seam serve --tcp` instead of starting one:
  -- { host = "127.0.0.1", port = 8765, token = "<the token it printed>" }.
  tcp = nil,
  -- Let the model run its own Python code (starts the server with --trust-remote-code).
  -- This is your config, not a project's: the server refuses the setting from any editor.
  trust_remote_code = false,
  -- Log file of the server (nil: the server's default, $XDG_STATE_HOME/seam/server.log).
  log_file = nil,
  -- Filetypes to attach to; nil means `settings.languages`, else { "python" }.
  filetypes = nil,
  root_markers = { "pyproject.toml", "setup.py", "setup.cfg", ".git" },
  -- The server's settings (section `seam`): model, engine, vllmServer, vllmApiKey,
  -- vllmSlowAfterMs, modelServer, modelServerApiKey, servedModel, fimTemplate,
  -- device, dtype, maxTokens, timeBudgetMs, contextTokens, scope, topK,
  -- constrained, languages, contextBudgetTokens, contextDefinitions, contextOpenFiles,
  -- contextRecentEdits, contextSimilarCode, suggestions, threads.
  settings = {},
  -- Insert-mode keys. `accept` falls back to the key itself when no suggestion is shown.
  -- Set a key to false to leave it unmapped.
  keymaps = {
    accept = "<Tab>",
    next = "<M-]>",
    prev = "<M-[>",
    dismiss = "<C-]>",
  },
}

--- Last `seam/status` notification per client id: { state, model, message }.
M.status = {}
M.config = nil

local function has_inline_completion()
  return vim.lsp and vim.lsp.inline_completion ~= nil and vim.lsp.config ~= nil
end

--- The server command for the current configuration.
---@return string[]
function M.command()
  local cfg = M.config or M.defaults
  local cmd = vim.deepcopy(cfg.cmd or { "seam", "serve" })
  if cfg.log_file then
    vim.list_extend(cmd, { "--log-file", cfg.log_file })
  end
  if cfg.trust_remote_code then
    table.insert(cmd, "--trust-remote-code")
  end
  return cmd
end

--- The `cmd` for vim.lsp.config: a process to start, or a connection to `seam serve --tcp`.
local function lsp_cmd(cfg)
  if cfg.tcp then
    return vim.lsp.rpc.connect(cfg.tcp.host or "127.0.0.1", cfg.tcp.port)
  end
  return M.command()
end

--- initializationOptions: the settings, and the TCP token when connecting to a server.
local function init_options(cfg)
  local options = { seam = cfg.settings }
  if cfg.tcp and cfg.tcp.token then
    options.seamToken = cfg.tcp.token
  end
  return options
end

--- The model state reported by the server attached to `bufnr` (or any server):
--- "loading", "ready", "error", or nil before the first report.
---@param bufnr? integer
---@return string?, string?
function M.state(bufnr)
  local filter = { name = "seam" }
  if bufnr then
    filter.bufnr = bufnr
  end
  for _, client in ipairs(vim.lsp.get_clients(filter)) do
    local st = M.status[client.id]
    if st then
      return st.state, st.message
    end
  end
  return nil, nil
end

--- Hide the shown suggestion without accepting it. The next keystroke asks again.
---@param bufnr? integer
function M.dismiss(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  -- Disabling destroys the buffer's inline-completion state (and its ghost text);
  -- enabling again re-arms it for the next edit.
  vim.lsp.inline_completion.enable(false, { bufnr = bufnr })
  vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
end

-- Per buffer: the place (change tick and cursor) whose other suggestions were asked for.
local asked_at = {}

local function place_of(bufnr)
  local cursor = vim.api.nvim_win_get_cursor(0)
  return ("%d:%d:%d"):format(vim.api.nvim_buf_get_changedtick(bufnr), cursor[1], cursor[2])
end

--- Show the next (`count` 1) or previous (-1) suggestion of the place.
---
--- Neovim cycles only the items it has (`vim.lsp.inline_completion.select` asks nothing),
--- and the server answers a place's first request with one suggestion at once and decodes
--- the others while it is idle (setting `suggestions`). So the first press at a place asks
--- the server explicitly (`triggerKind` Invoked: it answers once the others are there)
--- and, when there are several, lets the inline completion ask again (answered from the
--- server's cache, the best first); the presses after that cycle through them.
---@param bufnr? integer
---@param count integer
function M.cycle(bufnr, count)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local place = place_of(bufnr)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = "seam" })[1]
  if asked_at[bufnr] == place or not client then
    vim.lsp.inline_completion.select({ bufnr = bufnr, count = count })
    return
  end
  asked_at[bufnr] = place
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = vim.lsp.protocol.InlineCompletionTriggerKind.Invoked }
  client:request("textDocument/inlineCompletion", params, function(err, result)
    local items = (not err and type(result) == "table") and (result.items or result) or {}
    if #items < 2 or not vim.api.nvim_buf_is_valid(bufnr)
        or vim.api.nvim_get_current_buf() ~= bufnr or place_of(bufnr) ~= place then
      return
    end
    -- The inline completion's own request (it runs on this event, in the current buffer)
    -- now gets them all.
    vim.api.nvim_exec_autocmds("CursorMovedI", { modeline = false })
  end, bufnr)
end

local function map_keys(bufnr, keymaps)
  local function set(lhs, rhs, desc, opts)
    if lhs then
      vim.keymap.set("i", lhs, rhs,
        vim.tbl_extend("force", { buffer = bufnr, desc = desc, silent = true }, opts or {}))
    end
  end
  local accept_key = keymaps.accept
  set(accept_key, function()
    if vim.lsp.inline_completion.get({ bufnr = bufnr }) then
      return ""
    end
    return accept_key
  end, "Seam: accept the suggestion", { expr = true, replace_keycodes = true })
  set(keymaps.next, function()
    M.cycle(bufnr, 1)
  end, "Seam: next suggestion")
  set(keymaps.prev, function()
    M.cycle(bufnr, -1)
  end, "Seam: previous suggestion")
  set(keymaps.dismiss, function()
    M.dismiss(bufnr)
  end, "Seam: dismiss the suggestion")
end

--- How long the cursor must rest before the server hears of it (ms).
M.cursor_debounce_ms = 150

--- Tell the server where the cursor rests (`seam/cursor`), so that it puts the prompt there
--- into the model's cache while the user pauses; the request that follows then only decodes.
--- Only the last position of a burst of moves is sent.
local function watch_cursor(bufnr, client)
  local timer = vim.uv.new_timer()
  local group = vim.api.nvim_create_augroup("seam_cursor_" .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI", "BufEnter" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      timer:stop()
      timer:start(M.cursor_debounce_ms, 0, vim.schedule_wrap(function()
        if client:is_stopped() or not vim.api.nvim_buf_is_valid(bufnr)
            or vim.api.nvim_get_current_buf() ~= bufnr then
          return
        end
        local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
        client:notify("seam/cursor", {
          textDocument = { uri = vim.uri_from_bufnr(bufnr) },
          position = params.position,
        })
      end))
    end,
  })
  vim.api.nvim_create_autocmd({ "BufDelete", "LspDetach" }, {
    group = group,
    buffer = bufnr,
    once = true,
    callback = function()
      timer:stop()
      if not timer:is_closing() then
        timer:close()
      end
      pcall(vim.api.nvim_del_augroup_by_id, group)
    end,
  })
end

local function on_status(_, result, ctx)
  if type(result) == "table" then
    M.status[ctx.client_id] = result
    vim.api.nvim_exec_autocmds("User", { pattern = "SeamStatus", data = result })
  end
end

--- Configure and enable the `seam` language server and inline completion.
---@param opts? table see `M.defaults`
function M.setup(opts)
  if not has_inline_completion() then
    vim.notify("seam.nvim needs Neovim >= 0.12 (vim.lsp.inline_completion)",
      vim.log.levels.ERROR)
    return
  end
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  local cfg = M.config
  local filetypes = cfg.filetypes or cfg.settings.languages or { "python" }

  vim.lsp.config("seam", {
    cmd = lsp_cmd(cfg),
    filetypes = filetypes,
    root_markers = cfg.root_markers,
    init_options = init_options(cfg),
    settings = { seam = cfg.settings },
    handlers = { ["seam/status"] = on_status },
  })
  vim.lsp.enable("seam")

  local group = vim.api.nvim_create_augroup("seam", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if not client or client.name ~= "seam" then
        return
      end
      vim.lsp.inline_completion.enable(true, { bufnr = args.buf })
      map_keys(args.buf, cfg.keymaps)
      watch_cursor(args.buf, client)
    end,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = group,
    callback = function(args)
      M.status[args.data.client_id] = nil
    end,
  })

  vim.api.nvim_create_user_command("SeamStatus", function()
    local state, message = M.state()
    vim.notify(("seam: %s%s"):format(state or "not running", message and (" — " .. message) or ""))
  end, { desc = "Show the Seam server's model state" })
  vim.api.nvim_create_user_command("SeamToggle", function()
    local enabled = vim.lsp.inline_completion.is_enabled({ bufnr = 0 })
    vim.lsp.inline_completion.enable(not enabled, { bufnr = 0 })
    vim.notify("seam: inline completion " .. (enabled and "off" or "on"))
  end, { desc = "Toggle Seam's ghost text in this buffer" })
end

return M
