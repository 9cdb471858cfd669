"""A run set as Inspect AI eval logs (`.eval` files), written by the `inspect_ai` package's own writer.

One log (an Inspect *task*) per (suite, condition); one sample per unit, with `id` = the sequence
(task id) and `epoch` = the seed's rank among the run set's seeds (1 = smallest); the sample's score
is the scored session's oracle verdict (`C` / `I`), its messages come from the unit's Turn, ToolCall
and ToolResult events, and its transcript events from every event of the run. An excluded or errored
unit is an errored sample (`error` set, no score), as Inspect records a sample that raised.
The mapping, field by field, is in docs/exports/inspect.md.

Reading (`load_run_set`) and mapping (`build_logs`) are separate: the mapping is a pure function of
plain rows and events, so it is tested without a warehouse.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from membench.reports.conventions import condition_order, exclusion_of, pass_summary, valid_run
from membench.warehouse import queries
from membench.warehouse.protocol import WarehouseReader
from membench.warehouse.rows import RunSummaryRow, SessionVerdictRow

SCORER = "oracle"
_NAMESPACE = uuid.UUID("6f3c2a0e-1b7d-5c4e-9a53-3d1f0e6b2c71")  # ids in the logs: uuid5 under this


class InspectExportError(ValueError):
    """The run set cannot be exported (unknown, or nothing finished)."""


@dataclass(frozen=True)
class RawEvent:
    """One event of the raw log, as the mapping needs it."""

    run_id: str
    seq: int
    ts_us: int
    session_index: int
    kind: str
    visibility: str
    event_id: str
    payload: dict[str, Any]


@dataclass
class RunSetData:
    """What the mapping reads: rows of the derived tables and the raw events of the exported runs."""

    run_set: str
    runs: list[RunSummaryRow]  # membench.warehouse.queries.run_results: one row per unit
    sessions: list[SessionVerdictRow] = field(default_factory=list)  # session_results rows
    failures: list[dict[str, Any]] = field(default_factory=list)  # failures rows
    contracts: list[dict[str, Any]] = field(default_factory=list)  # memory_contracts rows
    hygiene: list[dict[str, Any]] = field(default_factory=list)  # hygiene_observations rows
    events: dict[str, list[RawEvent]] = field(default_factory=dict)  # run_id -> events in seq order


# ------------------------------------------------------------------------------------------ reading


def _rows(warehouse: WarehouseReader, table: str, run_ids: list[str], order: str) -> list[dict[str, Any]]:
    return queries.derived_rows_of_runs(warehouse, table, run_ids, order)


def load_run_set(warehouse: WarehouseReader, run_set: str) -> RunSetData:
    """The exported runs of RUN_SET (one per unit, as the report picks them) and what belongs to them."""
    runs = queries.run_results(warehouse, run_set)
    if not runs:
        known = queries.run_sets(warehouse)
        raise InspectExportError(
            f"unknown run set {run_set!r}: the warehouse has no finished unit of it"
            + (f" (run sets: {', '.join(known)})" if known else " (it holds no run set)"))
    run_ids = sorted(r.run_id for r in runs)
    sessions = [s for s in queries.session_results(warehouse, run_set) if s.run_id in set(run_ids)]
    events: dict[str, list[RawEvent]] = defaultdict(list)
    for row in queries.raw_events_of_runs(warehouse, run_set, run_ids):
        events[row["run_id"]].append(RawEvent(
            run_id=row["run_id"], seq=int(row["seq"]), ts_us=int(row["ts_us"]),
            session_index=int(row["session_index"]), kind=str(row["kind"]), visibility=str(row["visibility"]),
            event_id=row["event_id"], payload=json.loads(row["payload"])))
    return RunSetData(
        run_set=run_set, runs=runs, sessions=sessions,
        failures=_rows(warehouse, "failures", run_ids, "run_id, session_index"),
        contracts=_rows(warehouse, "memory_contracts", run_ids, "run_id, session_index"),
        hygiene=_rows(warehouse, "hygiene_observations", run_ids, "run_id, session_index, metric, label_id"),
        events=dict(events))


# ------------------------------------------------------------------------------------------ mapping


def seed_epochs(runs: Iterable[RunSummaryRow]) -> dict[int, int]:
    """seed -> epoch: the run set's distinct seeds in ascending order are epochs 1, 2, …, n (the same
    mapping in every log of the run set, so epoch k is the same seed under every condition)."""
    return {seed: i + 1 for i, seed in enumerate(sorted({r.seed for r in runs}))}


def _iso(ts_us: int) -> str:
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=timezone.utc).isoformat()


def _dt(ts_us: int) -> datetime:
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=timezone.utc)


def _uid(*parts: object) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join(str(p) for p in parts)))


def _short_id(*parts: object) -> str:
    """A 22-character id like Inspect's own (they are shortuuids), derived from PARTS."""
    return uuid.uuid5(_NAMESPACE, "/".join(str(p) for p in parts)).hex[:22]


