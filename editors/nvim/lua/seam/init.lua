--- Seam for Neovim: ghost-text completions that always parse, from `seam serve`.
---
--- Built on Neovim's own LSP client (`vim.lsp.config` / `vim.lsp.enable`) and its inline
--- completion (`vim.lsp.inline_completion`, Neovim 0.12). Usage:
---
---   require("seam").setup({ settings = { model = "bundled:qwen2.5-coder-1.5b" } })
---
--- See `:help seam` (doc/seam.txt) for every option. The user commands live in
--- plugin/seam.lua, so that they exist before `setup()`.

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
  -- Filetypes to attach to; nil means `settings.languages` when it lists some, else every
  -- filetype (special buffers, help, terminal, prompt, nofile, never: Neovim attaches only
  -- to buffers of files). Python's suggestions are exact; other filetypes' are unchecked.
  filetypes = nil,
  root_markers = { "pyproject.toml", "setup.py", "setup.cfg", ".git" },
  -- The server's settings (section `seam`): model, engine, vllmServer, vllmApiKey,
  -- vllmSlowAfterMs, modelServer, modelServerApiKey, servedModel, fimTemplate, fallback,
  -- device, dtype, maxTokens, timeBudgetMs, contextTokens, newPlaceMs, scope, topK,
  -- constrained, languages, contextBudgetTokens, contextDefinitions, contextOpenFiles,
  -- contextRecentEdits, contextSimilarCode, suggestions, threads.
  settings = {},
  -- Insert-mode keys. With no suggestion shown, the accept keys do what they did before Seam
  -- mapped them: your own mapping of that key, or else the key itself.
  -- Set a key to false to leave it unmapped, or `keymaps = false` to map none (then map the
  -- <Plug>(seam-...) keys of plugin/seam.lua yourself).
  keymaps = {
    accept = "<Tab>",
    accept_word = "<M-Right>",
    accept_line = "<M-C-Right>",
    next = "<M-]>",
    prev = "<M-[>",
    dismiss = "<C-]>",
  },
}

--- Last `seam/status` notification per client id: { state, model, message, serving }.
M.status = {}
--- Per client id: the language ids whose suggestions are exact (the `seam/status` answer's
--- `checked`); every other filetype's are unchecked.
M.checked = {}
M.config = nil

--- The Neovim versions Seam supports: 0.12 and later (it needs `vim.lsp.inline_completion`
--- and `vim.lsp.config`, both new in 0.12). The end-to-end tests run 0.12.0-dev+fbb1caf.
M.min_version = { 0, 12, 0 }

--- Whether this Neovim is in the supported range (a 0.12 pre-release counts as 0.12).
---@return boolean
function M.supported()
  local v = vim.version()
  return vim.version.cmp({ v.major, v.minor, 0 }, M.min_version) >= 0
    and vim.lsp ~= nil and vim.lsp.inline_completion ~= nil and vim.lsp.config ~= nil
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
--- "loading", "ready", "error", "fallback" (the model server is down and the local model
--- loads or serves), or nil before the first report; the server's message; and which engine
--- answers now: "server", "local", or nil while none does.
---@param bufnr? integer
---@return string?, string?, string?
function M.state(bufnr)
  local filter = { name = "seam" }
  if bufnr then
    filter.bufnr = bufnr
  end
  for _, client in ipairs(vim.lsp.get_clients(filter)) do
    local st = M.status[client.id]
    if st then
      return st.state, st.message, st.serving
    end
  end
  return nil, nil
end

