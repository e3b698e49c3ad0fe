"""nestling.grammars (see DESIGN.md)."""
