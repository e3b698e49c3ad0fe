"""nestling.proto: the gRPC contract (completion.proto) and its generated stubs (see generate.py)."""
