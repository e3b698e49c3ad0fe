"""The gRPC transport: edge conversions, thin handlers, one error interceptor, the server and a client."""
