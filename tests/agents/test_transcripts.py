"""Agent CLI transcripts as events: the real `codex exec --json` transcripts of the coding-agent
A/B bench (shared data), a hand-authored `claude` stream-json fixture, strict and lenient lines,
and the citation convention."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
import pytest

from membench.agents.transcripts.base import TranscriptError, parse_citations
from membench.agents.transcripts.registry import FORMATS, parse_transcript
from tests.conftest import REPO, SHARED, require_shared

CODEX_DIR = SHARED / "external" / "remem-coding-bench" / "transcripts"
CODEX_NAMES = ["remem-context-visibility-policy-1", "remem-slug-normalizer-contract-1",
               "remem-ticket-key-memory-convention-1"]
CLAUDE = REPO / "tests" / "fixtures" / "transcripts" / "claude-slug.stream.jsonl"
TOKENS = ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens")


def turn_sums(transcript) -> dict[str, int]:
    return {k: sum(e.payload[k] for e in transcript.events if e.kind == "Turn") for k in TOKENS}


def totals(transcript) -> dict[str, int]:
    return {k: getattr(transcript, k) for k in TOKENS}


def kinds(transcript) -> Counter:
    return Counter(e.kind for e in transcript.events)


def assert_paired(transcript) -> None:
    """Every ToolCall has exactly one ToolResult with its call id and name, after it."""
    calls = [(i, e.payload) for i, e in enumerate(transcript.events) if e.kind == "ToolCall"]
    results = [(i, e.payload) for i, e in enumerate(transcript.events) if e.kind == "ToolResult"]
    assert len(calls) == len(results) == transcript.tool_calls
    for i, call in calls:
        (j, result), = [(j, r) for j, r in results if r["call_id"] == call["call_id"]]
        assert j > i and (result["name"], result["is_patch"]) == (call["name"], call["is_patch"])


# -- codex exec --json: the real transcripts ----------------------------------------------------------


@pytest.mark.parametrize("name", CODEX_NAMES)
def test_shared_codex_transcript_tokens_tools_and_citations(name):
    path = require_shared(CODEX_DIR / f"{name}.codex.jsonl")
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    usages = [d["usage"] for d in raw if d["type"] == "turn.completed"]
    expected = {"input_tokens": sum(u["input_tokens"] for u in usages),
                "cached_tokens": sum(u["cached_input_tokens"] for u in usages),
                "output_tokens": sum(u["output_tokens"] for u in usages),
                "reasoning_tokens": sum(u.get("reasoning_output_tokens", 0) for u in usages)}
    items = {d["item"]["id"]: d["item"]["type"] for d in raw if d["type"].startswith("item.")}
    commands = sum(1 for t in items.values() if t == "command_execution")
    changes = sum(1 for t in items.values() if t == "file_change")
    messages = [d["item"]["text"] for d in raw if d["type"] == "item.completed" and d["item"]["type"] == "agent_message"]

    transcript = parse_transcript(path.read_text(encoding="utf-8").splitlines(), "codex-exec-json", path.name)

    assert expected["input_tokens"] > 0
    assert totals(transcript) == expected == turn_sums(transcript)
    calls = Counter(e.payload["name"] for e in transcript.events if e.kind == "ToolCall")
    assert calls == {"shell": commands, "apply_patch": changes}
    assert transcript.tool_calls == commands + changes
    assert_paired(transcript)
    assert all(e.payload["is_patch"] == (e.payload["name"] == "apply_patch")
               for e in transcript.events if e.kind in ("ToolCall", "ToolResult"))
    texts = [e.payload["text"]["text"] for e in transcript.events if e.kind == "Turn" and e.payload["source_kind"] is None]
    assert texts == messages and transcript.final_message == messages[-1]
    assert transcript.cited_memory_ids == ("1",)
    assert [e.payload for e in transcript.events if e.kind == "MemoryCitation"] == [{"memory_ids": ["1"]}]
    assert transcript.status == "completed"


def test_codex_command_digest_exit_code_and_output():
    path = require_shared(CODEX_DIR / f"{CODEX_NAMES[1]}.codex.jsonl")
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    done = {d["item"]["id"]: d["item"] for d in raw
            if d["type"] == "item.completed" and d["item"]["type"] == "command_execution"}
    transcript = parse_transcript(path.read_text(encoding="utf-8").splitlines(), "codex-exec-json", path.name)
    for event in transcript.events:
        item = done.get(event.payload.get("call_id"))
        if item is None:
            continue
        if event.kind == "ToolCall":
            assert event.payload["arguments_digest"] == hashlib.sha256(item["command"].encode()).hexdigest()
        else:
            assert event.payload["exit_code"] == item["exit_code"]
            assert event.payload["output"]["sha256"] == hashlib.sha256(item["aggregated_output"].encode()).hexdigest()


def codex(*docs) -> list[str]:
    return [d if isinstance(d, str) else json.dumps(d) for d in docs]


def shell(ident: str, phase: str = "item.completed", **extra) -> dict:
    item = {"id": ident, "type": "command_execution", "command": "ls", "aggregated_output": "a\n",
            "exit_code": 0 if phase == "item.completed" else None,
            "status": "completed" if phase == "item.completed" else "in_progress", **extra}
    return {"type": phase, "item": item}


MESSAGE = {"type": "item.completed", "item": {"id": "m", "type": "agent_message",
                                              "text": "Done.\nMemory citations: memory:#B5:t:m0"}}
DONE = {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 3}}


def test_codex_counts_an_item_once_and_closes_an_unfinished_one():
    lines = codex({"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
                  shell("c1", "item.started"), shell("c1", "item.updated"), shell("c1"), shell("c1"),
                  shell("c2", "item.started"), MESSAGE, DONE, {"type": "turn.started"})
    transcript = parse_transcript(lines, "codex-exec-json", "s.jsonl")
    assert transcript.tool_calls == 2
    assert_paired(transcript)
    results = {e.payload["call_id"]: e.payload for e in transcript.events if e.kind == "ToolResult"}
    assert results["c1"]["exit_code"] == 0 and results["c2"]["exit_code"] == -1
    assert "incomplete" in results["c2"]["output"]["text"]
    assert totals(transcript) == turn_sums(transcript) == {"input_tokens": 10, "cached_tokens": 4,
                                                           "output_tokens": 3, "reasoning_tokens": 0}
    assert transcript.cited_memory_ids == ("B5:t:m0",)
    assert transcript.status == "error"  # the second turn never completed


def test_codex_failed_turn_and_cli_errors_are_harness_turns():
    lines = codex({"type": "item.completed", "item": {"id": "e", "type": "error", "message": "hooks enabled"}},
                  {"type": "turn.started"}, {"type": "turn.failed", "error": {"message": "quota exceeded"}})
    transcript = parse_transcript(lines, "codex-exec-json", "s.jsonl")
    turns = [(e.visibility, e.payload["role"], e.payload["source_kind"], e.payload["text"]["text"])
             for e in transcript.events]
    assert turns == [("harness", "system", "cli_error", "hooks enabled"),
                     ("harness", "system", "cli_error", "turn failed: quota exceeded")]
    assert transcript.status == "error" and transcript.final_message == "" and transcript.cited_memory_ids == ()


def test_codex_other_items_and_unknown_types():
    lines = codex({"type": "turn.started"},
                  {"type": "item.completed", "item": {"id": "r", "type": "reasoning", "text": "think"}},
                  {"type": "item.completed", "item": {"id": "f", "type": "file_change", "status": "failed",
                                                      "changes": [{"path": "a.py", "kind": "add"}]}},
                  {"type": "item.completed", "item": {"id": "p", "type": "mcp_tool_call", "server": "mem",
                                                      "tool": "search", "arguments": {"q": "x"},
                                                      "result": {"content": [{"type": "text", "text": "hit"}]},
                                                      "status": "completed"}},
                  {"type": "item.completed", "item": {"id": "w", "type": "web_search", "query": "q"}},
                  {"type": "item.completed", "item": {"id": "t", "type": "todo_list", "items": []}},
                  {"type": "item.completed", "item": {"type": "from_the_future"}},
                  {"type": "thread.future_event", "x": 1}, DONE)
    for strict in (True, False):
        transcript = parse_transcript(lines, "codex-exec-json", "s.jsonl", strict=strict)
        calls = [(e.payload["name"], e.payload["is_patch"]) for e in transcript.events if e.kind == "ToolCall"]
        assert calls == [("apply_patch", True), ("mcp:mem.search", False), ("web_search", False)]
        results = [e.payload for e in transcript.events if e.kind == "ToolResult"]
        assert [r["exit_code"] for r in results] == [1, 0, 0]
        assert results[0]["output"]["text"] == "add a.py\n" and "hit" in results[1]["output"]["text"]
        assert [e.payload["source_kind"] for e in transcript.events if e.kind == "Turn"] == ["reasoning", "usage"]
        assert transcript.status == "completed"


BAD_LINES = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object, got list"),
    ('{"item": {}}', "missing field 'type'"),
    ('{"type": 3}', "field 'type' must be str, got int"),
    ('{"type": "item.completed", "item": "x"}', "field 'item' must be dict, got str"),
    ('{"type": "item.completed", "item": {"id": "c", "type": "command_execution", "command": 5}}',
     "field 'item.command' must be str, got int"),
    ('{"type": "item.completed", "item": {"type": "agent_message", "text": "hi"}}', "missing field 'item.id'"),
    ('{"type": "turn.completed", "usage": {"input_tokens": -1}}', "field 'usage.input_tokens' must be a non-negative"),
    ('{"type": "turn.completed", "usage": {"output_tokens": true}}', "field 'usage.output_tokens' must be int"),
]


@pytest.mark.parametrize("bad,problem", BAD_LINES)
def test_strict_codex_refuses_a_malformed_line_naming_source_and_line(bad, problem):
    lines = codex({"type": "turn.started"}, "", shell("c1"), bad, DONE)
    with pytest.raises(TranscriptError) as info:
        parse_transcript(lines, "codex-exec-json", "run/a.codex.jsonl")
    assert str(info.value).startswith("run/a.codex.jsonl:4: ") and problem in str(info.value)


@pytest.mark.parametrize("bad,problem", BAD_LINES)
def test_lenient_codex_keeps_a_malformed_line_as_one_stdout_turn(bad, problem):
    lines = codex("warning: starting", {"type": "turn.started"}, shell("c1"), bad, MESSAGE, DONE)
    transcript = parse_transcript(lines, "codex-exec-json", "stdout", strict=False)
    stdout = [e for e in transcript.events if e.kind == "Turn" and e.payload["source_kind"] == "stdout"]
    assert len(stdout) == 1 and stdout[0].payload["text"]["text"] == f"warning: starting\n{bad}"
    assert stdout[0].payload["role"] == "agent" and stdout[0].payload["output_tokens"] == 0
    assert transcript.events[-1].kind == "MemoryCitation" and transcript.events[-2] is stdout[0]
    assert transcript.tool_calls == 1 and totals(transcript) == turn_sums(transcript)
    assert transcript.input_tokens == 10 and transcript.status == "completed"


def test_a_real_codex_transcript_with_a_broken_line_names_the_file_and_line():
    path = require_shared(CODEX_DIR / f"{CODEX_NAMES[0]}.codex.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[6] = lines[6][:40]  # cut mid-object
    with pytest.raises(TranscriptError, match=rf"^{path.name}:7: not valid JSON"):
        parse_transcript(lines, "codex-exec-json", path.name)


def test_unknown_format_is_refused():
    assert FORMATS == ("codex-exec-json", "claude-stream-json")
    with pytest.raises(ValueError, match="unknown transcript format 'aider'"):
        parse_transcript([], "aider", "x")


# -- claude -p --output-format stream-json ------------------------------------------------------------


def claude_lines() -> list[str]:
    return CLAUDE.read_text(encoding="utf-8").splitlines()


def message_usage_sums(lines: list[str]) -> dict[str, int]:
    """Computed independently: the usage of each distinct message id, once."""
    by_id = {}
    for line in lines:
        doc = json.loads(line)
        if doc["type"] == "assistant":
            by_id[doc["message"]["id"]] = doc["message"]["usage"]
    u = list(by_id.values())
    return {"input_tokens": sum(x["input_tokens"] + x["cache_creation_input_tokens"] + x["cache_read_input_tokens"]
                                for x in u),
            "cached_tokens": sum(x["cache_read_input_tokens"] for x in u),
            "output_tokens": sum(x["output_tokens"] for x in u), "reasoning_tokens": 0}


def test_claude_fixture_translates():
    lines = claude_lines()
    transcript = parse_transcript(lines, "claude-stream-json", CLAUDE.name)
    result = json.loads(lines[-1])
    assert kinds(transcript) == {"Turn": 4, "ToolCall": 3, "ToolResult": 3, "ContextCompaction": 1, "MemoryCitation": 1}
    calls = [(e.payload["call_id"], e.payload["name"], e.payload["is_patch"]) for e in transcript.events
             if e.kind == "ToolCall"]
    assert calls == [("toolu_01R", "Read", False), ("toolu_02E", "Edit", True), ("toolu_03B", "Bash", False)]
    assert_paired(transcript)
    results = {e.payload["call_id"]: e.payload for e in transcript.events if e.kind == "ToolResult"}
    assert [results[c]["exit_code"] for c, _, _ in calls] == [0, 0, 1]
    assert results["toolu_02E"]["output"]["text"] == "The file /workspace/memory_demo/slug.py has been updated."
    (compaction,) = [e.payload for e in transcript.events if e.kind == "ContextCompaction"]
    assert compaction == {"tokens_before": 155000, "tokens_after": 0}
    turns = [e.payload for e in transcript.events if e.kind == "Turn"]
    assert [t["source_kind"] for t in turns] == [None, "reasoning", None, "usage"]
    assert turns[-1]["latency_ms"] == result["duration_ms"]
    assert transcript.final_message == result["result"]
    assert transcript.cited_memory_ids == ("1", "3") and transcript.status == "completed"
    assert totals(transcript) == turn_sums(transcript) == message_usage_sums(lines)


def test_claude_usage_counts_each_message_id_once_without_a_result_line():
    lines = claude_lines()[:-1]
    ids = [json.loads(line)["message"]["id"] for line in lines if json.loads(line)["type"] == "assistant"]
    assert len(ids) > len(set(ids))  # the fixture streams a message as several lines
    transcript = parse_transcript(lines, "claude-stream-json", CLAUDE.name)
    assert totals(transcript) == turn_sums(transcript) == message_usage_sums(lines)
    assert transcript.status == "error"  # no result line: the stream was cut off
    assert transcript.cited_memory_ids == ("1", "3")  # from the last assistant text


def test_claude_result_usage_takes_precedence():
    lines = claude_lines()
    result = json.loads(lines[-1])
    result["usage"] = {"input_tokens": 1, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3,
                       "output_tokens": 4}
    transcript = parse_transcript(lines[:-1] + [json.dumps(result)], "claude-stream-json", CLAUDE.name)
    assert totals(transcript) == turn_sums(transcript) == {"input_tokens": 6, "cached_tokens": 3, "output_tokens": 4,
                                                           "reasoning_tokens": 0}


def test_claude_repeated_blocks_unanswered_calls_and_error_results():
    lines = claude_lines()
    dup = json.loads(lines[2])  # the tool_use line of msg_01A, streamed again
    error = {"type": "result", "subtype": "error_max_turns", "is_error": True, "result": "Reached max turns",
             "duration_ms": 5}
    cut = lines[:8] + [json.dumps(dup), lines[8], json.dumps(error)]  # Bash is never answered
    transcript = parse_transcript(cut, "claude-stream-json", CLAUDE.name)
    assert [e.payload["name"] for e in transcript.events if e.kind == "ToolCall"] == ["Read", "Edit", "Bash"]
    last = [e for e in transcript.events if e.kind == "ToolResult"][-1].payload
    assert (last["name"], last["exit_code"]) == ("Bash", -1)
    harness = [e for e in transcript.events if e.visibility == "harness"]
    assert [e.payload["text"]["text"] for e in harness] == ["result: error_max_turns\nReached max turns"]
    assert transcript.status == "error"
    assert totals(transcript) == turn_sums(transcript) == message_usage_sums(cut[:-1])


@pytest.mark.parametrize("bad,problem", [
    ('{"type": "assistant"}', "missing field 'message'"),
    ('{"type": "assistant", "message": {"id": "m", "content": [{"type": "tool_use", "name": "Bash"}]}}',
     "missing field 'message.content[0].id'"),
    ('{"type": "assistant", "message": {"id": "m", "content": [], "usage": {"output_tokens": "9"}}}',
     "field 'message.usage.output_tokens' must be int"),
    ('{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": 7}]}}',
     "field 'message.content[0].tool_use_id' must be str"),
    ('{"type": "system", "subtype": "compact_boundary", "compact_metadata": {"pre_tokens": "many"}}',
     "field 'compact_metadata.pre_tokens' must be int"),
])
def test_strict_claude_refuses_a_malformed_line(bad, problem):
    lines = claude_lines()
    with pytest.raises(TranscriptError) as info:
        parse_transcript(lines[:3] + [bad] + lines[3:], "claude-stream-json", "c.jsonl")
    assert str(info.value).startswith("c.jsonl:4: ") and problem in str(info.value)
    lenient = parse_transcript(lines[:3] + [bad] + lines[3:], "claude-stream-json", "c.jsonl", strict=False)
    strict = parse_transcript(lines, "claude-stream-json", "c.jsonl")
    assert lenient.tool_calls == strict.tool_calls and totals(lenient) == totals(strict)
    assert [e.payload["text"]["text"] for e in lenient.events if e.payload.get("source_kind") == "stdout"] == [bad]


# -- the citation convention --------------------------------------------------------------------------


@pytest.mark.parametrize("text,ids", [
    ("Done.\n\nMemory citations: memory:#1", ["1"]),
    ("Memory citations: memory:#1 memory:#2 memory:#1", ["1", "2"]),
    ("Memory citations: memory:#3, memory:#1.", ["3", "1"]),
    ("**Memory citations:** `memory:#1`, `memory:#2`", ["1", "2"]),
    ("**Memory citations**: memory:#7", ["7"]),
    ("- memory citations: memory:#B5:slug-normalizer-contract:m0", ["B5:slug-normalizer-contract:m0"]),
    ("Memory citations: none", []),
    ("Memory citations: memory:#1\nLater I changed my mind.\nMemory citations: memory:#2", ["2"]),
    ("Memory citations: memory:#1\nMemory citations: none", []),
    ("I used memory:#1 heavily.", []),  # no label line
    ("", []),
])
def test_parse_citations(text, ids):
    assert parse_citations(text) == ids