def _text(value: Any) -> str:
    """The text of a BoundedText (or None) field."""
    if isinstance(value, dict):
        return str(value.get("text") or "")
    return "" if value is None else str(value)


def _text_meta(value: Any) -> dict[str, Any]:
    """What a BoundedText says beyond its text: only when the text was cut."""
    if isinstance(value, dict) and value.get("truncated"):
        return {"truncated": True, "length": value.get("length"), "sha256": value.get("sha256")}
    return {}


def _run_model(events: list[RawEvent], run: RunSummaryRow) -> str:
    started = next((e.payload for e in events if e.kind == "RunStarted"), {})
    return started.get("model") or started.get("agent") or run.agent or "unknown"


@dataclass
class _Transcript:
    messages: list[Any]
    events: list[Any]
    started_us: int
    ended_us: int


def _transcript(events: list[RawEvent], model: str) -> _Transcript:
    """Messages and transcript events of one run, in log order."""
    from inspect_ai.event import (
        InfoEvent,
        ModelEvent,
        SpanBeginEvent,
        SpanEndEvent,
        ToolEvent,
    )
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        GenerateConfig,
        ModelOutput,
        ModelUsage,
    )
    from inspect_ai.tool import ToolCall, ToolCallError

    messages: list[Any] = []
    out: list[Any] = []
    tool_events: dict[str, Any] = {}
    start = events[0].ts_us if events else 0
    span: str | None = None

    def when(e: RawEvent) -> dict[str, Any]:
        return {"uuid": e.event_id, "timestamp": _dt(e.ts_us), "working_start": (e.ts_us - start) / 1e6,
                "span_id": span}

    def info(e: RawEvent, data: Any = None) -> None:
        out.append(InfoEvent(source=f"membench/{e.kind}", data=e.payload if data is None else data,
                             metadata={"seq": e.seq, "session_index": e.session_index, "visibility": e.visibility},
                             **when(e)))

    for e in events:
        p = e.payload
        meta = {"event_id": e.event_id, "seq": e.seq, "session_index": e.session_index}
        if e.kind == "SessionStarted":
            span = f"session-{p.get('session_index', e.session_index)}"
            out.append(SpanBeginEvent(id=span, name=f"session {p.get('session_index', e.session_index)}",
                                      type="session", **when(e)))
            info(e, {k: v for k, v in p.items() if k != "instruction"} | {"instruction": _text(p.get("instruction"))})
        elif e.kind == "SessionEnded":
            info(e)
            if span is not None:
                out.append(SpanEndEvent(id=span, **when(e)))
            span = None
        elif e.kind == "Turn":
            text, role, source_kind = _text(p.get("text")), p.get("role"), p.get("source_kind")
            meta |= {"membench_role": role, "source_kind": source_kind, "source_event_id": p.get("source_event_id"),
                     **_text_meta(p.get("text"))}
            meta = {k: v for k, v in meta.items() if v is not None}
            if e.visibility != "agent" or not text:  # harness notices and usage-only turns: transcript only
                info(e, {**p, "text": text})
                continue
            if role in ("user", "simulated_user"):
                messages.append(ChatMessageUser(id=e.event_id, content=text, source="input", metadata=meta))
            elif role == "system":
                messages.append(ChatMessageSystem(id=e.event_id, content=text, source="input", metadata=meta))
            else:
                content: Any = [ContentReasoning(reasoning=text)] if source_kind == "reasoning" else text
                messages.append(ChatMessageAssistant(id=e.event_id, content=content, source="generate",
                                                     model=model, metadata=meta))
        elif e.kind == "ToolCall":
            arguments = {"arguments_sha256": p.get("arguments_digest", "")}
            call = ToolCall(id=p["call_id"], function=p["name"], arguments=arguments)
            last = messages[-1] if messages else None
            if isinstance(last, ChatMessageAssistant) and last.metadata and last.metadata.get("session_index") == \
                    e.session_index:
                last.tool_calls = [*(last.tool_calls or []), call]
            else:
                messages.append(ChatMessageAssistant(id=e.event_id, content="", source="generate", model=model,
                                                     tool_calls=[call], metadata=meta))
            event = ToolEvent(id=p["call_id"], function=p["name"], arguments=arguments,
                              metadata={**meta, "is_patch": p.get("is_patch", False)}, **when(e))
            tool_events[p["call_id"]] = event
            out.append(event)
        elif e.kind == "ToolResult":
            output, exit_code = _text(p.get("output")), int(p.get("exit_code", 0))
            error = ToolCallError("unknown", f"exit code {exit_code}") if exit_code != 0 else None
            messages.append(ChatMessageTool(
                id=e.event_id, content=output, tool_call_id=p["call_id"], function=p.get("name"), error=error,
                metadata={**meta, "exit_code": exit_code, "output_size": p.get("output_size"),
                          **_text_meta(p.get("output"))}))
            called = tool_events.get(p["call_id"])
            if called is None:  # a result without its call: keep it in the transcript anyway
                info(e, {**p, "output": output})
                continue
            called.result = output
            called.completed = _dt(e.ts_us)
            called.working_time = int(p.get("duration_ms", 0)) / 1000
            called.error = error
            called.failed = exit_code != 0 or None
            called.message_id = e.event_id
        elif e.kind == "MemoryRead":
            context = _text(p.get("context"))
            if context:
                messages.append(ChatMessageSystem(
                    id=e.event_id, content=context, source="input",
                    metadata={**meta, "membench_kind": "MemoryRead", "admitted_ids": list(p.get("admitted_ids", [])),
                              **_text_meta(p.get("context"))}))
            info(e, {**p, "query": _text(p.get("query")), "context": context})
        elif e.kind == "MemoryWrite":
            info(e, {**p, "content": _text(p.get("content"))})
        elif e.kind == "ModelCall":
            usage = ModelUsage(
                input_tokens=int(p.get("input_tokens", 0)), output_tokens=int(p.get("output_tokens", 0)),
                total_tokens=int(p.get("input_tokens", 0)) + int(p.get("output_tokens", 0)),
                input_tokens_cache_read=int(p.get("cached_tokens", 0)) or None,
                reasoning_tokens=int(p.get("reasoning_tokens", 0)) or None, total_cost=p.get("cost_usd"))
            latency = int(p.get("latency_ms", 0)) / 1000
            call_model = p.get("model") or model
            out.append(ModelEvent(
                model=call_model, input=[], tools=[], tool_choice="auto", config=GenerateConfig(),
                output=ModelOutput(model=call_model, usage=usage, time=latency, error=p.get("error")),
                error=p.get("error"), working_time=latency,
                metadata={**meta, **{k: p.get(k) for k in (
                    "call_id", "provider", "api", "mode", "status", "http_status", "request_digest",
                    "response_digest", "recorded", "streamed", "chunks", "first_byte_ms", "price")}},
                **when(e)))
        else:  # RunStarted, OracleLabel, MemoryCitation, PatchProduced, OracleVerdict, RunEnded, …
            info(e)
    if span is not None:  # a session that never ended (a crashed attempt)
        out.append(SpanEndEvent(id=span, uuid=_uid(span, "end", events[-1].event_id),
                                timestamp=_dt(events[-1].ts_us), working_start=(events[-1].ts_us - start) / 1e6))
    for event in tool_events.values():
        if event.completed is None:
            event.error = ToolCallError("unknown", "no ToolResult was recorded for this call")
            event.failed = True
    end = events[-1].ts_us if events else start
    return _Transcript(messages, out, start, end)


