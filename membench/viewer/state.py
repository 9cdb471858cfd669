"""What the viewer knows of a run set, folded from its event log alone (docs/viewer.md).

A `LiveRunSet` tails `runs/<run_set>/events.avro` (`membench.viewer.tail.LogTail`) and feeds every new
event, in file order, to

- `processors.RunSetProcessor`: the same pure folds that make the warehouse's derived rows
  (`session_results`, `run_results`, `failures`, `memory_contracts`, `hygiene_observations`), so a
  unit's verdict, failure reason, memory contract and hygiene observations here are the rows the
  warehouse holds, or will hold once the run writes them;
- `membench.schemas.chain.ChainVerifier`: every run's hash chain, each hash recomputed with the writer
  schema named in the log's header.

It never opens the warehouse: a running `membench run` owns the chDB path, and the log is the
source of truth anyway (the warehouse never holds an event the log lacks).

Per run it keeps only small things (counters, the run's derived events, its first chain break) and
the byte offsets of the blocks holding its events; a unit's trajectory is read back from those
blocks when the page asks for it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.processors import RunSetProcessor
from membench.processors.model_usage import ModelTotals
from membench.reports.conventions import (RunSummaryRow, condition_order, condition_pass_summaries, run_summary_row,
                                          valid_run)
from membench.reports.effort import condition_efforts, condition_pass_hat_k
from membench.reports.model import to_json
from membench.schemas.chain import ChainVerifier
from membench.schemas.derived import DerivedEvent
from membench.schemas.events import Event, agent_model_call
from membench.viewer.tail import LogTail

LOG_NAME = "events.avro"
QUIET_AFTER_S = 10.0  # a run set whose log has not changed for this long and has no open run is idle
MAX_BREAKS_LISTED = 50
SEARCH_HITS_PER_UNIT = 3
SNIPPET_CONTEXT = 60  # characters either side of a search hit
SEARCH_CACHE = 16  # answers kept per run set


def json_safe(value: Any) -> Any:
    """A payload value as JSON: bytes as base64, timestamps as ISO 8601, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


WHY_BOUND = 500  # characters of an excluded or failed run's reason shown in the unit list


