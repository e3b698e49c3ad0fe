"""nestling.lsp (see DESIGN.md)."""
