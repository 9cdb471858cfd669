"""A run set as OpenTelemetry traces that follow the GenAI semantic conventions (docs/exports/otel.md).

One trace per run (trace id: the run id's 16 UUID bytes), a root `invoke_workflow` span per run,
an `invoke_agent` span per session, and beneath it a `chat` span per ModelCall, an `execute_tool`
span per ToolCall/ToolResult pair, and `search_memory` / `update_memory` spans per MemoryRead /
MemoryWrite. Verdicts, failure reasons, memory contracts and hygiene observations from the derived
tables become `membench.*` attributes and span events on the session spans.

The spans are built after the fact as the SDK's `ReadableSpan` objects with explicit ids, parents
and timestamps (no tracer, no IdGenerator: every span's start, end and parent is known from the log
before the span is made), so the same spans go to an OTLP/HTTP endpoint through the SDK's own
exporter and, encoded by the SDK's own OTLP encoder, into an OTLP JSON file. Ids are derived from
the run id and the event's place in the log, so exporting a run set twice gives identical traces.

`build_run_spans` is pure (events and derived rows in, spans out); `load_run_events` and
`load_derived` read the warehouse; `otlp_json` and `send` write.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as SpanEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from membench.warehouse import queries
from membench.warehouse.protocol import WarehouseReader

SCOPE = InstrumentationScope("membench.exports.otel", "1")

# the harness-visible kinds this export maps on purpose; every other harness event stays out unless
# ExportOptions.include_harness is set (gold labels, for instance, are the oracle's, not the agent's)
MAPPED_HARNESS_KINDS = frozenset({"RunStarted", "RunEnded", "ModelCall", "OracleVerdict"})
USER_ROLES = ("user", "simulated_user")


class OtelExportError(RuntimeError):
    pass


@dataclass(frozen=True)
class ExportOptions:
    include_content: bool = False  # query texts, memory contents, turns, tool output, diffs
    include_harness: bool = False  # unmapped harness-only events (OracleLabel, ...) as span events


@dataclass(frozen=True)
class LoggedEvent:
    """One row of `trajectory_events`, payload decoded."""

    run_id: str
    unit_id: str
    session_index: int
    seq: int
    ts_us: int
    kind: str
    visibility: str
    payload: Mapping[str, Any]


@dataclass
class RunDerived:
    """A run's rows of the derived tables: `run` (run_results), and per session index `sessions`
    (session_results), `failures`, `contracts` (memory_contracts), `hygiene` (a list)."""

    run: Mapping[str, Any] | None = None
    sessions: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    failures: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    contracts: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    hygiene: dict[int, list[Mapping[str, Any]]] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------- ids


def trace_id_of(run_id: str) -> int:
    """The run id's 16 bytes (run ids are UUIDv5); any other id: the first 16 bytes of its SHA-256."""
    try:
        value = uuid.UUID(run_id).int
    except ValueError:
        value = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:16], "big")
    return value or 1


def span_id_of(run_id: str, key: str) -> int:
    """8 bytes of SHA-256(run id, key); key is `run`, `session/N` or `seq/N` (the opening event)."""
    value = int.from_bytes(hashlib.sha256(f"{run_id}\n{key}".encode()).digest()[:8], "big")
    return value or 1


# ------------------------------------------------------------------------------------------ mapping


@dataclass
class _Draft:
    key: str
    name: str
    kind: SpanKind
    start_us: int
    end_us: int
    parent: str | None
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    error_message: str | None = None


def _text(value: Any) -> str:
    """The text of a BoundedText payload field (or a plain string)."""
    if isinstance(value, Mapping):
        return str(value.get("text") or "")
    return "" if value is None else str(value)


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Drops None values; OTel attributes are primitives or homogeneous lists of them."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value] if not all(isinstance(v, (bool, int, float)) for v in value) \
                else list(value)
        else:
            out[key] = value
    return out


def _messages(turns: list[Mapping[str, Any]], output: bool) -> str:
    """Turns as the GenAI input/output messages JSON (role, text parts; output messages carry a
    finish_reason, which the log does not know: `stop`)."""
    out = []
    for turn in turns:
        role = "assistant" if turn.get("role") == "agent" else ("system" if turn.get("role") == "system" else "user")
        message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": _text(turn.get("text"))}]}
        if output:
            message["finish_reason"] = "stop"
        out.append(message)
    return json.dumps(out, ensure_ascii=False)


