"""Training EAGLE heads: corpus -> FIM samples -> the target's own continuations and features -> head training."""
