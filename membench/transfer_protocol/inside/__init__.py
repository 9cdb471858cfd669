"""Programs the transfer protocol runs inside a sandbox (they import nothing of membench)."""
