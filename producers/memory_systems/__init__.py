"""Memory systems behind one protocol (`base`, docs/design.md §5): B0 none and B5 verbatim events
(`verbatim`), B1 raw episodic, B2 token-vector retrieval, B4 session summaries, curated_file,
skill_bank, the adapter for external systems (a command or an HTTP endpoint), and the condition
registry (`registry`)."""