class _RunMapper:
    def __init__(self, run_set: str, events: Sequence[LoggedEvent], derived: RunDerived, options: ExportOptions):
        self.run_set = run_set
        self.events = sorted(events, key=lambda e: e.seq)
        self.derived = derived
        self.options = options
        self.run_id = self.events[0].run_id
        self.unit_id = self.events[0].unit_id
        self.drafts: dict[str, _Draft] = {}
        self.order: list[str] = []
        started = next((e for e in self.events if e.kind == "RunStarted"), None)
        self.started: Mapping[str, Any] = started.payload if started else {}
        parts = self.unit_id.split("/")
        self.condition = str(self.started.get("condition") or (parts[2] if len(parts) > 2 else ""))
        self.seed = self.started.get("seed", parts[3] if len(parts) > 3 else "")
        self.task = str(self.started.get("task") or (parts[1] if len(parts) > 1 else ""))
        self.suite = str(self.started.get("suite") or parts[0])
        self.agent = str(self.started.get("agent") or "agent")
        self.model = self.started.get("model")
        # the condition's memory namespace (run set, condition, seed, sequence): the memory store
        self.store_id = f"{run_set}/{self.condition}/{self.seed}/{self.task}"

    # -- drafts

    def _add(self, draft: _Draft) -> _Draft:
        self.drafts[draft.key] = draft
        self.order.append(draft.key)
        return draft

    def _parent_of(self, event: LoggedEvent) -> str:
        key = f"session/{event.session_index}"
        return key if event.session_index >= 0 and key in self.drafts else "run"

    def _common(self, event: LoggedEvent) -> dict[str, Any]:
        return {"membench.event.seq": event.seq, "membench.event.kind": event.kind}

    # -- the mapping

    def build(self) -> list[_Draft]:
        first, last = self.events[0].ts_us, max(e.ts_us for e in self.events)
        workflow = f"membench {self.suite}/{self.task}"
        root = self._add(_Draft("run", f"invoke_workflow {workflow}", SpanKind.INTERNAL, first, last, None, {
            "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": workflow,
            "membench.run_set": self.run_set, "membench.run_id": self.run_id, "membench.unit_id": self.unit_id,
            "membench.suite": self.suite, "membench.task": self.task, "membench.condition": self.condition,
            "membench.seed": self.seed if isinstance(self.seed, int) else str(self.seed),
            "membench.agent": self.agent, "membench.agent_kind": self.started.get("agent_kind"),
            "membench.model": self.model, "membench.attempt": self.started.get("attempt"),
            "membench.construct": self.started.get("construct"), "membench.family": self.started.get("family"),
        }))
        self._sessions()
        open_tools: dict[tuple[int, str], _Draft] = {}
        for index, event in enumerate(self.events):
            next_us = self.events[index + 1].ts_us if index + 1 < len(self.events) else event.ts_us
            if event.visibility == "harness" and event.kind not in MAPPED_HARNESS_KINDS:
                if self.options.include_harness:
                    self._event_on(self._parent_of(event), f"membench.harness.{event.kind}", event, {
                        "membench.payload": json.dumps(event.payload, ensure_ascii=False, sort_keys=True)})
                continue
            handler = getattr(self, f"_on_{event.kind}", None)
            if handler is not None:
                handler(event, next_us, open_tools)
            elif event.kind not in ("RunStarted", "SessionStarted", "SessionEnded"):
                self._event_on(self._parent_of(event), "membench.event", event, {})
        for tool in open_tools.values():  # a call whose result never came (the session ended first)
            tool.end_us = max(tool.start_us, self.drafts[tool.parent or "run"].end_us)
            tool.attributes["membench.tool.result_missing"] = True
        self._derived(root)
        return [self.drafts[key] for key in self.order]

    def _sessions(self) -> None:
        by_session: dict[int, list[LoggedEvent]] = {}
        for event in self.events:
            if event.session_index >= 0:
                by_session.setdefault(event.session_index, []).append(event)
        for index in sorted(by_session):
            evs = by_session[index]
            started = next((e for e in evs if e.kind == "SessionStarted"), None)
            ended = next((e for e in evs if e.kind == "SessionEnded"), None)
            payload = started.payload if started else {}
            start = started.ts_us if started else min(e.ts_us for e in evs)
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent,
                "gen_ai.agent.id": self.unit_id, "gen_ai.conversation.id": f"{self.run_id}/{index}",
                "gen_ai.request.model": self.model, "membench.session.index": index,
                "membench.session.scored": payload.get("scored"), "membench.session.start_state": payload.get("start_state"),
                "membench.session.oracle_id": payload.get("oracle_id"),
                "membench.session.status": ended.payload.get("status") if ended else None,
            }
            draft = self._add(_Draft(f"session/{index}", f"invoke_agent {self.agent}", SpanKind.INTERNAL, start,
                                     max(e.ts_us for e in evs), "run", attrs))
            if ended is not None and ended.payload.get("status") not in (None, "completed"):
                draft.error = str(ended.payload["status"])
            if self.options.include_content:
                turns = [e.payload for e in evs if e.kind == "Turn"]
                user = [t for t in turns if t.get("role") != "agent"]
                agent = [t for t in turns if t.get("role") == "agent"]
                if user:
                    attrs["gen_ai.input.messages"] = _messages(user, output=False)
                if agent:
                    attrs["gen_ai.output.messages"] = _messages(agent, output=True)

    def _event_on(self, key: str, name: str, event: LoggedEvent, attributes: dict[str, Any]) -> None:
        self.drafts[key].events.append((name, event.ts_us, {**self._common(event), **attributes}))

    def _on_RunEnded(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        root = self.drafts["run"]
        status, error_type = event.payload.get("status"), event.payload.get("error_type")
        root.attributes.update({"membench.run.status": status, "membench.run.error_type": error_type})
        if status == "error":
            root.error = str(error_type or "error")

    def _on_ModelCall(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        latency_us = int(p.get("latency_ms") or 0) * 1000
        attrs = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": p.get("provider"), "gen_ai.system": p.get("provider"),
            "gen_ai.request.model": p.get("model"), "gen_ai.request.stream": bool(p.get("streamed")),
            "gen_ai.usage.input_tokens": int(p.get("input_tokens") or 0),
            "gen_ai.usage.output_tokens": int(p.get("output_tokens") or 0),
            "gen_ai.usage.cache_read.input_tokens": int(p.get("cached_tokens") or 0),
            "gen_ai.usage.reasoning.output_tokens": int(p.get("reasoning_tokens") or 0),
            "http.response.status_code": p.get("http_status") or None,
            "membench.model_call.id": p.get("call_id"), "membench.model_call.api": p.get("api"),
            "membench.model_call.mode": p.get("mode"), "membench.model_call.status": p.get("status"),
            "membench.model_call.latency_ms": p.get("latency_ms"),
            "membench.model_call.first_byte_ms": p.get("first_byte_ms"), "membench.model_call.chunks": p.get("chunks"),
            "membench.model_call.cost_usd": float(p.get("cost_usd") or 0.0), "membench.model_call.price": p.get("price"),
            "membench.model_call.recorded": p.get("recorded"),
            "membench.model_call.request_digest": p.get("request_digest"),
            "membench.model_call.response_digest": p.get("response_digest"),
            **self._common(event),
        }
        if p.get("streamed") and p.get("first_byte_ms"):
            attrs["gen_ai.response.time_to_first_chunk"] = int(p["first_byte_ms"]) / 1000.0
        draft = self._add(_Draft(f"seq/{event.seq}", f"chat {p.get('model')}", SpanKind.CLIENT,
                                 event.ts_us - latency_us, event.ts_us, self._parent_of(event), attrs))
        if p.get("status") not in (None, "ok"):
            draft.error = str(p["status"])
            draft.error_message = p.get("error")

    def _on_OracleVerdict(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        cases = list(p.get("cases") or [])
        attrs = {
            "membench.verdict.outcome": p.get("outcome"), "membench.verdict.oracle_id": p.get("oracle_id"),
            "membench.verdict.exit_status": p.get("exit_status"), "membench.verdict.inconclusive": p.get("inconclusive"),
            "membench.verdict.duration_ms": p.get("duration_ms"), "membench.verdict.isolation": p.get("isolation"),
            "membench.verdict.cases": len(cases),
            "membench.verdict.cases_passed": sum(1 for c in cases if c.get("outcome") == "pass"),
        }
        key = self._parent_of(event)
        self.drafts[key].attributes.update(attrs)
        self._event_on(key, "membench.oracle_verdict", event, {
            **attrs, "membench.verdict.failed_cases": [c.get("case_id") for c in cases if c.get("outcome") != "pass"]})

    def _on_ToolCall(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        name = str(p.get("name"))
        draft = self._add(_Draft(f"seq/{event.seq}", f"execute_tool {name}", SpanKind.INTERNAL, event.ts_us,
                                 event.ts_us, self._parent_of(event), {
                                     "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                     "gen_ai.tool.call.id": p.get("call_id"), "gen_ai.tool.type": "function",
                                     "membench.tool.arguments_digest": p.get("arguments_digest"),
                                     "membench.tool.is_patch": p.get("is_patch"), **self._common(event)}))
        open_tools[(event.session_index, str(p.get("call_id")))] = draft

    def _on_ToolResult(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        draft = open_tools.pop((event.session_index, str(p.get("call_id"))), None)
        if draft is None:  # a result without its call: the span is the result's own duration
            name = str(p.get("name"))
            draft = self._add(_Draft(f"seq/{event.seq}", f"execute_tool {name}", SpanKind.INTERNAL,
                                     event.ts_us - int(p.get("duration_ms") or 0) * 1000, event.ts_us,
                                     self._parent_of(event), {
                                         "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                                         "gen_ai.tool.call.id": p.get("call_id"), "gen_ai.tool.type": "function",
                                         "membench.tool.call_missing": True, **self._common(event)}))
        draft.end_us = max(draft.start_us, event.ts_us)
        exit_code = int(p.get("exit_code") or 0)
        draft.attributes.update({
            "process.exit.code": exit_code, "membench.tool.duration_ms": p.get("duration_ms"),
            "membench.tool.output_size": p.get("output_size"), "membench.tool.result_seq": event.seq})
        if exit_code != 0:
            draft.error = "nonzero_exit"
            draft.error_message = f"exit code {exit_code}"
        if self.options.include_content and p.get("output") is not None:
            draft.attributes["gen_ai.tool.call.result"] = _text(p.get("output"))

    def _on_MemoryRead(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        admitted = list(p.get("admitted_ids") or [])
        attrs = {
            "gen_ai.operation.name": "search_memory", "gen_ai.memory.store.id": self.store_id,
            "gen_ai.memory.record.count": len(admitted), "membench.memory.system": self.condition,
            "membench.memory.admitted_ids": admitted, "membench.memory.candidate_ids": list(p.get("candidates") or []),
            "membench.memory.candidate_count": len(p.get("candidates") or []),
            "membench.memory.tokens_admitted": int(p.get("tokens_admitted") or 0),
            "membench.memory.token_budget": int(p.get("token_budget") or 0),
            "membench.memory.query_sha256": (p.get("query") or {}).get("sha256"),
            **self._common(event),
        }
        if self.options.include_content:
            attrs["gen_ai.memory.query.text"] = _text(p.get("query"))
            attrs["gen_ai.memory.records"] = json.dumps(
                [{"content": _text(p.get("context")), "metadata": {"admitted_ids": admitted}}], ensure_ascii=False)
        self._add(_Draft(f"seq/{event.seq}", f"search_memory {self.store_id}", SpanKind.CLIENT, event.ts_us,
                         max(event.ts_us, next_us), self._parent_of(event), attrs))

    def _on_MemoryWrite(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        attrs = {
            "gen_ai.operation.name": "update_memory", "gen_ai.memory.store.id": self.store_id,
            "gen_ai.memory.record.id": p.get("memory_id"), "gen_ai.memory.record.count": 1,
            "membench.memory.system": self.condition, "membench.memory.type": p.get("memory_type"),
            "membench.memory.scope": list(p.get("scope") or []),
            "membench.memory.provenance_event_ids": list(p.get("provenance_event_ids") or []),
            "membench.memory.content_sha256": (p.get("content") or {}).get("sha256"),
            "membench.memory.content_length": (p.get("content") or {}).get("length"),
            **self._common(event),
        }
        if self.options.include_content:
            attrs["gen_ai.memory.records"] = json.dumps([{
                "id": p.get("memory_id"), "content": _text(p.get("content")),
                "metadata": {"memory_type": p.get("memory_type"), "scope": list(p.get("scope") or [])}}],
                ensure_ascii=False)
        self._add(_Draft(f"seq/{event.seq}", f"update_memory {self.store_id}", SpanKind.CLIENT, event.ts_us,
                         max(event.ts_us, next_us), self._parent_of(event), attrs))

    def _on_Turn(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        attrs = {"membench.turn.role": p.get("role"), "membench.turn.source_kind": p.get("source_kind"),
                 "membench.turn.source_event_id": p.get("source_event_id"),
                 "membench.turn.length": (p.get("text") or {}).get("length")}
        for name in ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens"):
            if p.get(name):
                attrs[f"membench.turn.{name}"] = int(p[name])
        if self.options.include_content:
            attrs["membench.turn.text"] = _text(p.get("text"))
        self._event_on(self._parent_of(event), "membench.turn", event, attrs)

    def _on_MemoryCitation(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        self._event_on(self._parent_of(event), "membench.memory_citation", event,
                       {"membench.memory.cited_ids": list(event.payload.get("memory_ids") or [])})

    def _on_ContextCompaction(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        self._event_on(self._parent_of(event), "membench.context_compaction", event, {
            "membench.compaction.tokens_before": event.payload.get("tokens_before"),
            "membench.compaction.tokens_after": event.payload.get("tokens_after")})

    def _on_PatchProduced(self, event: LoggedEvent, next_us: int, open_tools: dict) -> None:
        p = event.payload
        attrs = {"membench.patch.files": list(p.get("files") or []), "membench.patch.added_lines": p.get("added_lines"),
                 "membench.patch.removed_lines": p.get("removed_lines"),
                 "membench.patch.stripped_paths": list(p.get("stripped_paths") or []),
                 "membench.patch.diff_sha256": p.get("diff_sha256")}
        if self.options.include_content and p.get("production_diff") is not None:
            attrs["membench.patch.production_diff"] = p.get("production_diff")
        self._event_on(self._parent_of(event), "membench.patch_produced", event, attrs)

    def _derived(self, root: _Draft) -> None:
        d = self.derived
        if d.run:
            root.attributes.update({
                "membench.run.status": d.run.get("status"), "membench.run.scored_passed": d.run.get("scored_passed"),
                "membench.run.excluded": d.run.get("excluded"), "membench.run.exclusion_reason": d.run.get("exclusion_reason"),
                "membench.run.events": d.run.get("events"), "membench.run.last_hash": d.run.get("last_hash"),
                "membench.run.input_tokens": d.run.get("input_tokens"), "membench.run.output_tokens": d.run.get("output_tokens")})
        for key in self.order:
            if not key.startswith("session/"):
                continue
            index, draft = int(key.split("/", 1)[1]), self.drafts[key]
            if (row := d.sessions.get(index)) is not None:
                draft.attributes.update({
                    "membench.verdict.passed": row.get("passed"), "membench.verdict.outcome": row.get("outcome"),
                    "membench.session.excluded": row.get("excluded"),
                    "membench.session.exclusion_reason": row.get("exclusion_reason"),
                    "membench.session.input_tokens": row.get("input_tokens"),
                    "membench.session.cached_tokens": row.get("cached_tokens"),
                    "membench.session.output_tokens": row.get("output_tokens"),
                    "membench.session.reasoning_tokens": row.get("reasoning_tokens"),
                    "membench.session.tool_calls": row.get("tool_calls"),
                    "membench.session.memory_reads": row.get("memory_reads"),
                    "membench.session.memory_tokens_admitted": row.get("memory_tokens_admitted")})
            if (row := d.failures.get(index)) is not None:
                draft.attributes.update({
                    "membench.failure.reason": row.get("failure_reason"), "membench.failure.rule": row.get("rule"),
                    "membench.failure.memory_failure": row.get("memory_failure"),
                    "membench.failure.resolved": row.get("resolved")})
            if (row := d.contracts.get(index)) is not None:
                draft.attributes.update({
                    "membench.memory_contract.status": row.get("memory_contract_status"),
                    "membench.memory_contract.memory_helped": row.get("memory_helped"),
                    "membench.memory_contract.memory_hurt": row.get("memory_hurt"),
                    "membench.memory_contract.stale_used_count": row.get("stale_used_count"),
                    "membench.memory_contract.missing_relevant_count": row.get("missing_relevant_count"),
                    "membench.memory_contract.citation_precision": row.get("citation_precision"),
                    "membench.memory_contract.citation_recall": row.get("citation_recall")})
            for row in d.hygiene.get(index, []):
                draft.events.append(("membench.hygiene_observation", draft.end_us, {
                    "membench.hygiene.metric": row.get("metric"), "membench.hygiene.label_id": row.get("label_id"),
                    "membench.hygiene.numerator": row.get("numerator"),
                    "membench.hygiene.denominator": row.get("denominator"),
                    "membench.hygiene.construct": row.get("construct")}))


def build_run_spans(run_set: str, events: Sequence[LoggedEvent], derived: RunDerived | None = None,
                    options: ExportOptions = ExportOptions(), resource: Resource | None = None) -> list[ReadableSpan]:
    """The spans of one run (its events, any order), root first, then sessions, then the rest in log
    order. Pure: the same events give the same spans, ids included."""
    if not events:
        return []
    mapper = _RunMapper(run_set, events, derived or RunDerived(), options)
    drafts = mapper.build()
    trace_id = trace_id_of(mapper.run_id)
    resource = resource or default_resource(run_set)

    def context(key: str) -> SpanContext:
        return SpanContext(trace_id, span_id_of(mapper.run_id, key), is_remote=False,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))

    spans = []
    for draft in drafts:
        status = Status(StatusCode.ERROR, draft.error_message or draft.error) if draft.error else Status(StatusCode.UNSET)
        attributes = _clean(draft.attributes)
        if draft.error:
            attributes["error.type"] = draft.error
        spans.append(ReadableSpan(
            name=draft.name, context=context(draft.key),
            parent=context(draft.parent) if draft.parent else None, resource=resource, attributes=attributes,
            events=[SpanEvent(name, _clean(attrs), timestamp=ts_us * 1000) for name, ts_us, attrs in draft.events],
            kind=draft.kind, status=status, start_time=draft.start_us * 1000,
            end_time=max(draft.start_us, draft.end_us) * 1000, instrumentation_scope=SCOPE))
    return spans


def default_resource(run_set: str, extra: Mapping[str, str] | None = None) -> Resource:
    """`service.name` membench and the run set; built without the SDK's detectors (`Resource.create`
    adds a random `service.instance.id`), so an export is the same every time."""
    return Resource({"service.name": "membench", "telemetry.sdk.name": "opentelemetry",
                     "telemetry.sdk.language": "python", "membench.run_set": run_set, **(extra or {})})


# ------------------------------------------------------------------------------------------ reading


def run_ids(warehouse: WarehouseReader, run_set: str) -> list[str]:
    return queries.raw_run_ids(warehouse, run_set)


def load_run_events(warehouse: WarehouseReader, run_id: str) -> list[LoggedEvent]:
    rows = queries.raw_events_of_run(warehouse, run_id)
    return [LoggedEvent(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), str(r[5]), str(r[6]), json.loads(r[7]))
            for r in rows]


def load_derived(warehouse: WarehouseReader, run_set: str) -> dict[str, RunDerived]:
    """run_id -> its derived rows (each table read once; LIMIT 1 BY guards retried inserts)."""
    out: dict[str, RunDerived] = {}

    def rows(table: str, key: str) -> list[dict[str, Any]]:
        return queries.derived_table(warehouse, table, run_set, key)

    for row in rows("run_results", "run_id"):
        out.setdefault(row["run_id"], RunDerived()).run = row
    for table, attr in (("session_results", "sessions"), ("failures", "failures"), ("memory_contracts", "contracts")):
        for row in rows(table, "run_id, session_index"):
            getattr(out.setdefault(row["run_id"], RunDerived()), attr)[int(row["session_index"])] = row
    for row in rows("hygiene_observations", "derived_id"):
        out.setdefault(row["run_id"], RunDerived()).hygiene.setdefault(int(row["session_index"]), []).append(row)
    return out


def run_set_spans(warehouse: WarehouseReader, run_set: str, options: ExportOptions = ExportOptions(),
                  resource: Resource | None = None) -> Iterator[list[ReadableSpan]]:
    """Per run of RUN_SET (every attempt), its spans; OtelExportError when the warehouse holds no
    event of RUN_SET."""
    ids = run_ids(warehouse, run_set)
    if not ids:
        held = queries.raw_run_sets(warehouse)
        listed = ", ".join(held[:20]) + (", ..." if len(held) > 20 else "") if held else "none"
        raise OtelExportError(f"unknown run set '{run_set}': the warehouse holds no events of it (run sets: {listed})")
    derived = load_derived(warehouse, run_set)
    resource = resource or default_resource(run_set)
    for run_id in ids:
        yield build_run_spans(run_set, load_run_events(warehouse, run_id), derived.get(run_id), options, resource)


# ------------------------------------------------------------------------------------------ writing

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(value: Any) -> Any:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON wants trace and span ids as hex."""
    if isinstance(value, dict):
        return {k: (base64.b64decode(v).hex() if k in _ID_FIELDS and isinstance(v, str) else _hex_ids(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """SPANS as one ExportTraceServiceRequest in the OTLP/JSON encoding (the SDK's OTLP protobuf
    encoder, then protobuf's JSON mapping with lowerCamelCase names, enums as integers and ids as
    hex, as the OTLP specification requires)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return _hex_ids(MessageToDict(encode_spans(spans), use_integers_for_enums=True))


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def traces_endpoint(url: str) -> str:
    """URL as given when it names a path; a bare base URL gets OTLP/HTTP's `/v1/traces`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OtelExportError(f"--endpoint: '{url}' is not an http(s):// URL")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/v1/traces"


class Sender:
    """Sends spans to an OTLP/HTTP endpoint with the SDK's exporter; a failed export raises
    OtelExportError with the exporter's own reason (which it logs, and which is captured here)."""

    def __init__(self, endpoint: str, headers: Mapping[str, str] | None = None, timeout_s: float = 10.0):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.endpoint = traces_endpoint(endpoint)
        self._exporter = OTLPSpanExporter(endpoint=self.endpoint, headers=dict(headers or {}), timeout=timeout_s)

    def send(self, spans: Sequence[ReadableSpan]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not spans:
            return
        logger = logging.getLogger("opentelemetry")
        handler, propagate = _Captured(), logger.propagate
        logger.addHandler(handler)
        logger.propagate = False
        try:
            result = self._exporter.export(list(spans))
        finally:
            logger.removeHandler(handler)
            logger.propagate = propagate
        if result is not SpanExportResult.SUCCESS:
            messages = handler.messages or ["the exporter gave no reason"]
            reason = messages[0] if len(messages) == 1 else f"{messages[0]} ... {messages[-1]}"
            raise OtelExportError(f"could not export {len(spans)} spans to {self.endpoint}: {reason}")

    def close(self) -> None:
        self._exporter.shutdown()


def batches(span_lists: Iterable[list[ReadableSpan]], max_spans: int = 1000) -> Iterator[list[ReadableSpan]]:
    """Whole runs grouped into batches of at most MAX_SPANS spans (a larger run is a batch alone)."""
    batch: list[ReadableSpan] = []
    for spans in span_lists:
        if batch and len(batch) + len(spans) > max_spans:
            yield batch
            batch = []
        batch.extend(spans)
    if batch:
        yield batch
