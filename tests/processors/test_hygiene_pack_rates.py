"""Every hygiene rate is observable on the built-in hygiene-v1 pack.

Each trap is replayed as the runner emits it — its OracleLabels (membench/runner/labels.py), the pack
events delivered as Turns, B5 (membench/memory_systems/verbatim.py) writing and reading memory,
a verdict per task session — and folded by the real processors. No sandbox or agent is involved:
denominators depend on labels, memories and the declared oracle cases, not on who wrote the
patch (the integration test tests/integration/test_hygiene_pack.py checks the same on real runs).
Before the fix, stale labels carried no event ids (no stale memory, so `stale_use` and
`stale_activation` were never observed) and B5 wrote every memory with an empty scope (no
`overscope`).
"""

from __future__ import annotations

from typing import Any

from membench.processors import derive_all
from membench.processors.hygiene import METRICS
from membench.runner.labels import sequence_labels
from membench.memory_systems.base import Namespace
from membench.memory_systems.verbatim import VerbatimEventMemory
from membench.schemas.events import Event, bounded_text
from membench.formats.pack_format import load_pack
from tests.packs.hygiene_helpers import FIXTURES

BUDGET = 2000  # the runner's default read budget


class _Run:
    def __init__(self, seq) -> None:
        self.events: list[Event] = []
        self.session = -1
        self.emit("RunStarted", {"suite": "hygiene-v1", "task": seq.seq_id, "condition": "B5", "seed": 1,
                                 "agent": "scripted:test", "agent_kind": "scripted", "model": None,
                                 "budgets": {"memory_read_tokens": BUDGET}, "code_digest": "", "pack_digest": "",
                                 "fixture_digest": "", "construct": seq.construct, "family": seq.family}, "harness")

    def emit(self, kind: str, payload: dict[str, Any], visibility: str = "agent") -> Event:
        seq = len(self.events)
        event = Event(f"ev-{seq}", "rs", "run-1", "u", self.session, seq, seq, "test", kind, visibility, "0" * 64,
                      payload, f"{seq:064x}")
        self.events.append(event)
        return event


def _replay(seq) -> list[Event]:
    run, memory = _Run(seq), VerbatimEventMemory(Namespace("rs", "B5", 1, seq.seq_id))
    labels = sequence_labels(seq)
    for label in labels:
        run.emit("OracleLabel", {k: label[k] for k in ("label_id", "label_type", "active_session", "event_ids",
                                                       "fact_ids")}, "harness")
    checked = [case for label in labels if label["label_type"].endswith("-check") for case in label["fact_ids"]]
    for session in seq.sessions:
        run.session = session.index
        run.emit("SessionStarted", {"session_index": session.index, "instruction": bounded_text(session.instruction),
                                    "start_state": "continuation", "workspace_digest": "", "scored": session is
                                    seq.scored_session, "oracle_id": session.oracle_id})
        context = memory.read(session.instruction, BUDGET)
        run.emit("MemoryRead", {"query": bounded_text(session.instruction), "candidates": list(context.candidates),
                                "admitted_ids": [i.memory_id for i in context.items],
                                "tokens_admitted": context.tokens_admitted, "token_budget": BUDGET,
                                "context": bounded_text(context.render())})
        # every declared check case fails: a trap where the agent did everything wrong
        run.emit("OracleVerdict", {"oracle_id": session.oracle_id, "outcome": "fail",
                                   "cases": [{"case_id": c, "outcome": "fail"} for c in checked],
                                   "exit_status": 1, "inconclusive": False, "duration_ms": 1}, "harness")
        run.emit("SessionEnded", {"session_index": session.index, "status": "completed"})
        delivered = [run.emit("Turn", {"role": "user", "text": bounded_text(e.content), "source_event_id": e.event_id,
                                       "source_kind": e.kind, "source_scope": list(e.scope_files),
                                       "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                                       "reasoning_tokens": 0, "latency_ms": 0})
                     for e in seq.events if e.after_session == session.index]
        for item in memory.write(delivered):
            run.emit("MemoryWrite", {"memory_id": item.memory_id, "memory_type": item.memory_type,
                                     "scope": list(item.scope), "provenance_event_ids": list(item.provenance_event_ids),
                                     "content": bounded_text(item.text)})
    run.session = -1
    run.emit("RunEnded", {"status": "completed", "error_type": None}, "harness")
    return run.events


def test_every_hygiene_rate_has_a_nonzero_denominator_on_hygiene_v1() -> None:
    pack = load_pack(FIXTURES / "hygiene-v1", check_hidden=False)
    totals: dict[str, list[int]] = {metric: [0, 0] for metric in METRICS}
    for seq in pack.sequences:
        for d in derive_all(_replay(seq)):
            if d.kind == "HygieneObservation":
                totals[d.payload["metric"]][0] += d.payload["numerator"]
                totals[d.payload["metric"]][1] += d.payload["denominator"]
    unobserved = sorted(m for m, (_, den) in totals.items() if den == 0)
    assert not unobserved, f"never observed on hygiene-v1: {unobserved}"
    # every declared check failed in this replay, so each check metric trips on every opportunity
    assert totals["commission_trip"][0] == totals["commission_trip"][1] > 0
    assert totals["omission_trip"][0] == totals["omission_trip"][1] > 0


def test_stale_labels_name_the_superseded_events() -> None:
    pack = load_pack(FIXTURES / "hygiene-v1", check_hidden=False)
    stale = {seq.seq_id: [lab for lab in sequence_labels(seq) if lab["label_type"] == "stale"]
             for seq in pack.sequences}
    assert sum(len(v) for v in stale.values()) >= 4
    for seq_id, labels in stale.items():
        seq = next(s for s in pack.sequences if s.seq_id == seq_id)
        for label in labels:
            assert label["event_ids"], label["label_id"]
            # each named event carries one of the label's superseded facts, and only those
            assert all(set(seq.event_fact_map[e]) & set(label["fact_ids"]) for e in label["event_ids"])


def test_b5_memories_carry_their_events_scope() -> None:
    memory = VerbatimEventMemory(Namespace("rs", "B5", 1, "s"))
    turn = Event("t1", "rs", "r", "u", 1, 0, 0, "test", "Turn", "agent", "0" * 64,
                 {"role": "user", "text": bounded_text("review"), "source_event_id": "e1", "source_kind": "review",
                  "source_scope": ["pkg/a.py"]}, "")
    (item,) = memory.write([turn])
    assert item.scope == ("pkg/a.py",)
    old = Event("t2", "rs", "r", "u", 1, 1, 1, "test", "Turn", "agent", "0" * 64,
                {"role": "user", "text": bounded_text("review"), "source_event_id": "e2", "source_kind": "review"}, "")
    assert memory.write([old])[0].scope == ()  # a log before event v5 has no scope to give
