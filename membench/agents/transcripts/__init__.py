"""Agent CLI transcripts as membench events (docs/transcripts.md): the types, the citation
convention (`base`), `parse_transcript` (`registry`), and one parser per format: `codex exec --json`
(`codex_exec_json`) and `claude -p --output-format stream-json` (`claude_stream_json`). Pure: the
caller passes the lines and emits the events."""
