"""`codex exec --json`: the JSON-lines thread event stream, translated (docs/transcripts.md).

Lines: `thread.started`, `turn.started`, `item.started` / `item.updated` / `item.completed` (an
`item` with `id` and `type`), `turn.completed` (`usage`), `turn.failed` (`error.message`) and a
top-level `error` (`message`). An item is translated once, from its completed state (a repeated
`item.completed` for the same id is ignored); an item that started but never completed is
translated at the end of the stream from its last state, marked incomplete (tool exit code -1).

| item | events |
|---|---|
| agent_message | Turn role agent (its text; the last completed one is the final message) |
| reasoning | Turn role agent, source_kind "reasoning" |
| command_execution | ToolCall + ToolResult "shell": digest of the command, exit code, aggregated output |
| file_change | ToolCall + ToolResult "apply_patch", is_patch: the changes' kinds and paths |
| mcp_tool_call | ToolCall + ToolResult "mcp:<server>.<tool>": exit 0 unless failed or an error |
| web_search | ToolCall + ToolResult "web_search" (digest of the query) |
| error | Turn role system, source_kind "cli_error", harness-visible (a CLI notice) |
| todo_list, other | nothing |

Tokens: each `turn.completed` becomes a usage Turn (role agent, source_kind "usage", empty text)
with input = `input_tokens` (cached ones included, OpenAI's convention), cached =
`cached_input_tokens`, output = `output_tokens`, reasoning = `reasoning_output_tokens` (part of
output) or 0. Status: "completed" when the last turn completed and none failed; "error" after a
`turn.failed`, a top-level `error` no completed turn followed, or a stream that ends mid-turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from membench.agents.transcripts.base import Transcript
from membench.agents.transcripts.common import Builder, Malformed, count, digest, field, read_lines

_TRANSLATED = ("agent_message", "reasoning", "command_execution", "file_change", "mcp_tool_call", "web_search",
               "error")
_INCOMPLETE = "[incomplete: the transcript ended before this item completed]"


def _checked_item(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The event's item after checking the fields its translation reads; None for a type that is
    not translated."""
    item = field(doc, "item", dict, "")
    kind = field(item, "type", str, "item")
    if kind not in _TRANSLATED:
        return None
    field(item, "id", str, "item")
    if kind in ("agent_message", "reasoning"):
        field(item, "text", str, "item", "")
    elif kind == "command_execution":
        field(item, "command", str, "item")
        field(item, "aggregated_output", str, "item", "")
        field(item, "exit_code", int, "item", 0)
        field(item, "status", str, "item", "")
    elif kind == "file_change":
        for i, change in enumerate(field(item, "changes", list, "item", [])):
            if not isinstance(change, dict):
                raise Malformed(f"field 'item.changes[{i}]' must be dict, got {type(change).__name__}")
            field(change, "path", str, f"item.changes[{i}]")
            field(change, "kind", str, f"item.changes[{i}]", "")
        field(item, "status", str, "item", "")
    elif kind == "mcp_tool_call":
        field(item, "server", str, "item")
        field(item, "tool", str, "item")
        field(item, "status", str, "item", "")
        field(field(item, "error", dict, "item", {}), "message", str, "item.error", "")
    elif kind == "web_search":
        field(item, "query", str, "item", "")
    elif kind == "error":
        field(item, "message", str, "item", "")
    return item


class _Codex:
    def __init__(self) -> None:
        self.out = Builder()
        self.pending: dict[str, dict[str, Any]] = {}  # started, not yet completed: id -> last state
        self.done: set[str] = set()
        self.final = ""
        self.turn_open = False
        self.failed = False
        self.outcome = "error"  # "completed" after a turn.completed, until an error says otherwise

    def handle(self, doc: dict[str, Any], kind: str) -> None:
        if kind in ("item.started", "item.updated", "item.completed"):
            item = _checked_item(doc)
            if item is None or item["id"] in self.done:
                return
            if kind == "item.completed":
                self.pending.pop(item["id"], None)
                self.done.add(item["id"])
                self.translate(item, complete=True)
            else:
                self.pending[item["id"]] = item
        elif kind == "turn.started":
            self.turn_open = True
        elif kind == "turn.completed":
            usage = field(doc, "usage", dict, "", {})
            tokens = {"input_tokens": count(usage, "input_tokens", "usage"),
                      "cached_tokens": count(usage, "cached_input_tokens", "usage"),
                      "output_tokens": count(usage, "output_tokens", "usage"),
                      "reasoning_tokens": count(usage, "reasoning_output_tokens", "usage")}
            self.out.usage(tokens)
            self.turn_open, self.outcome = False, "completed"
        elif kind == "turn.failed":
            message = field(field(doc, "error", dict, "", {}), "message", str, "error", "")
            self.out.turn(f"turn failed: {message}".strip(), role="system", source_kind="cli_error",
                          visibility="harness")
            self.turn_open, self.failed, self.outcome = False, True, "error"
        elif kind == "error":
            message = field(doc, "message", str, "", "")
            self.out.turn(message, role="system", source_kind="cli_error", visibility="harness")
            self.outcome = "error"
        # thread.started and unknown types carry nothing membench records

    def translate(self, item: dict[str, Any], complete: bool) -> None:
        ident, kind, status = item["id"], item["type"], item.get("status") or ""
        note = "" if complete else _INCOMPLETE + "\n"
        out = self.out
        if kind == "agent_message":
            out.turn(item.get("text") or "")
            if complete:
                self.final = item.get("text") or ""
        elif kind == "reasoning":
            out.turn(item.get("text") or "", source_kind="reasoning")
        elif kind == "command_execution":
            code = item.get("exit_code")
            if not isinstance(code, int) or not complete:
                code = 0 if complete and status == "completed" else -1
            out.tool_call(ident, "shell", digest(item["command"]), False)
            out.tool_result(ident, "shell", code, note + (item.get("aggregated_output") or ""), False)
        elif kind == "file_change":
            changes = item.get("changes") or []
            out.tool_call(ident, "apply_patch", digest(changes), True)
            code = (0 if status == "completed" else 1) if complete else -1
            listing = "".join(f"{c.get('kind') or 'change'} {c['path']}\n" for c in changes)
            out.tool_result(ident, "apply_patch", code, note + listing, True)
        elif kind == "mcp_tool_call":
            name = f"mcp:{item['server']}.{item['tool']}"
            error = item.get("error") or {}
            out.tool_call(ident, name, digest(item.get("arguments")), False)
            code = (0 if status != "failed" and not error else 1) if complete else -1
            result = item.get("result")
            text = error.get("message") or ("" if result is None else
                                            result if isinstance(result, str) else
                                            json.dumps(result, ensure_ascii=False, sort_keys=True, default=str))
            out.tool_result(ident, name, code, note + text, False)
        elif kind == "web_search":
            out.tool_call(ident, "web_search", digest(item.get("query") or ""), False)
            out.tool_result(ident, "web_search", 0 if complete else -1, note or None, False)
        elif kind == "error":
            out.turn(item.get("message") or "", role="system", source_kind="cli_error", visibility="harness")

    def finish(self) -> Transcript:
        for item in self.pending.values():
            self.translate(item, complete=False)
        ok = self.outcome == "completed" and not self.failed and not self.turn_open
        return self.out.finish(self.final, "completed" if ok else "error")


def parse(lines: Iterable[str], source: str, strict: bool = True) -> Transcript:
    state = _Codex()
    read_lines(lines, source, strict, state.out, state.handle)
    return state.finish()
