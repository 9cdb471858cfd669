"""membench/exports/otel.py: a hand-made run's events → GenAI spans (names, parents, attributes, ids), its
OTLP JSON encoding, and the OTLP/HTTP sender against a local receiver."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from membench.exports.otel import (
    ExportOptions,
    LoggedEvent,
    OtelExportError,
    RunDerived,
    Sender,
    batches,
    build_run_spans,
    otlp_json,
    run_set_spans,
    span_id_of,
    trace_id_of,
    traces_endpoint,
)

RUN_ID = "1f83d6d3-530a-5989-bc6c-956b8a2b2df7"
UNIT = "smoke/smoke-currency/B5/1"
T0 = 1_796_104_189_000_000  # microseconds


def text(value: str) -> dict:
    return {"text": value, "sha256": "0" * 64, "length": len(value), "truncated": False}


def ev(seq: int, kind: str, payload: dict, session: int = 1, dt_ms: int | None = None,
       visibility: str = "agent") -> LoggedEvent:
    return LoggedEvent(RUN_ID, UNIT, session, seq, T0 + (seq * 1000 if dt_ms is None else dt_ms * 1000), kind,
                       visibility, payload)


def model_call(call_id: str, status: str = "ok", **usage) -> dict:
    return {"call_id": call_id, "provider": "openai", "api": "chat_completions", "model": "local-model",
            "mode": "forward", "status": status, "http_status": 200 if status == "ok" else 503,
            "request_digest": "a" * 64, "match_digest": "", "response_digest": None, "recorded": False,
            "streamed": True, "chunks": 3, "input_tokens": usage.get("input", 0),
            "cached_tokens": usage.get("cached", 0), "output_tokens": usage.get("output", 0),
            "reasoning_tokens": usage.get("reasoning", 0), "latency_ms": 40, "first_byte_ms": 12, "cost_usd": 0.0,
            "price": None, "error": None if status == "ok" else "503 from upstream"}


EVENTS = [
    ev(0, "RunStarted", {"suite": "smoke", "task": "smoke-currency", "condition": "B5", "seed": 1,
                         "agent": "openai:local-model", "agent_kind": "model", "model": "local-model", "budgets": {},
                         "code_digest": "c", "pack_digest": "p", "fixture_digest": "f", "attempt": 1,
                         "construct": "C1", "family": "decision"}, session=-1, visibility="harness"),
    ev(1, "OracleLabel", {"label_id": "l1", "label_type": "required", "active_session": 1,
                          "event_ids": ["e1"], "fact_ids": [], "detail": "{}"}, session=-1, visibility="harness"),
    ev(2, "SessionStarted", {"session_index": 1, "instruction": text("add parse_amount"), "start_state": "clean",
                             "workspace_digest": "w", "scored": True, "oracle_id": "s1"}),
    ev(3, "Turn", {"role": "user", "text": text("add parse_amount"), "source_event_id": None,
                   "source_kind": "instruction"}),
    ev(4, "MemoryRead", {"query": text("currency code SECRET-QUERY"), "candidates": ["B5:e1", "B5:e2"],
                         "admitted_ids": ["B5:e1"], "tokens_admitted": 37, "token_budget": 2000,
                         "context": text("[B5:e1] the default currency is HWEAK")}),
    ev(5, "ToolCall", {"call_id": "agent-1", "name": "agent_process", "arguments_digest": "d1", "is_patch": False},
       dt_ms=10),
    ev(6, "ModelCall", model_call("m1", input=509, cached=100, output=94, reasoning=7), dt_ms=100,
       visibility="harness"),
    ev(7, "ModelCall", model_call("m2", status="upstream_error"), dt_ms=200, visibility="harness"),
    ev(8, "ToolCall", {"call_id": "c1", "name": "run", "arguments_digest": "d2", "is_patch": False}, dt_ms=300),
    ev(9, "ToolResult", {"call_id": "c1", "name": "run", "exit_code": 2, "duration_ms": 50, "output_size": 9,
                         "is_patch": False, "output": text("TOOL-OUTPUT")}, dt_ms=350),
    ev(10, "ToolCall", {"call_id": "c2", "name": "write_file", "arguments_digest": "d3", "is_patch": True},
       dt_ms=360),
    ev(11, "MemoryCitation", {"memory_ids": ["B5:e1"]}, dt_ms=370),
    ev(12, "ToolResult", {"call_id": "agent-1", "name": "agent_process", "exit_code": 0, "duration_ms": 400,
                          "output_size": 0, "is_patch": False, "output": text("")}, dt_ms=410),
    ev(13, "PatchProduced", {"files": ["ledger/money.py"], "added_lines": 6, "removed_lines": 0,
                             "production_paths": ["ledger/money.py"], "test_paths": [], "stripped_paths": [],
                             "diff_sha256": "x", "production_diff": "--- a\n+++ b\n"}, dt_ms=500),
    ev(14, "OracleVerdict", {"oracle_id": "s1", "outcome": "fail", "exit_status": 1, "inconclusive": False,
                             "duration_ms": 900, "isolation": "process",
                             "cases": [{"case_id": "t1", "outcome": "pass", "duration_ms": 1},
                                       {"case_id": "t2", "outcome": "fail", "duration_ms": 1}]},
       dt_ms=1500, visibility="harness"),
    ev(15, "SessionEnded", {"session_index": 1, "status": "completed"}, dt_ms=1510),
    ev(16, "MemoryWrite", {"memory_id": "B5:e1", "memory_type": "event", "scope": ["smoke-currency"],
                           "provenance_event_ids": ["ev-1"], "content": text("MEMORY-CONTENT")}, dt_ms=1520),
    ev(17, "RunEnded", {"status": "completed", "error_type": None}, session=-1, dt_ms=1600, visibility="harness"),
]

DERIVED = RunDerived(
    run={"status": "completed", "scored_passed": False, "excluded": False, "exclusion_reason": None, "events": 18,
         "last_hash": "h", "input_tokens": 509, "output_tokens": 94},
    sessions={1: {"passed": False, "outcome": "fail", "excluded": False, "exclusion_reason": None,
                  "input_tokens": 509, "cached_tokens": 100, "output_tokens": 94, "reasoning_tokens": 7,
                  "tool_calls": 3, "memory_reads": 1, "memory_tokens_admitted": 37}},
    failures={1: {"failure_reason": "stale_memory_used", "rule": "r7", "memory_failure": True, "resolved": False}},
    contracts={1: {"memory_contract_status": "violated", "memory_helped": False, "memory_hurt": True,
                   "stale_used_count": 1, "missing_relevant_count": 0, "citation_precision": 1.0,
                   "citation_recall": None}},
    hygiene={1: [{"metric": "human_feedback_use", "label_id": "l1", "numerator": 0, "denominator": 1,
                  "construct": "C1"}]},
)


def spans(options: ExportOptions = ExportOptions(), events=EVENTS):
    return build_run_spans("S", events, DERIVED, options)


def by_name(found, name):
    matches = [s for s in found if s.name == name]
    assert len(matches) == 1, [s.name for s in found]
    return matches[0]


def all_text(found) -> str:
    return json.dumps(otlp_json(found))


def test_one_trace_per_run_with_a_root_a_session_and_genai_children():
    found = spans()
    assert [s.name for s in found] == [
        "invoke_workflow membench smoke/smoke-currency", "invoke_agent openai:local-model",
        "search_memory S/B5/1/smoke-currency", "execute_tool agent_process", "chat local-model", "chat local-model",
        "execute_tool run", "execute_tool write_file", "update_memory S/B5/1/smoke-currency"]
    assert {s.context.trace_id for s in found} == {uuid.UUID(RUN_ID).int}
    root, session, *children = found
    assert root.parent is None and root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert session.parent.span_id == root.context.span_id
    assert all(c.parent.span_id == session.context.span_id for c in children)
    assert root.start_time == T0 * 1000 and root.end_time == (T0 + 1_600_000) * 1000
    # the session span covers the session's events, the memory write after SessionEnded included
    assert session.start_time == (T0 + 2000) * 1000 and session.end_time == (T0 + 1_520_000) * 1000
    assert session.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert session.attributes["gen_ai.agent.name"] == "openai:local-model"
    assert session.attributes["gen_ai.conversation.id"] == f"{RUN_ID}/1"
    kinds = {s.name.split()[0]: s.kind for s in found}
    assert kinds == {"invoke_workflow": SpanKind.INTERNAL, "invoke_agent": SpanKind.INTERNAL,
                     "search_memory": SpanKind.CLIENT, "execute_tool": SpanKind.INTERNAL, "chat": SpanKind.CLIENT,
                     "update_memory": SpanKind.CLIENT}


def test_ids_are_derived_from_the_run_and_the_log_so_an_export_repeats_exactly():
    first, again = spans(), spans(events=list(reversed(EVENTS)))
    assert [(s.context.trace_id, s.context.span_id) for s in first] == \
           [(s.context.trace_id, s.context.span_id) for s in again]
    assert len({s.context.span_id for s in first}) == len(first)
    assert first[0].context.span_id == span_id_of(RUN_ID, "run")
    assert first[1].context.span_id == span_id_of(RUN_ID, "session/1")
    assert by_name(first, "execute_tool run").context.span_id == span_id_of(RUN_ID, "seq/8")
    assert trace_id_of(RUN_ID) == uuid.UUID(RUN_ID).int
    assert trace_id_of("not-a-uuid") == trace_id_of("not-a-uuid") != 0
    assert otlp_json(first) == otlp_json(again)


def test_chat_spans_carry_the_model_calls_usage_and_errors():
    ok, failed = [s for s in spans() if s.name.startswith("chat ")]
    a = ok.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "local-model"
    assert a["gen_ai.provider.name"] == "openai" and a["gen_ai.system"] == "openai"
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (509, 94)
    assert a["gen_ai.usage.cache_read.input_tokens"] == 100 and a["gen_ai.usage.reasoning.output_tokens"] == 7
    assert a["gen_ai.request.stream"] is True and a["gen_ai.response.time_to_first_chunk"] == 0.012
    assert a["membench.model_call.id"] == "m1" and "error.type" not in a
    # the event is written when the answer ends: the span is [ts - latency, ts]
    assert (ok.start_time, ok.end_time) == ((T0 + 60_000) * 1000, (T0 + 100_000) * 1000)
    assert ok.status.status_code == StatusCode.UNSET
    assert failed.attributes["error.type"] == "upstream_error"
    assert failed.status.status_code == StatusCode.ERROR and failed.status.description == "503 from upstream"


def test_tool_spans_pair_call_and_result():
    found = spans()
    run = by_name(found, "execute_tool run")
    assert run.attributes["gen_ai.tool.name"] == "run" and run.attributes["gen_ai.tool.call.id"] == "c1"
    assert (run.start_time, run.end_time) == ((T0 + 300_000) * 1000, (T0 + 350_000) * 1000)
    assert run.attributes["error.type"] == "nonzero_exit" and run.attributes["process.exit.code"] == 2
    assert run.status.status_code == StatusCode.ERROR
    agent = by_name(found, "execute_tool agent_process")
    assert agent.end_time == (T0 + 410_000) * 1000 and "error.type" not in agent.attributes
    # a call whose result never came ends with its session
    unfinished = by_name(found, "execute_tool write_file")
    assert unfinished.attributes["membench.tool.result_missing"] is True
    assert unfinished.end_time == found[1].end_time


def test_memory_spans_have_ids_counts_and_budget_but_no_content_by_default():
    found = spans()
    read = by_name(found, "search_memory S/B5/1/smoke-currency").attributes
    assert read["gen_ai.operation.name"] == "search_memory"
    assert read["gen_ai.memory.store.id"] == "S/B5/1/smoke-currency"
    assert read["gen_ai.memory.record.count"] == 1
    assert list(read["membench.memory.admitted_ids"]) == ["B5:e1"]
    assert read["membench.memory.candidate_count"] == 2
    assert (read["membench.memory.tokens_admitted"], read["membench.memory.token_budget"]) == (37, 2000)
    write = by_name(found, "update_memory S/B5/1/smoke-currency").attributes
    assert write["gen_ai.operation.name"] == "update_memory" and write["gen_ai.memory.record.id"] == "B5:e1"
    assert write["membench.memory.type"] == "event"
    exported = all_text(found)
    for secret in ("SECRET-QUERY", "HWEAK", "MEMORY-CONTENT", "TOOL-OUTPUT", "add parse_amount", "+++ b"):
        assert secret not in exported
    assert "gen_ai.memory.query.text" not in exported and "gen_ai.memory.records" not in exported


def test_include_content_adds_queries_records_messages_and_tool_output():
    found = spans(ExportOptions(include_content=True))
    read = by_name(found, "search_memory S/B5/1/smoke-currency").attributes
    assert read["gen_ai.memory.query.text"] == "currency code SECRET-QUERY"
    assert json.loads(read["gen_ai.memory.records"])[0]["content"] == "[B5:e1] the default currency is HWEAK"
    write = by_name(found, "update_memory S/B5/1/smoke-currency").attributes
    assert json.loads(write["gen_ai.memory.records"]) == [
        {"id": "B5:e1", "content": "MEMORY-CONTENT", "metadata": {"memory_type": "event", "scope": ["smoke-currency"]}}]
    assert by_name(found, "execute_tool run").attributes["gen_ai.tool.call.result"] == "TOOL-OUTPUT"
    assert json.loads(found[1].attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "add parse_amount"}]}]


def test_verdict_failure_contract_and_hygiene_are_on_the_session_span():
    session = spans()[1]
    a = session.attributes
    assert a["membench.verdict.outcome"] == "fail" and a["membench.verdict.passed"] is False
    assert a["membench.verdict.cases"] == 2 and a["membench.verdict.cases_passed"] == 1
    assert a["membench.failure.reason"] == "stale_memory_used" and a["membench.failure.memory_failure"] is True
    assert a["membench.memory_contract.status"] == "violated" and "membench.memory_contract.citation_recall" not in a
    assert a["membench.session.scored"] is True and a["membench.session.status"] == "completed"
    names = [e.name for e in session.events]
    assert names == ["membench.turn", "membench.memory_citation", "membench.patch_produced",
                     "membench.oracle_verdict", "membench.hygiene_observation"]
    verdict = session.events[3]
    assert list(verdict.attributes["membench.verdict.failed_cases"]) == ["t2"]
    hygiene = session.events[4].attributes
    assert (hygiene["membench.hygiene.metric"], hygiene["membench.hygiene.numerator"],
            hygiene["membench.hygiene.denominator"]) == ("human_feedback_use", 0, 1)
    root = spans()[0].attributes
    assert root["membench.run.status"] == "completed" and root["membench.condition"] == "B5"


def test_harness_only_events_stay_out_unless_asked_for():
    assert "OracleLabel" not in all_text(spans())
    root = spans(ExportOptions(include_harness=True))[0]
    label = [e for e in root.events if e.name == "membench.harness.OracleLabel"]
    assert len(label) == 1 and json.loads(label[0].attributes["membench.payload"])["label_id"] == "l1"


def test_otlp_json_is_the_otlp_encoding_with_hex_ids():
    found = spans()
    doc = otlp_json(found)
    [resource_spans] = doc["resourceSpans"]
    attrs = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
    assert attrs["service.name"] == {"stringValue": "membench"} and attrs["membench.run_set"] == {"stringValue": "S"}
    [scope] = resource_spans["scopeSpans"]
    assert scope["scope"]["name"] == "membench.exports.otel"
    out = scope["spans"]
    assert len(out) == len(found)
    assert out[0]["traceId"] == uuid.UUID(RUN_ID).hex and "parentSpanId" not in out[0]
    assert out[1]["parentSpanId"] == out[0]["spanId"] == f"{span_id_of(RUN_ID, 'run'):016x}"
    chat = next(s for s in out if s["name"] == "chat local-model")
    assert chat["kind"] == 3  # SPAN_KIND_CLIENT
    usage = {a["key"]: a["value"] for a in chat["attributes"]}["gen_ai.usage.input_tokens"]
    assert int(usage["intValue"]) == 509
    assert json.loads(json.dumps(doc)) == doc


def test_batches_keep_runs_whole():
    runs = [[1] * 600, [2] * 600, [3] * 100, [4] * 1500]
    assert [len(b) for b in batches(runs, max_spans=1000)] == [600, 700, 1500]


def test_endpoint_urls():
    assert traces_endpoint("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert traces_endpoint("http://127.0.0.1:6006/") == "http://127.0.0.1:6006/v1/traces"
    assert traces_endpoint("https://x.example/api/v1/traces") == "https://x.example/api/v1/traces"
    with pytest.raises(OtelExportError):
        traces_endpoint("127.0.0.1:6006")


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, dict, bytes]] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_sender_posts_the_same_spans_as_otlp_protobuf():
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sender = Sender(f"http://127.0.0.1:{server.server_port}", {"x-api-key": "k1"}, timeout_s=5)
        found = spans()
        sender.send(found)
        sender.close()
    finally:
        server.shutdown()
        server.server_close()
    [(path, headers, body)] = _Receiver.bodies
    assert path == "/v1/traces" and headers.get("x-api-key") == "k1"
    request = ExportTraceServiceRequest.FromString(body)
    received = request.resource_spans[0].scope_spans[0].spans
    assert [s.name for s in received] == [s.name for s in found]
    assert [s.span_id.hex() for s in received] == [f"{s.context.span_id:016x}" for s in found]
    assert MessageToDict(request, use_integers_for_enums=True)["resourceSpans"][0]["scopeSpans"][0]["spans"][0][
        "name"] == found[0].name


def test_an_unreachable_endpoint_is_an_error_naming_it():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sender = Sender(f"http://127.0.0.1:{port}/v1/traces", timeout_s=1)
    with pytest.raises(OtelExportError, match=f"127.0.0.1:{port}/v1/traces"):
        sender.send(spans())
    sender.close()


class _EmptyWarehouse:
    def query_rows(self, sql, parameters=None):
        return []

    def query_dicts(self, sql, parameters=None):
        return []


def test_an_unknown_run_set_is_an_error_naming_it():
    with pytest.raises(OtelExportError, match="unknown run set 'nope'"):
        next(run_set_spans(_EmptyWarehouse(), "nope"))
