"""nestling.proto (see DESIGN.md)."""