@dataclass
class RunState:
    """One run (one attempt of a unit) as far as the log has been read."""

    run_id: str
    unit_id: str
    started: dict[str, Any] | None = None  # RunStarted payload
    ended: dict[str, Any] | None = None  # RunEnded payload
    events: int = 0
    last_seq: int = -1
    first_ts: int = 0
    last_ts: int = 0
    session_index: int = -1  # session of the newest event
    blocks: list[int] = field(default_factory=list)  # offsets of the log blocks holding its events
    derived: list[DerivedEvent] = field(default_factory=list)
    chain_break: dict[str, Any] | None = None  # the first break of its chain: {seq, reason}
    dead_letters: int = 0  # its events the processors rejected: the run does not verify (replay's finding)
    # its ModelCalls as the ModelUsage fold sums them (membench/processors/model_usage.py), live: before its end
    model: ModelTotals = field(default_factory=ModelTotals)
    # the agent's tokens as run_results counts them (its turns and its own ModelCalls,
    # membench/processors/verdicts.py), so a unit's row reads as the report's tokens per cell
    input_tokens: int = 0
    output_tokens: int = 0
    memory_tokens: int = 0  # tokens its memory reads admitted into the agent's context
    why: str | None = None  # why the run was excluded or broke: its run-level system Turn (bounded)

    @property
    def condition(self) -> str:
        if self.started:
            return self.started["condition"]
        parts = self.unit_id.split("/")
        return parts[-2] if len(parts) >= 2 else "?"

    def summary(self) -> dict[str, Any] | None:
        """The run's RunSummary payload (what `run_results` holds), once it ended."""
        for item in reversed(self.derived):
            if item.kind == "RunSummary":
                return item.payload
        return None

    def summary_row(self) -> RunSummaryRow | None:
        """The run's `run_results` row (`membench.reports.conventions.run_summary_row`), once it ended:
        what the report's cell rules read."""
        for item in reversed(self.derived):
            if item.kind == "RunSummary":
                return run_summary_row(item)
        return None

    def ended_row(self) -> RunSummaryRow:
        """The `run_results` row of a run known to have ended (a unit's cell, unit_row)."""
        row = self.summary_row()
        assert row is not None, f"run {self.run_id} has not ended"
        return row

    def ended_summary(self) -> dict[str, Any]:
        """The RunSummary payload of a run known to have ended (a unit's cell, unit_row)."""
        summary = self.summary()
        assert summary is not None, f"run {self.run_id} has not ended"
        return summary

    def derived_payload(self, kind: str) -> dict[str, Any] | None:
        """The run's newest derived `kind` payload (a per-run kind: MemoryUse), once derived."""
        for item in reversed(self.derived):
            if item.kind == kind:
                return item.payload
        return None

    def summary_seq(self) -> int:
        for item in reversed(self.derived):
            if item.kind == "RunSummary":
                return item.source_seq
        return -1

    def scored(self, kind: str) -> dict[str, Any] | None:
        """The derived `kind` payload of the run's scored session, if there is one yet."""
        for item in reversed(self.derived):
            if item.kind == kind and item.payload.get("scored"):
                return item.payload
        return None

    def brief(self) -> dict[str, Any]:
        summary = self.summary()
        failure = self.scored("FailureClassified")
        started = self.started or {}
        return {
            "run_id": self.run_id,
            "unit_id": self.unit_id,
            "condition": self.condition,
            "task": started.get("task"),
            "construct": started.get("construct"),
            "seed": started.get("seed"),
            "attempt": started.get("attempt"),
            "state": "running" if self.ended is None else self.ended.get("status"),
            "events": self.events,
            "session": self.session_index,
            "status": summary["status"] if summary else None,
            "passed": bool(summary["scored_passed"]) if summary else None,
            "valid": valid_run(self.ended_row()) if summary else None,
            "excluded": bool(summary["excluded"]) if summary else None,
            "exclusion_reason": summary.get("exclusion_reason") if summary else None,
            "error_type": summary.get("error_type") if summary else None,
            "why": self.why,
            "failure_reason": failure.get("failure_reason") if failure else None,
            "chain_ok": self.chain_break is None,
            "dead_letters": self.dead_letters,
            "model_calls": self.model.calls,
            "cost_usd": self.model.cost_usd if self.model.priced_calls else None,  # unpriced is unknown, never free
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "memory_tokens": self.memory_tokens,
            "duration_ms": (self.last_ts - self.first_ts) // 1000 if self.first_ts else 0,
        }


def unit_row(runs: list[RunState]) -> RunState | None:
    """The run that is the unit's cell, as `membench.warehouse.queries.run_results` picks it: among ended runs,
    a completed one, else an excluded one, else the longest of the others."""
    ended = [r for r in runs if r.summary() is not None]
    if not ended:
        return None
    return max(ended, key=lambda r: (r.ended_summary()["status"] == "completed",
                                     r.ended_summary()["status"] in ("completed", "excluded"), r.summary_seq()))


