"""What `membench bench` measures (docs/benchmarks.md), and `scripted_model_server`: the scripted local
model server that the gateway benchmark and many tests call."""
