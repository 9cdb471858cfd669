"""`claude -p --output-format stream-json --verbose`: the JSON-lines message stream, translated
(docs/transcripts.md).

Lines: `system` (subtype `init`; `compact_boundary` with `compact_metadata.pre_tokens`),
`assistant` (`message`: `id`, `content` blocks `text` / `tool_use` / `thinking`, `usage`), `user`
(`message.content`: `tool_result` blocks, matched to their `tool_use` by id) and `result`
(`subtype`, `is_error`, `result`, `usage`, `duration_ms`).

| line / block | events |
|---|---|
| assistant `text` | Turn role agent |
| assistant `thinking` | Turn role agent, source_kind "reasoning" |
| assistant `tool_use` | ToolCall (the tool's name; digest of its input; is_patch for Edit, Write, MultiEdit, NotebookEdit) |
| user `tool_result` | ToolResult (its tool_use's name; exit 1 when `is_error`, else 0; its text) |
| system `compact_boundary` | ContextCompaction (tokens_before = pre_tokens, tokens_after = post_tokens or 0) |
| result | the usage Turn; a harness-visible cli_error Turn when it is an error |
| system `init`, user text, other | nothing |

One API message may be streamed as several `assistant` lines with the same `message.id`, each
repeating the message's usage: a message id's usage counts once (its last line's), a tool_use id
makes one ToolCall, and a text repeated under the same message id one Turn. A tool_use no
`tool_result` answered gets a ToolResult with exit code -1 at the end.

Tokens: one usage Turn (role agent, source_kind "usage", empty text, latency = the result's
`duration_ms`) at the end, from the `result` line's `usage` when present (the CLI's own total),
else the sum over message ids. input = `input_tokens` + `cache_creation_input_tokens` +
`cache_read_input_tokens` (every prompt token, so cached is a subset of input as in OpenAI's
convention), cached = `cache_read_input_tokens`, output = `output_tokens` (thinking included),
reasoning = 0 (not reported separately). Final message: the text of a successful `result`, else
the last assistant text. Status: "completed" for a `result` with subtype `success` that is not an error;
otherwise (an error result, or no result line) "error".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from membench.agents.transcripts.base import Transcript
from membench.agents.transcripts.common import Builder, Malformed, count, digest, field, read_lines

PATCH_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_UNANSWERED = "[no tool_result for this call in the transcript]"


def _tokens(usage: dict[str, Any], where: str) -> dict[str, int]:
    fresh = count(usage, "input_tokens", where)
    written = count(usage, "cache_creation_input_tokens", where)
    read = count(usage, "cache_read_input_tokens", where)
    return {"input_tokens": fresh + written + read, "cached_tokens": read,
            "output_tokens": count(usage, "output_tokens", where), "reasoning_tokens": 0}


def _blocks(message: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """message.content as a list of blocks, each a dict with a string `type` (a string content is
    one text block)."""
    content = field(message, "content", (list, str), where, [])
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise Malformed(f"field '{where}.content[{i}]' must be dict, got {type(block).__name__}")
        field(block, "type", str, f"{where}.content[{i}]")
    return content


def _result_text(content: Any, where: str) -> str | None:
    """A tool_result's content as text: a string, or the text blocks of a list (other blocks, such
    as images, as a `[type]` placeholder)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Malformed(f"field '{where}' must be str or list, got {type(content).__name__}")
    parts = []
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            raise Malformed(f"field '{where}[{i}]' must be dict, got {type(block).__name__}")
        kind = field(block, "type", str, f"{where}[{i}]")
        parts.append(field(block, "text", str, f"{where}[{i}]", "") if kind == "text" else f"[{kind}]")
    return "\n".join(parts)