class LiveRunSet:
    """A run set's log, folded incrementally. Thread-safe: `refresh` and the readers share a lock."""

    def __init__(self, run_set: str, path: Path | None = None, source: Any = None):
        """Over the file log at `path`, or over `source`: anything with LogTail's reading surface
        (`poll`, `read_block`, `schema`, `mtime`, `size`, `offset`, `blocks`, `pending_bytes`,
        `error`), such as a Kafka topic's `TopicLog`."""
        if (path is None) == (source is None):
            raise ValueError("LiveRunSet needs a log path or a source, not both")
        self.run_set = run_set
        self.path = Path(path) if path is not None else None
        self._source = source
        self._lock = threading.RLock()
        self._start()

    def _start(self) -> None:
        self.tail = LogTail(self.path) if self.path is not None else self._source
        self.processor = RunSetProcessor()
        self.verifier = ChainVerifier()
        self.runs: dict[str, RunState] = {}
        self.breaks: list[dict[str, Any]] = []
        self.events = 0
        self.resets = 0
        self.last_ts = 0
        self._ladder_cache: tuple[int, list[dict[str, Any]]] | None = None
        self._summaries = 0  # RunSummary events seen (the ladder's cache key)
        self._search_cache: dict[tuple[str, int], dict[str, Any]] = {}
        self._detail_cache: tuple[tuple, bytes] | None = None

    def refresh(self) -> None:
        """Read and fold every complete block the log gained since the last refresh."""
        with self._lock:
            poll = self.tail.poll()
            if poll.reset:
                resets = self.resets + 1
                self._start()
                self.resets = resets
                poll = self.tail.poll()
            for block in poll.blocks:
                schemas = block.schemas or [self.tail.schema] * len(block.events)
                for event, schema in zip(block.events, schemas):
                    self._fold(event, block.offset, schema)

    def _fold(self, event: Event, offset: int, schema: Any) -> None:
        self.events += 1
        run = self.runs.get(event.run_id)
        if run is None:
            run = self.runs[event.run_id] = RunState(event.run_id, event.unit_id, first_ts=event.ts)
        run.events += 1
        run.last_seq, run.last_ts, run.session_index = event.seq, event.ts, event.session_index
        self.last_ts = max(self.last_ts, event.ts)
        if not run.blocks or run.blocks[-1] != offset:
            run.blocks.append(offset)
        if event.kind == "RunStarted":
            run.started = event.payload
        elif event.kind == "RunEnded":
            run.ended = event.payload
        elif event.kind == "ModelCall":
            run.model.add(event.payload)  # type: ignore[arg-type]  # a ModelCall by its kind
        if event.kind == "Turn" or (event.kind == "ModelCall" and agent_model_call(event.payload)):  # type: ignore[arg-type]  # a ModelCall by its kind
            run.input_tokens += int(event.payload.get("input_tokens") or 0)
            run.output_tokens += int(event.payload.get("output_tokens") or 0)
        if event.kind == "MemoryRead":
            run.memory_tokens += int(event.payload.get("tokens_admitted") or 0)
        elif event.kind == "Turn" and event.session_index < 0 and event.payload.get("role") == "system":
            text = (event.payload.get("text") or {}).get("text") or ""  # the model's or adapter's own words
            run.why = text if len(text) <= WHY_BOUND else text[:WHY_BOUND] + "…"
        found = self.verifier.check(event, schema)
        if found is not None:
            entry = {"run_id": found.run_id, "unit_id": event.unit_id, "seq": found.seq, "reason": found.reason}
            if run.chain_break is None:
                run.chain_break = entry
            if len(self.breaks) < MAX_BREAKS_LISTED:
                self.breaks.append(entry)
        rejected = len(self.processor.dead_letters)
        derived = self.processor.apply(event)
        run.dead_letters += len(self.processor.dead_letters) - rejected
        for item in derived:
            self.runs.setdefault(item.run_id, run).derived.append(item)
            if item.kind == "RunSummary":
                self._summaries += 1

    # ------------------------------------------------------------------------------------ reading

    def _units(self) -> dict[str, list[RunState]]:
        units: dict[str, list[RunState]] = defaultdict(list)
        for run in self.runs.values():
            units[run.unit_id].append(run)
        return units

    def quiet_for(self) -> float | None:
        """Seconds since the log file was last written (None: no file)."""
        return max(0.0, time.time() - self.tail.mtime) if self.tail.mtime else None

    def live(self) -> bool:
        """The log was written within the last QUIET_AFTER_S seconds. (A run open in the log is not
        enough: a crashed run stays open until the next `membench run` closes it as abandoned.)"""
        quiet = self.quiet_for()
        return quiet is not None and quiet < QUIET_AFTER_S

    def overview(self) -> dict[str, Any]:
        """What the run-set list shows."""
        with self._lock:
            units = self._units()
            cells = [unit_row(runs) for runs in units.values()]
            started = next((r.started for r in self.runs.values() if r.started), None) or {}
            return {
                "run_set": self.run_set,
                "suite": started.get("suite"),
                "agent": started.get("agent"),
                "events": self.events,
                "runs": len(self.runs),
                "units_started": len(units),
                "units_finished": sum(1 for c in cells if c is not None),
                "running": sum(1 for r in self.runs.values() if r.ended is None),
                "live": self.live(),
                # only while a run is open (the page shows it then): otherwise it would change every
                # poll and a finished run set's answer could never be answered "not modified"
                "quiet_for_s": self.quiet_for() if any(r.ended is None for r in self.runs.values()) else None,
                "chain_ok": not self.breaks and self.tail.error is None,
                # `membench replay --verify` fails on a dead letter as on a chain break: never "ok"
                "dead_letter_count": len(self.processor.dead_letters),
                "log_error": self.tail.error,
                "last_event": _iso(self.last_ts),
            }

    def progress(self) -> list[dict[str, Any]]:
        """Per condition: units started / running / finished, and the finished cells by kind."""
        rows: dict[str, dict[str, Any]] = {}
        for unit_id, runs in self._units().items():
            condition = runs[0].condition
            row = rows.setdefault(condition, {
                "condition": condition, "units_started": 0, "running": 0, "finished": 0, "completed": 0,
                "passed": 0, "excluded": 0, "errors": 0, "attempts": 0})
            row["units_started"] += 1
            row["attempts"] += len(runs)
            if any(r.ended is None for r in runs):
                row["running"] += 1
            cell = unit_row(runs)
            if cell is None:
                continue
            summary = cell.ended_row()
            row["finished"] += 1
            if valid_run(summary):
                row["completed"] += 1
                row["passed"] += 1 if summary.scored_passed else 0
            elif summary.excluded:
                row["excluded"] += 1
            else:
                row["errors"] += 1
        return [rows[c] for c in sorted(rows, key=condition_order)]

    def ladder(self) -> list[dict[str, Any]]:
        """Pass rate per condition with its 95% CI, as membench/reports/build.py computes it from
        `run_results`: one cell per unit, valid cells only, trap-cluster bootstrap by task with the
        report's resamples and seed (membench.reports.conventions.condition_pass_summaries, as the report)."""
        if self._ladder_cache is not None and self._ladder_cache[0] == self._summaries:
            return self._ladder_cache[1]
        cells = [cell for cell in (unit_row(runs) for runs in self._units().values()) if cell is not None]
        # cost and reliability beside the pass rate, as the report's (membench/reports/effort.py); k is the
        # seeds finished so far
        rows = [cell.ended_row() for cell in cells]
        calls = {c.run_id: use["agent_memory_calls"] for c in cells if (use := c.derived_payload("MemoryUse"))}
        efforts = condition_efforts(rows, {c.run_id: (c.model.priced_calls, c.model.cost_usd) for c in cells}, calls)
        reliability = condition_pass_hat_k(rows)
        out = []
        for condition, count, (passed, valid, rate, ci95, bootstrap) in condition_pass_summaries(
                (cell.condition, row) for cell, row in zip(cells, rows)):
            out.append({"condition": condition, "cells": count, "valid": valid, "passed": passed,
                        "pass_rate": rate, "ci95": ci95, "excluded": count - valid,
                        "bootstrap": {"resamples": bootstrap.resamples, "seed": bootstrap.seed,
                                      "level": bootstrap.level},
                        "pass_hat_k": to_json(reliability.get(condition)), "effort": to_json(efforts.get(condition))})
        self._ladder_cache = (self._summaries, out)
        return out

    def detail(self) -> dict[str, Any]:
        """What the run-set page shows: progress, ladder, units, chain, the log's read position."""
        with self._lock:
            units = []
            for unit_id, runs in sorted(self._units().items()):
                cell = unit_row(runs)
                newest = max(runs, key=lambda r: ((r.started or {}).get("attempt") or 0, r.first_ts))
                shown = newest if newest.ended is None else (cell or newest)
                units.append({**shown.brief(), "attempts": [r.brief() for r in runs]})
            return {
                **self.overview(),
                "planned": None,  # the log does not record the grid; see docs/viewer.md
                "progress": self.progress(),
                "ladder": self.ladder(),
                "units": units,
                "chain": {"ok": not self.breaks, "events_checked": self.verifier.events, "breaks": self.breaks},
                "dead_letters": [{"run_id": d.run_id, "seq": d.seq, "reason": d.reason}
                                 for d in self.processor.dead_letters],
                "log": {"bytes": self.tail.size, "read_to": self.tail.offset, "blocks": self.tail.blocks,
                        "pending_bytes": self.tail.pending_bytes, "error": self.tail.error,
                        "resets": self.resets},
            }

    def detail_json(self) -> bytes:
        """`detail()` as JSON, kept while nothing it shows can have changed: the page re-asks every
        1.5 s, and at 10,000 units rebuilding the answer costs about half a second to find it the
        same. Not kept while a run is open (its `quiet_for_s` changes with the clock)."""
        with self._lock:
            if any(r.ended is None for r in self.runs.values()):
                self._detail_cache = None
                return json.dumps(self.detail(), allow_nan=False).encode()
            # everything else in the answer follows the events folded, the log's read position and
            # whether the log was written lately
            key = (self.events, self.resets, self.tail.offset, self.tail.size, self.tail.blocks,
                   self.tail.pending_bytes, self.tail.error, self.live())
            if self._detail_cache is None or self._detail_cache[0] != key:
                self._detail_cache = (key, json.dumps(self.detail(), allow_nan=False).encode())
            return self._detail_cache[1]

    def cell_run_id(self, unit_id: str) -> str | None:
        """The run id of the unit's cell (the newest attempt while none has ended), or None."""
        with self._lock:
            runs = [r for r in self.runs.values() if r.unit_id == unit_id]
            if not runs:
                return None
            cell = unit_row(runs)
            return (cell or max(runs, key=lambda r: r.first_ts)).run_id

    def cell_run_ids(self) -> dict[str, str]:
        """unit id -> the run id of its cell, for every unit (as `cell_run_id` picks it)."""
        with self._lock:
            return {unit_id: (unit_row(runs) or max(runs, key=lambda r: r.first_ts)).run_id
                    for unit_id, runs in self._units().items()}

    def run_ids(self) -> list[str]:
        """Every run's id, in the order the log first names it."""
        with self._lock:
            return list(self.runs)

    def unit_ids(self, task: str, seed: str) -> dict[str, str]:
        """condition -> unit id of every unit of one (trap, seed)."""
        with self._lock:
            return {r.condition: r.unit_id for r in self.runs.values()
                    if r.started and str(r.started.get("task")) == task and str(r.started.get("seed")) == seed}

    def search(self, query: str) -> dict[str, Any]:
        """Units whose trajectory holds QUERY (case-insensitive) in an instruction, a turn, a tool's
        output, a memory read's query or context, or a memory write: each with its first hits.
        Reads the log's blocks back once per (query, log size); the answer is cached."""
        needle = query.casefold()
        with self._lock:
            key = (needle, self.events)
            cached = self._search_cache.get(key)
            if cached is not None:
                return cached
            offsets = sorted({o for r in self.runs.values() for o in r.blocks})
            unit_of = {r.run_id: r.unit_id for r in self.runs.values()}
            tail = self.tail
        hits: dict[str, list[dict[str, Any]]] = {}
        for offset in offsets:
            for event in tail.read_block(offset):
                for where, text in _searchable(event):
                    at = text.casefold().find(needle)
                    if at < 0:
                        continue
                    found = hits.setdefault(unit_of.get(event.run_id, event.unit_id), [])
                    if len(found) < SEARCH_HITS_PER_UNIT:
                        start = max(0, at - SNIPPET_CONTEXT)
                        found.append({"run_id": event.run_id, "session": event.session_index, "seq": event.seq,
                                      "kind": event.kind, "where": where,
                                      "snippet": text[start:at + len(needle) + SNIPPET_CONTEXT]})
        answer = {"query": query, "units": hits, "blocks_read": len(offsets)}
        with self._lock:
            if len(self._search_cache) >= SEARCH_CACHE:
                self._search_cache.pop(next(iter(self._search_cache)))
            self._search_cache[key] = answer
        return answer

    def search_corpus(self) -> list[list[Any]]:
        """Every text a search looks in, in log order: [unit_id, run_id, session, seq, kind, where,
        text] (a static export searches these in the page, as `search` does here)."""
        with self._lock:
            offsets = sorted({o for r in self.runs.values() for o in r.blocks})
            unit_of = {r.run_id: r.unit_id for r in self.runs.values()}
            tail = self.tail
        corpus = []
        for offset in offsets:
            for event in tail.read_block(offset):
                for where, text in _searchable(event):
                    if text:
                        corpus.append([unit_of.get(event.run_id, event.unit_id), event.run_id, event.session_index,
                                       event.seq, event.kind, where, text])
        return corpus

    def has_run(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self.runs

    def run_detail(self, run_id: str) -> dict[str, Any] | None:
        """One run's whole trajectory, read back from its blocks, grouped by session, with the
        derived events of each session and the run's chain status."""
        with self._lock:
            run = self.runs.get(run_id)
            if run is None:
                return None
            offsets = list(run.blocks)
            derived = list(run.derived)
            brief = run.brief()
            chain_break = run.chain_break
            started, ended = run.started, run.ended
            tail = self.tail  # a reset replaces it; these offsets belong to this one
        events: list[Event] = []
        for offset in offsets:
            events.extend(e for e in tail.read_block(offset) if e.run_id == run_id)
        events.sort(key=lambda e: e.seq)
        sessions: dict[int, dict[str, Any]] = {}
        run_level: list[dict[str, Any]] = []

        def session(index: int) -> dict[str, Any]:
            return sessions.setdefault(index, {
                "index": index, "started": None, "events": [], "verdict": None, "failure": None,
                "contract": None, "hygiene": [], "model": ModelTotals()})

        for event in events:
            item = {"seq": event.seq, "kind": event.kind, "ts": _iso(event.ts), "visibility": event.visibility,
                    "session_index": event.session_index, "payload": json_safe(event.payload)}
            if event.session_index < 0:
                run_level.append(item)
                continue
            s = session(event.session_index)
            s["events"].append(item)
            if event.kind == "SessionStarted":
                s["started"] = item["payload"]
            elif event.kind == "ModelCall":
                s["model"].add(event.payload)
        slots = {"SessionVerdict": "verdict", "FailureClassified": "failure", "MemoryContract": "contract"}
        summary = None
        for found in derived:
            payload = json_safe(found.payload)
            if found.kind == "RunSummary":
                summary = payload
            elif found.kind == "HygieneObservation":
                session(found.payload["session_index"])["hygiene"].append(payload)
            elif found.kind in slots:
                session(found.payload["session_index"])[slots[found.kind]] = payload
        for s in sessions.values():
            s["model"] = _model_json(s["model"])
        model = _model_json(ModelTotals())
        for s in sessions.values():
            for key in model:
                model[key] += s["model"][key]
        return {
            **brief,
            "run_set": self.run_set,
            "started": json_safe(started),
            "ended": json_safe(ended),
            "summary": summary,
            "chain": {"ok": chain_break is None, "events_checked": len(events), "break": chain_break},
            "model": model,
            "run_events": run_level,
            "sessions": [sessions[i] for i in sorted(sessions)],
        }


def _text(value: Any) -> str:
    return (value.get("text") or "") if isinstance(value, dict) else (value or "")


def _searchable(event: Event) -> list[tuple[str, str]]:
    """The agent- and memory-facing texts of an event that a search looks in: (where, text)."""
    p = event.payload
    if event.kind == "Turn":
        return [(f"turn ({p.get('role')})", _text(p.get("text")))]
    if event.kind == "ToolResult":
        return [(f"tool output ({p.get('name')})", _text(p.get("output")))]
    if event.kind == "SessionStarted":
        return [("instruction", _text(p.get("instruction")))]
    if event.kind == "MemoryRead":
        return [("memory query", _text(p.get("query"))), ("memory context", _text(p.get("context")))]
    if event.kind == "MemoryWrite":
        return [(f"memory item {p.get('memory_id')}", _text(p.get("content")))]
    return []


def _model_json(totals: ModelTotals) -> dict[str, Any]:
    """A session's or run's model totals as the run detail shows them."""
    return {"calls": totals.calls, "input_tokens": totals.input_tokens, "cached_tokens": totals.cached_tokens,
            "output_tokens": totals.output_tokens, "reasoning_tokens": totals.reasoning_tokens,
            "latency_ms": totals.latency_ms, "cost_usd": totals.cost_usd}


def _iso(micros: int) -> str | None:
    if not micros:
        return None
    return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)).isoformat()


