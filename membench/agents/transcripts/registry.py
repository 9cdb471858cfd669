"""The transcript formats by name, and the one entry point: `parse_transcript` picks the format's
parser (`base` holds the types every parser shares, so no parser imports this module)."""

from __future__ import annotations

from collections.abc import Iterable

from membench.agents.transcripts.base import Transcript
from membench.agents.transcripts.claude_stream_json import parse as parse_claude_stream_json
from membench.agents.transcripts.codex_exec_json import parse as parse_codex_exec_json

PARSERS = {"codex-exec-json": parse_codex_exec_json, "claude-stream-json": parse_claude_stream_json}
FORMATS = tuple(PARSERS)


def parse_transcript(lines: Iterable[str], fmt: str, source: str, strict: bool = True) -> Transcript:
    """The events of one transcript in format `fmt` (one of `FORMATS`); `source` names it in
    errors (a file name). Raises TranscriptError (strict) or ValueError for an unknown format."""
    parse = PARSERS.get(fmt)
    if parse is None:
        raise ValueError(f"unknown transcript format '{fmt}' (known: {', '.join(FORMATS)})")
    return parse(lines, source, strict)
