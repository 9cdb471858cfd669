"""Memory systems behind one protocol (`base`, docs/design.md §5): B0 none and B5 verbatim events
(`verbatim`), B1 raw episodic, B2 token-vector retrieval, B3 reflection lessons (`reflection`), B4
session summaries, B6 subtask/action memory (`subtask`), B7 the task tracker (`tracker`), the
reference-probe family DF / DF-raw-only / DF-hybrid / DF-strict / DF-strict-hybrid and its ablations
(`typed`), curated_file, skill_bank, the adapter for external systems (a command or an HTTP
endpoint, with mem0-style ids), and the condition registry (`registry`). Deterministic: where
DreamBench-SWE has a model write or judge memories, these are its model-free variants — except the
model-driven `B3-llm`, `DF-llm` and `DF-hybrid-llm` (`model_driven`), which ask the run's memory model
through the model gateway from the harness (`model_client`)."""