--- Whether the suggestions in `bufnr` are "exact" (a grammar checks them, as Python's) or
--- "unchecked" (Seam has no grammar for its filetype); nil when no Seam server is attached
--- or it has not said yet which languages it checks.
---@param bufnr? integer
---@return string?
function M.check(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  for _, client in ipairs(vim.lsp.get_clients({ name = "seam", bufnr = bufnr })) do
    local checked = M.checked[client.id]
    if checked then
      return vim.tbl_contains(checked, vim.bo[bufnr].filetype) and "exact" or "unchecked"
    end
  end
  return nil
end

--- Ask the server which language ids it checks (once per client).
local function learn_checked(client, bufnr)
  if M.checked[client.id] then
    return
  end
  client:request("seam/status", {}, function(err, result)
    if not err and type(result) == "table" and type(result.checked) == "table" then
      M.checked[client.id] = result.checked
      vim.api.nvim_exec_autocmds("User", { pattern = "SeamStatus", data = result })
    end
  end, bufnr)
end

--- The filetypes to attach to: the `filetypes` option, else `settings.languages` unless it
--- is `["*"]`, else nil (every filetype).
local function filetypes_of(cfg)
  if cfg.filetypes then
    return cfg.filetypes
  end
  local languages = cfg.settings.languages
  if type(languages) == "string" then
    languages = { languages }
  end
  if type(languages) == "table" and #languages > 0 and not vim.tbl_contains(languages, "*") then
    return languages
  end
  return nil
end
M.filetypes_of = filetypes_of

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

--- The part of `remaining` that accepting a word (`what` "word") or a line ("line") takes:
--- leading white space (line breaks and indentation included) and then one run of word
--- characters or one run of other characters, for a word; the rest of the current line, or
--- the line break and the whole next line when the rest of this line is empty, for a line.
---@param remaining string
---@param what "word"|"line"
---@return string
function M.next_piece(remaining, what)
  if what == "line" then
    if remaining:sub(1, 1) == "\n" then
      return "\n" .. remaining:sub(2):match("^[^\n]*")
    end
    return remaining:match("^[^\n]*")
  end
  local space = remaining:match("^%s*")
  local rest = remaining:sub(#space + 1)
  return space .. (rest:match("^[%w_]+") or rest:match("^[^%w_%s]+") or "")
end

--- Insert `text` at the cursor of the buffer's window and put the cursor after it.
local function insert_at_cursor(bufnr, text)
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 or text == "" then
    return
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  local lines = vim.split(text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, lines)
  vim.api.nvim_win_set_cursor(win, {
    row + #lines - 1,
    (#lines == 1 and col or 0) + #lines[#lines],
  })
end

--- Put the whole `item` into the buffer (its text over its range, or at the cursor).
local function apply_whole(bufnr, item)
  local text = type(item.insert_text) == "string" and item.insert_text or item.insert_text.value
  local win = vim.fn.bufwinid(bufnr)
  if not item.range or win == -1 then
    insert_at_cursor(bufnr, text)
    return
  end
  local s, e = item.range.start, item.range.end_
  local lines = vim.split(text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(bufnr, s.row, s.col, e.row, e.col, lines)
  vim.api.nvim_win_set_cursor(win, {
    s.row + #lines,
    (#lines == 1 and s.col or 0) + #lines[#lines],
  })
end

--- What of `item` is not in the buffer yet: its text less what the user typed of it (from the
--- start of its range to the cursor) and less the end of its range that is already there
--- after the cursor (a mid-line item repeats the rest of the line, e.g. `, 3)`). Nil when the
--- buffer no longer agrees with the item.
local function remaining_of(bufnr, item)
  local text = type(item.insert_text) == "string" and item.insert_text or item.insert_text.value
  local win = vim.fn.bufwinid(bufnr)
  if win == -1 then
    return nil
  end
  local row, col = unpack(vim.api.nvim_win_get_cursor(win))
  row = row - 1
  if not item.range then
    return text
  end
  local s, e = item.range.start, item.range.end_
  if row < s.row or (row == s.row and col < s.col) then
    return nil
  end
  local typed = table.concat(vim.api.nvim_buf_get_text(bufnr, s.row, s.col, row, col, {}), "\n")
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  local remaining = text:sub(#typed + 1)
  if row < e.row or (row == e.row and col <= e.col) then
    local after = table.concat(vim.api.nvim_buf_get_text(bufnr, row, col, e.row, e.col, {}), "\n")
    if after ~= "" and remaining:sub(-#after) == after then
      remaining = remaining:sub(1, #remaining - #after)
    end
  end
  return remaining
end

--- Accept the shown suggestion, all of it (`what` nil), its next word ("word") or the rest of
--- its current line ("line"). Accepting a part inserts it at the cursor; the suggestion's rest
--- comes back as ghost text (the server answers the next request from the suggestion being
--- typed through). Returns false when no suggestion is shown.
---@param bufnr? integer
---@param what? "word"|"line"
---@return boolean
function M.accept(bufnr, what)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  if what == nil then
    return vim.lsp.inline_completion.get({ bufnr = bufnr })
  end
  return vim.lsp.inline_completion.get({
    bufnr = bufnr,
    on_accept = function(item)
      local remaining = remaining_of(bufnr, item)
      if remaining == nil then
        -- The buffer moved on since the suggestion was shown: accept it whole, as Neovim would.
        apply_whole(bufnr, item)
        return
      end
      insert_at_cursor(bufnr, M.next_piece(remaining, what))
    end,
  })
end

--- Accept the next word of the shown suggestion; false when none is shown.
---@param bufnr? integer
---@return boolean
function M.accept_word(bufnr)
  return M.accept(bufnr, "word")
end

--- Accept the rest of the current line of the shown suggestion; false when none is shown.
---@param bufnr? integer
---@return boolean
function M.accept_line(bufnr)
  return M.accept(bufnr, "line")
end

--- The insert-mode mapping `lhs` has in `bufnr` now (the buffer's own, else the global one),
--- unless it is Seam's own; nil when there is none.
local function lookup_mapping(bufnr, lhs)
  local found
  vim.api.nvim_buf_call(bufnr, function()
    found = vim.fn.maparg(lhs, "i", false, true)
  end)
  if vim.tbl_isempty(found) or (found.desc or ""):match("^Seam: ") then
    return nil
  end
  return found
end

-- Per buffer and key: the mapping it had before Seam's (false: none). Kept from the first
-- time Seam maps the buffer, so that a server restarting (LspAttach again) keeps the user's.
local previous_maps = {}

--- The insert-mode mapping `lhs` had in `bufnr` before Seam mapped it (the buffer's own, else
--- the global one), or nil when it had none.
local function previous_mapping(bufnr, lhs)
  local key = bufnr .. "\0" .. lhs
  if previous_maps[key] == nil then
    previous_maps[key] = lookup_mapping(bufnr, lhs) or false
  end
  return previous_maps[key] or nil
end

--- Do what `lhs` did before Seam mapped it: run the user's mapping (a Lua callback or a
--- right-hand side, expression mappings evaluated, recursive ones remapped), or else type the
--- key itself. Keys go to the front of the typeahead, so that keys typed after it stay after.
local function fall_through(lhs, previous)
  if previous == nil then
    vim.api.nvim_feedkeys(vim.keycode(lhs), "in", false)
    return
  end
  local mode = (previous.noremap == 1 and "n" or "m") .. "i"
  local keys
  if previous.callback then
    if previous.expr ~= 1 then
      previous.callback()
      return
    end
    keys = previous.callback()
    if type(keys) ~= "string" then
      return
    end
    if previous.replace_keycodes == 1 then
      keys = vim.keycode(keys)
    end
  else
    local rhs = previous.rhs or ""
    if previous.sid and previous.sid > 0 then
      rhs = rhs:gsub("<[Ss][Ii][Dd]>", ("<SNR>%d_"):format(previous.sid))
    end
    if previous.expr == 1 then
      keys = vim.api.nvim_eval(rhs)
      if previous.replace_keycodes == 1 then
        keys = vim.keycode(keys)
      end
    else
      keys = vim.keycode(rhs)
    end
  end
  vim.api.nvim_feedkeys(keys, mode, false)
end

local function map_keys(bufnr, keymaps)
  local function set(lhs, rhs, desc)
    if lhs then
      vim.keymap.set("i", lhs, rhs, { buffer = bufnr, desc = desc, silent = true })
    end
  end
  -- An accept key with no suggestion shown falls through to what the key did before.
  local function accept_key(lhs, what, desc)
    if not lhs then
      return
    end
    local previous = previous_mapping(bufnr, lhs)
    set(lhs, function()
      if not M.accept(bufnr, what) then
        fall_through(lhs, previous)
      end
    end, desc)
  end
  accept_key(keymaps.accept, nil, "Seam: accept the suggestion")
  accept_key(keymaps.accept_word, "word", "Seam: accept the next word of the suggestion")
  accept_key(keymaps.accept_line, "line", "Seam: accept the next line of the suggestion")
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
  if not M.supported() then
    vim.notify(("seam.nvim needs Neovim 0.12 or newer (vim.lsp.inline_completion); this is %s")
      :format(tostring(vim.version())), vim.log.levels.ERROR)
    return
  end
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  local cfg = M.config
  local filetypes = filetypes_of(cfg)

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
      if cfg.keymaps then
        map_keys(args.buf, cfg.keymaps)
      end
      watch_cursor(args.buf, client)
      learn_checked(client, args.buf)
    end,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = group,
    callback = function(args)
      M.status[args.data.client_id] = nil
      M.checked[args.data.client_id] = nil
    end,
  })

end

--- `:SeamStatus`: the model state of the running server.
function M.show_status()
  if not M.config then
    vim.notify("seam: not set up; call require('seam').setup() in your config (:help seam-setup)",
      vim.log.levels.WARN)
    return
  end
  local state, message, serving = M.state()
  local check = M.check(0)
  vim.notify(("seam: %s%s%s%s"):format(state or "not running",
    serving and (" (serving: " .. serving .. ")") or "",
    message and (" — " .. message) or "",
    check and (" (this buffer: " .. check .. ")") or ""))
end

--- `:SeamToggle`: ghost text off or on in the current buffer.
function M.toggle()
  local enabled = vim.lsp.inline_completion.is_enabled({ bufnr = 0 })
  vim.lsp.inline_completion.enable(not enabled, { bufnr = 0 })
  vim.notify("seam: inline completion " .. (enabled and "off" or "on"))
end

return M
