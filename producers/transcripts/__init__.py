"""Agent CLI transcripts as membench events (docs/transcripts.md): the types, the citation
convention and `parse_transcript` (`base`), and one parser per format: `codex exec --json`
(`codex_exec_json`) and `claude -p --output-format stream-json` (`claude_stream_json`). Pure: the
caller passes the lines and emits the events."""