def _sample(data: RunSetData, run: RunSummaryRow, epoch: int, lookups: dict[str, Any]) -> Any:
    from inspect_ai.event import ErrorEvent, ScoreEvent
    from inspect_ai.log import EvalError, EvalSample
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    run_id = run.run_id
    events = data.events.get(run_id, [])
    model = _run_model(events, run)
    t = _transcript(events, model)
    started = next((e.payload for e in events if e.kind == "RunStarted"), {})
    sessions: list[SessionVerdictRow] = lookups["sessions"].get(run_id, [])
    scored = next((s for s in sessions if s.scored), None)
    failure = next((f for f in lookups["failures"].get(run_id, []) if f["scored"]), None)
    contract = next((c for c in lookups["contracts"].get(run_id, []) if c["scored"]), None)
    scored_start = next((e for e in events if e.kind == "SessionStarted" and e.payload.get("scored")), None)
    first_start = next((e for e in events if e.kind == "SessionStarted"), None)
    session_start = scored_start or first_start
    instruction = _text(session_start.payload.get("instruction")) if session_start else ""
    scored_index = scored_start.session_index if scored_start else None  # without a contract row: the events'
    injected = contract["injected_memory_ids"] if contract else sorted(
        {i for e in events if e.kind == "MemoryRead" and e.session_index == scored_index
         for i in e.payload.get("admitted_ids", [])})
    cited = contract["cited_memory_ids"] if contract else sorted(
        {i for e in events if e.kind == "MemoryCitation" and e.session_index == scored_index
         for i in e.payload.get("memory_ids", [])})
    metadata: dict[str, Any] = {
        "run_set": data.run_set, "unit_id": run.unit_id, "run_id": run_id, "suite": run.suite,
        "task": run.task, "condition": run.condition, "seed": run.seed, "agent": run.agent,
        "agent_kind": started.get("agent_kind"), "model": started.get("model"), "attempt": started.get("attempt"),
        "construct": started.get("construct"), "family": started.get("family"), "status": run.status,
        "excluded": bool(run.excluded), "exclusion": exclusion_of(run),
        "scored_session": scored.session_index if scored else None,
        "oracle_outcome": scored.outcome if scored else None,
        "failure_reason": failure["failure_reason"] if failure else None,
        "failure_rule": failure["rule"] if failure else None,
        "memory_failure": bool(failure["memory_failure"]) if failure else None,
        "memory_injected_ids": list(injected), "memory_cited_ids": list(cited),
        "memory_contract_status": contract["memory_contract_status"] if contract else None,
        "memory_helped": bool(contract["memory_helped"]) if contract else None,
        "memory_hurt": bool(contract["memory_hurt"]) if contract else None,
        "memory_contracts": [
            {k: c[k] for k in ("session_index", "scored", "memory_contract_status", "injected_memory_ids",
                               "cited_memory_ids", "relevant_memory_ids", "stale_memory_ids", "citation_precision",
                               "citation_recall", "memory_helped", "memory_hurt")}
            for c in lookups["contracts"].get(run_id, [])],
        "hygiene_observations": [
            {k: h[k] for k in ("session_index", "scored", "construct", "family", "metric", "label_id", "numerator",
                               "denominator")}
            for h in lookups["hygiene"].get(run_id, [])],
        "sessions": [
            {k: getattr(s, k) for k in ("session_index", "scored", "passed", "outcome", "oracle_id", "excluded",
                                        "exclusion_reason", "tool_calls", "memory_reads", "duration_ms")}
            for s in sessions],
    }
    end_ts = t.ended_us
    valid = valid_run(run) and scored is not None and not scored.excluded
    scores = None
    error = None
    if valid:
        assert scored is not None
        explanation = None
        if not scored.passed:
            explanation = (failure["failure_reason"] if failure and failure["failure_reason"] else scored.outcome)
            if failure and failure.get("rule"):
                explanation += f" (rule: {failure['rule']})"
        score = Score(value=CORRECT if scored.passed else INCORRECT, answer=scored.outcome,
                      explanation=explanation,
                      metadata={"passed": bool(scored.passed), "outcome": scored.outcome,
                                "oracle_id": scored.oracle_id, "session_index": scored.session_index,
                                "failure_reason": metadata["failure_reason"], "rule": metadata["failure_rule"]})
        scores = {SCORER: score}
        t.events.append(ScoreEvent(score=score, target=scored.oracle_id or "", scorer=SCORER,
                                   uuid=_uid(run_id, "score"), timestamp=_dt(end_ts),
                                   working_start=(end_ts - t.started_us) / 1e6))
    else:
        reason = exclusion_of(run) or (scored.outcome if scored else None) or "no scored verdict"
        if valid_run(run) and scored is None:
            reason = "no_scored_verdict"
        message = (f"membench unit {run.unit_id} {run.status}"
                   + (" (excluded)" if run.excluded else "") + f": {reason}")
        error = EvalError(message=message, traceback=message, traceback_ansi=message)
        t.events.append(ErrorEvent(error=error, uuid=_uid(run_id, "error"), timestamp=_dt(end_ts),
                                   working_start=(end_ts - t.started_us) / 1e6))
    last_assistant = next((m for m in reversed(t.messages) if isinstance(m, ChatMessageAssistant)), None)
    output = ModelOutput(model=model, choices=[ChatCompletionChoice(message=last_assistant, stop_reason="stop")]) \
        if last_assistant is not None else ModelOutput(model=model)
    tokens = {"input_tokens": run.input_tokens, "cached_tokens": run.cached_tokens, "output_tokens": run.output_tokens,
              "reasoning_tokens": run.reasoning_tokens}
    usage = ModelUsage(input_tokens=tokens["input_tokens"], output_tokens=tokens["output_tokens"],
                       total_tokens=tokens["input_tokens"] + tokens["output_tokens"],
                       input_tokens_cache_read=tokens["cached_tokens"] or None,
                       reasoning_tokens=tokens["reasoning_tokens"] or None)
    duration = (t.ended_us - t.started_us) / 1e6
    return EvalSample(
        id=run.task, epoch=epoch, input=instruction, target=(scored.oracle_id if scored else None) or "",
        messages=t.messages, output=output, scores=scores, metadata=metadata, events=t.events,
        model_usage={model: usage} if any(tokens.values()) else {},
        started_at=_iso(t.started_us) if events else None, completed_at=_iso(t.ended_us) if events else None,
        total_time=duration, working_time=duration, uuid=_uid(run_id, "sample"), error=error)