class Catalog:
    """The run sets under a runs directory (`MEMBENCH_HOME/runs`), each folded on demand. Subclasses
    say where run sets come from (`_source_names`, `_has`, `_open`); folding and lookup are shared."""

    def __init__(self, runs_dir: Path):
        self.runs_dir = Path(runs_dir)
        self._lock = threading.Lock()
        self._sets: dict[str, LiveRunSet] = {}

    def close(self) -> None:
        """Nothing to release for file logs."""

    def _source_names(self) -> list[str]:
        try:
            return sorted(p.name for p in self.runs_dir.iterdir() if (p / LOG_NAME).is_file())
        except OSError:
            return []

    def _has(self, run_set: str) -> bool:
        return (self.runs_dir / run_set / LOG_NAME).is_file()

    def _open(self, run_set: str) -> LiveRunSet:
        return LiveRunSet(run_set, self.runs_dir / run_set / LOG_NAME)

    def names(self) -> list[str]:
        from membench.formats.fields import is_plain_name

        return [name for name in self._source_names() if is_plain_name(name)]

    def get(self, run_set: str, refresh: bool = True) -> LiveRunSet | None:
        from membench.formats.fields import is_plain_name

        if not is_plain_name(run_set) or not self._has(run_set):
            return None
        with self._lock:
            live = self._sets.get(run_set)
            if live is None:
                live = self._sets[run_set] = self._open(run_set)
        if refresh:
            live.refresh()
        return live

    def all(self) -> list[LiveRunSet]:
        return [live for name in self.names() if (live := self.get(name)) is not None]

    def find_run(self, run_id: str) -> LiveRunSet | None:
        """The run set whose log holds `run_id` (run ids are UUIDv5 of run set, unit and attempt)."""
        with self._lock:
            known = list(self._sets.values())
        for live in known:
            live.refresh()
            if live.has_run(run_id):
                return live
        for live in self.all():
            if live.has_run(run_id):
                return live
        return None


class KafkaCatalog(Catalog):
    """The run sets on a Kafka namespace's trajectory topic (`membench.viewer.kafka_feed`), each folded
    like a file log. Blobs (scored diffs, model recordings) are read from `runs_dir`, the runs
    directory of the machine that ran the units, when it is this one."""

    def __init__(self, dsn: str, runs_dir: Path):
        from membench.viewer.kafka_feed import TopicFeed

        super().__init__(runs_dir)
        self.feed = TopicFeed(dsn).start()

    def close(self) -> None:
        self.feed.close()

    def _source_names(self) -> list[str]:
        return self.feed.names()

    def _has(self, run_set: str) -> bool:
        return self.feed.log(run_set) is not None

    def _open(self, run_set: str) -> LiveRunSet:
        return LiveRunSet(run_set, source=self.feed.log(run_set))
