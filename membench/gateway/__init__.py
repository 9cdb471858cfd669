"""The model gateway (docs/gateway.md): agents in a sandbox reach a model only through it."""