def _lookups(data: RunSetData) -> dict[str, dict[str, list[Any]]]:
    """Per table, run_id -> its rows by session index: `sessions` (typed rows) and the derived rows attached whole."""
    sessions: dict[str, list[SessionVerdictRow]] = defaultdict(list)
    for session in data.sessions:
        sessions[session.run_id].append(session)
    for sessions_of_run in sessions.values():
        sessions_of_run.sort(key=lambda s: s.session_index)
    out: dict[str, dict[str, list[Any]]] = {"sessions": dict(sessions)}
    for name, rows in (("failures", data.failures), ("contracts", data.contracts), ("hygiene", data.hygiene)):
        by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_run[row["run_id"]].append(row)
        for rows_of_run in by_run.values():
            rows_of_run.sort(key=lambda r: int(r["session_index"]))
        out[name] = dict(by_run)
    return out


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def build_logs(data: RunSetData) -> list[Any]:
    """One `inspect_ai.log.EvalLog` per (suite, condition) of the run set, in (suite, condition) order."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalPlan,
        EvalPlanStep,
        EvalResults,
        EvalScore,
        EvalSpec,
        EvalStats,
    )
    from inspect_ai.model import ModelUsage

    epochs = seed_epochs(data.runs)
    lookups = _lookups(data)
    groups: dict[tuple[str, str], list[RunSummaryRow]] = defaultdict(list)
    for run in data.runs:
        groups[(run.suite, run.condition)].append(run)
    packages = {name: v for name in ("inspect_ai", "membench") if (v := _version(name))}
    logs = []
    for suite, condition in sorted(groups, key=lambda k: (k[0], condition_order(k[1]))):
        runs = sorted(groups[(suite, condition)], key=lambda r: (r.task, r.seed))
        samples = [_sample(data, run, epochs[run.seed], lookups) for run in runs]
        first_events = [data.events[r.run_id][0].ts_us for r in runs if data.events.get(r.run_id)]
        last_events = [data.events[r.run_id][-1].ts_us for r in runs if data.events.get(r.run_id)]
        created_us = min(first_events) if first_events else 0
        agents = Counter(r.agent for r in runs)
        agent = agents.most_common(1)[0][0]
        models = Counter(s.output.model for s in samples)
        model = models.most_common(1)[0][0]
        started = next((e.payload for r in runs for e in data.events.get(r.run_id, []) if e.kind == "RunStarted"),
                       {})
        outcomes: dict[str, list[bool]] = defaultdict(list)
        for sample, run in zip(samples, runs):
            if sample.scores:
                outcomes[run.task].append(sample.scores[SCORER].value == "C")
        passed, valid, rate, ci95, boot = pass_summary(outcomes)
        metrics = {}
        if rate is not None:  # no valid cell: no metric (Inspect's results of a log whose samples all errored)
            values = [1.0 if o else 0.0 for v in outcomes.values() for o in v]
            stderr = math.sqrt(sum((x - rate) ** 2 for x in values) / (valid - 1) / valid) if valid > 1 else 0.0
            metrics = {"accuracy": EvalMetric(name="accuracy", value=rate),
                       "stderr": EvalMetric(name="stderr", value=stderr)}
        if ci95[0] is not None and ci95[1] is not None:
            metrics["ci95_low"] = EvalMetric(name="ci95_low", value=ci95[0],
                                             params={"resamples": boot.resamples, "seed": boot.seed})
            metrics["ci95_high"] = EvalMetric(name="ci95_high", value=ci95[1],
                                              params={"resamples": boot.resamples, "seed": boot.seed})
        exclusions = Counter(s.metadata["exclusion"] or "no_scored_verdict" for s in samples if s.error is not None)
        usage: dict[str, ModelUsage] = {}
        for sample in samples:
            for name, u in sample.model_usage.items():
                usage[name] = usage[name] + u if name in usage else u
        task_name = f"{suite}-{condition}"
        log = EvalLog(
            version=2, status="success",
            eval=EvalSpec(
                eval_id=_short_id(data.run_set, suite, condition, "eval"), run_id=_short_id(data.run_set, "run"),
                created=_iso(created_us), task=task_name,
                task_id=_short_id(data.run_set, suite, condition, "task"),
                task_version=0, task_display_name=f"{suite} · {condition}",
                task_args={"suite": suite, "condition": condition},
                task_args_passed={"suite": suite, "condition": condition},
                solver=agent, solver_args={"agent_kind": started.get("agent_kind")},
                tags=["membench", data.run_set],
                dataset=EvalDataset(name=suite, samples=len({r.task for r in runs}),
                                    sample_ids=sorted({r.task for r in runs})),
                model=model, config=EvalConfig(epochs=len(epochs), fail_on_error=False),
                packages=packages,
                metadata={"run_set": data.run_set, "suite": suite, "condition": condition, "agent": agent,
                          "agent_kind": started.get("agent_kind"),
                          "epochs": {str(epoch): seed for seed, epoch in epochs.items()},
                          "exported_by": "membench export inspect"}),
            plan=EvalPlan(name="plan", steps=[EvalPlanStep(solver=agent, params={"condition": condition})]),
            results=EvalResults(
                total_samples=len(samples), completed_samples=valid, logged_samples=len(samples),
                scores=[EvalScore(name=SCORER, scorer=SCORER, scored_samples=valid,
                                  unscored_samples=len(samples) - valid, metrics=metrics)],
                metadata={"passed": passed, "valid": valid, "excluded": dict(sorted(exclusions.items()))}),
            stats=EvalStats(started_at=_iso(created_us), completed_at=_iso(max(last_events) if last_events else 0),
                            model_usage=usage),
            tags=["membench", data.run_set],
            metadata={"run_set": data.run_set},
            samples=samples)
        logs.append(log)
    return logs


def log_file_name(log: Any) -> str:
    """Inspect's own naming, `{created}_{task}_{id}.eval` (a task name's `_` becomes `-`, because Inspect
    splits the name on `_`); the ids are derived from the run set, so an export overwrites itself."""
    created = log.eval.created[:19].replace(":", "-")
    task = re.sub(r"[^A-Za-z0-9.-]", "-", log.eval.task)
    return f"{created}_{task}_{log.eval.task_id}.eval"


def write_logs(logs: list[Any], out_dir: Path) -> list[Path]:
    from inspect_ai.log import write_eval_log

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for log in logs:
        path = out_dir / log_file_name(log)
        write_eval_log(log, str(path), format="eval")
        paths.append(path)
    return paths


def export_inspect(warehouse: WarehouseReader, run_set: str, out_dir: Path) -> list[Path]:
    """Write RUN_SET's Inspect eval logs into OUT_DIR; returns the files written."""
    return write_logs(build_logs(load_run_set(warehouse, run_set)), out_dir)
