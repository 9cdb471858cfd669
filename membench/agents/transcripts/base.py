"""What a parsed agent CLI transcript is, and the citation convention; the interface the format
parsers import. The one entry point, `membench.agents.transcripts.registry.parse_transcript`, imports
the parsers and picks one by format name.

`parse_transcript(lines, fmt, source, strict)` turns the JSON-lines stream an agent CLI writes on
stdout into membench events (docs/transcripts.md has the translation table and the token
conventions). It is pure: no file is opened, no clock is read; the caller passes the lines and
emits `Transcript.events` in order (`emitter.emit(event.kind, event.payload, event.visibility)`).

- `strict=True` (a stored transcript, e.g. `membench score --predictions`): a malformed line — not
  JSON, not an object, no string `type`, or a field the translation needs of the wrong type —
  raises `TranscriptError` naming `source`, the 1-based line and what is wrong.
- `strict=False` (a live CLI's stdout): such lines are kept, in order, and become one agent `Turn`
  with `source_kind="stdout"` after the transcript's other events, so nothing is dropped silently.
- In both modes a well-formed line of a type the parser does not know (a newer CLI) is ignored,
  as are the known types that carry nothing membench records (listed in docs/transcripts.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

class TranscriptError(ValueError):
    """A transcript line that cannot be translated: the message names the source, the 1-based line
    number and what is wrong (`source:line: ...`)."""


@dataclass(frozen=True)
class TranscriptEvent:
    """One event to emit: `kind` and `payload` exactly as `RunEmitter.emit_any(kind, payload)` takes
    them. `visibility` is "agent" except for the CLI's own diagnostics (its `error` items and
    failure notices), which are "harness": they are not the agent's words, so no memory system
    should learn them."""

    kind: str  # "Turn" | "ToolCall" | "ToolResult" | "MemoryCitation" | "ContextCompaction"
    payload: dict[str, Any]
    visibility: str = "agent"


@dataclass(frozen=True)
class Transcript:
    events: tuple[TranscriptEvent, ...]
    final_message: str  # the agent's last message text ("" when it wrote none)
    cited_memory_ids: tuple[str, ...]  # parse_citations(final_message)
    input_tokens: int  # totals; equal to the sums of the Turn events' token fields
    cached_tokens: int
    output_tokens: int
    reasoning_tokens: int
    tool_calls: int  # the number of ToolCall events
    status: str  # "completed" (the stream ended normally) / "error"


_LABEL = re.compile(r"^[\s>*_`#+-]*memory[\s*_`]+citations[\s*_`]*:[\s*_`]*(?P<rest>.*)$", re.IGNORECASE)
_CITED = re.compile(r"memory:#([A-Za-z0-9][A-Za-z0-9_.:/@+-]*)")


def parse_citations(text: str) -> list[str]:
    """The memory ids a final message cites, by the coding-agent A/B bench convention: a line
    `Memory citations: memory:#<id> memory:#<id> ...` (or `Memory citations: none`). Commas,
    backticks and markdown emphasis around the label and the ids are tolerated; only the LAST
    such line counts; the ids come back as strings in order, each once. No such line: []."""
    rest = None
    for line in text.splitlines():
        match = _LABEL.match(line)
        if match:
            rest = match.group("rest")
    if rest is None:
        return []
    out: list[str] = []
    for raw in _CITED.findall(rest):
        ident = raw.rstrip(".:/@+-")
        if ident and ident not in out:
            out.append(ident)
    return out
