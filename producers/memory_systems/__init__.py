"""Memory systems beyond B0/B5 (DESIGN.md §5), each behind the protocol of `producers.memory`:
B1 raw episodic, B2 token-vector retrieval, B4 session summaries, curated_file, skill_bank, and
the adapter for external systems (a command or an HTTP endpoint)."""

import producers.memory  # noqa: F401,E402  (registers the systems; imported first to avoid an import cycle)
