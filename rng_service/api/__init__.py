"""gRPC: server assembly, interceptors, the error-to-status table, one module per service."""
