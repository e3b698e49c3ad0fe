"""nestling daemon: models, speculative engine, tree policy, syntax context, service, CLI."""