class _Claude:
    def __init__(self) -> None:
        self.out = Builder()
        self.usage_by_message: dict[str, dict[str, int]] = {}
        self.calls: dict[str, tuple[str, bool]] = {}  # tool_use id -> (name, is_patch)
        self.answered: set[str] = set()
        self.texts: set[tuple[str, str, str]] = set()  # (message id, block type, text) already emitted
        self.last_text = ""
        self.result: dict[str, Any] | None = None
        self.anonymous = 0

    def handle(self, doc: dict[str, Any], kind: str) -> None:
        if kind == "assistant":
            self.assistant(doc)
        elif kind == "user":
            self.user(doc)
        elif kind == "result":
            usage = field(doc, "usage", dict, "", None)
            self.result = {"subtype": field(doc, "subtype", str, "", ""),
                           "is_error": field(doc, "is_error", bool, "", False),
                           "text": field(doc, "result", str, "", None),
                           "tokens": None if usage is None else _tokens(usage, "usage"),
                           "duration_ms": count(doc, "duration_ms", "")}
        elif kind == "system" and field(doc, "subtype", str, "", "") == "compact_boundary":
            meta = field(doc, "compact_metadata", dict, "", {})
            before, after = count(meta, "pre_tokens", "compact_metadata"), count(meta, "post_tokens", "compact_metadata")
            self.out.compaction(before, after)
        # system init, stream_event and unknown types carry nothing membench records

    def assistant(self, doc: dict[str, Any]) -> None:
        message = field(doc, "message", dict, "")
        ident = field(message, "id", str, "message", None)
        blocks = _blocks(message, "message")
        for i, block in enumerate(blocks):
            where = f"message.content[{i}]"
            if block["type"] == "text":
                field(block, "text", str, where)
            elif block["type"] == "thinking":
                field(block, "thinking", str, where, "")
            elif block["type"] == "tool_use":
                field(block, "id", str, where)
                field(block, "name", str, where)
        usage = field(message, "usage", dict, "message", None)
        tokens = None if usage is None else _tokens(usage, "message.usage")
        # checked: now record
        if ident is None:
            self.anonymous += 1
            ident = f"\0line-{self.anonymous}"  # no id: every line is its own message
        if tokens is not None:
            self.usage_by_message[ident] = tokens
        for block in blocks:
            kind = block["type"]
            if kind in ("text", "thinking"):
                text = block.get(kind) or ""
                if (ident, kind, text) in self.texts:
                    continue
                self.texts.add((ident, kind, text))
                if kind == "text":
                    self.out.turn(text)
                    self.last_text = text
                else:
                    self.out.turn(text, source_kind="reasoning")
            elif kind == "tool_use" and block["id"] not in self.calls:
                name = block["name"]
                self.calls[block["id"]] = (name, name in PATCH_TOOLS)
                self.out.tool_call(block["id"], name, digest(block.get("input")), name in PATCH_TOOLS)

    def user(self, doc: dict[str, Any]) -> None:
        message = field(doc, "message", dict, "")
        results = []
        for i, block in enumerate(_blocks(message, "message")):
            if block["type"] != "tool_result":
                continue
            where = f"message.content[{i}]"
            results.append((field(block, "tool_use_id", str, where),
                            _result_text(block.get("content"), f"{where}.content"),
                            field(block, "is_error", bool, where, False)))
        for call_id, text, is_error in results:
            if call_id in self.answered:
                continue
            self.answered.add(call_id)
            name, is_patch = self.calls.get(call_id, ("unknown", False))
            self.out.tool_result(call_id, name, 1 if is_error else 0, text, is_patch)

    def finish(self) -> Transcript:
        for call_id, (name, is_patch) in self.calls.items():
            if call_id not in self.answered:
                self.out.tool_result(call_id, name, -1, _UNANSWERED, is_patch)
        result = self.result
        if result is not None and result["tokens"] is not None:
            self.out.usage(result["tokens"], latency_ms=result["duration_ms"])
        elif self.usage_by_message:
            summed = {key: sum(t[key] for t in self.usage_by_message.values())
                      for key in ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens")}
            self.out.usage(summed, latency_ms=result["duration_ms"] if result else 0)
        ok = result is not None and result["subtype"] == "success" and not result["is_error"]
        if result is not None and not ok:
            self.out.turn(f"result: {result['subtype'] or 'error'}\n{result['text'] or ''}".strip(), role="system",
                          source_kind="cli_error", visibility="harness")
        final = result["text"] if result is not None and result["text"] is not None and ok else self.last_text
        return self.out.finish(final, "completed" if ok else "error")


def parse(lines: Iterable[str], source: str, strict: bool = True) -> Transcript:
    state = _Claude()
    read_lines(lines, source, strict, state.out, state.handle)
    return state.finish()
