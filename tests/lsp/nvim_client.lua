-- Neovim (0.7+) as the LSP client: start `nestling lsp`, open a buffer, ask for an inline completion and a
-- completion, write the answers as JSON to $NESTLING_NVIM_OUT, quit.
local function finish(result)
  local file = io.open(vim.env.NESTLING_NVIM_OUT, "w")
  file:write(vim.fn.json_encode(result))
  file:close()
  vim.cmd("qall!")
end

local ok, err = pcall(function()
  local bufnr = vim.api.nvim_create_buf(true, false)
  vim.api.nvim_buf_set_name(bufnr, vim.env.NESTLING_FILE)
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, { "def main(path):", "    names = ", "    return names" })
  vim.api.nvim_set_current_buf(bufnr)
  local client_id = vim.lsp.start_client({
    name = "nestling",
    cmd = vim.fn.json_decode(vim.env.NESTLING_LSP_CMD),
    root_dir = vim.fn.getcwd(),
    init_options = { maxTokens = 6 },
  })
  local client = vim.lsp.get_client_by_id(client_id)
  vim.wait(120000, function() return client.server_capabilities ~= nil and next(client.server_capabilities) ~= nil end, 50)
  vim.api.nvim_buf_set_option(bufnr, "filetype", "python")
  vim.lsp.buf_attach_client(bufnr, client_id)
  vim.wait(200)
  local position = { line = 1, character = 12 }
  local document = { uri = vim.uri_from_bufnr(bufnr) }
  local inline = client.request_sync("textDocument/inlineCompletion",
    { textDocument = document, position = position, context = { triggerKind = 2 } }, 120000, bufnr)  -- Automatic
  local completion = client.request_sync("textDocument/completion",
    { textDocument = document, position = position }, 120000, bufnr)
  finish({
    inline_provider = client.server_capabilities.inlineCompletionProvider ~= nil,
    inline = inline,
    completion = completion,
  })
end)
if not ok then finish({ error = tostring(err) }) end
