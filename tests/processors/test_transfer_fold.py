"""TransferFold: CCPF with blocked and unreached cases in the denominator, dimension scores, hard caps,
exclusion, resources by phase; and the published EngramBench CCPF figures reproduced from
evaluator events of runs whose case outcomes are the published ones."""

from __future__ import annotations

import json
from collections import defaultdict

from membench.processors.run_set_processor import derive_all
from membench.bus.emitter import RunEmitter
from membench.analytics.loaders import load_manifest
from tests.analytics.test_ccpf import table_2_outcomes
from tests.conftest import SHARED, require_shared

ENGRAM = SHARED / "external" / "engrambench"  # found the way conftest finds the shared folder

DIMS = [{"dimension": "A", "title": "a", "weight": 60.0}, {"dimension": "B", "title": "b", "weight": 40.0}]
CASES = [{"case_id": "A-01", "dimension": "A", "weight": 1.0, "prerequisites": ["FINAL"]},
         {"case_id": "A-02", "dimension": "A", "weight": 3.0, "prerequisites": []},
         {"case_id": "B-01", "dimension": "B", "weight": 2.0, "prerequisites": []},
         {"case_id": "B-02", "dimension": "B", "weight": 2.0, "prerequisites": ["B-01"]},
         {"case_id": "B-03", "dimension": "B", "weight": 1.0, "prerequisites": ["V1"]},
         {"case_id": "B-04", "dimension": "B", "weight": 1.0, "prerequisites": []}]


def events_of(statuses: dict[str, str], *, cases=CASES, dims=DIMS, caps=(), ended="completed", error=None,
              task="proj", run="r1", extra=None):
    out = []
    emitter = RunEmitter("rs", run, f"study/{task}/learned_bank/1", lambda e, d: out.append(e))
    emitter.emit("RunStarted", {"suite": "study", "task": task, "condition": "learned_bank", "seed": 1,
                                "agent": "scripted:refsol", "agent_kind": "scripted", "model": None, "budgets": {},
                                "code_digest": "", "pack_digest": "", "fixture_digest": "",
                                "skill_bank_digest": "b" * 64, "attempt": 1, "construct": None, "family": "transfer"},
                 visibility="harness")
    emitter.emit("EvaluatorPlan", {"task_id": task, "manifest_sha256": "0" * 64, "max_score": 100.0,
                                   "dimensions": dims, "hard_caps": list(caps), "cases": cases}, visibility="harness")
    for kind, payload in extra or ():
        emitter.emit(kind, payload)
    for case in cases:
        if case["case_id"] in statuses:
            emitter.emit("EvaluatorCase", {"case_id": case["case_id"], "dimension": case["dimension"],
                                           "weight": case["weight"], "status": statuses[case["case_id"]],
                                           "duration_ms": 1, "evidence_sha256": "",
                                           "prerequisites": case["prerequisites"]}, visibility="harness")
    emitter.session_index = -1
    emitter.emit("RunEnded", {"status": ended, "error_type": error}, visibility="harness")
    return out


def derived(events, kind):
    return [d.payload for d in derive_all(events) if d.kind == kind]


def test_blocked_and_unreached_stay_in_the_denominator_and_v1_leaves_it():
    statuses = {"A-01": "passed", "A-02": "passed", "B-01": "failed", "B-02": "blocked", "B-03": "not_applicable"}
    (result,) = derived(events_of(statuses), "TransferResult")  # B-04 never reported: unreached
    assert (result["passed"], result["applicable"], result["blocked"], result["failed"], result["errored"]) == (2, 5, 1, 1, 1)
    assert result["ccpf"] == 2 / 5 and not result["all_cases_pass"]
    dims = {d["dimension"]: d for d in derived(events_of(statuses), "TransferDimension")}
    assert dims["A"]["score"] == 1.0 and dims["B"]["score"] == 0.0 and dims["B"]["cases"] == 3
    assert result["raw_score"] == 60.0 and result["weighted_score"] == 60.0  # 100 · (60·1 + 40·0) / 100


def test_hard_caps_fire_on_their_cases_and_limit_the_score():
    caps = [{"cap_id": "CONSERVE", "cap": 35.0, "invariant": "money is conserved", "cases": ["B-01"]},
            {"cap_id": "BOOT", "cap": 25.0, "invariant": "", "cases": ["A-01"]}]
    statuses = dict.fromkeys(("A-01", "A-02", "B-02", "B-04"), "passed") | {"B-01": "failed", "B-03": "passed"}
    (result,) = derived(events_of(statuses, caps=caps), "TransferResult")
    assert result["caps_fired"] == ["CONSERVE"] and result["weighted_score"] == 35.0
    assert "B-01" in result["cap_reasons"][0] and "money is conserved" in result["cap_reasons"][0]
    assert result["raw_score"] > 35.0
    every = dict.fromkeys((c["case_id"] for c in CASES), "passed") | {"B-03": "not_applicable"}
    (clean,) = derived(events_of(every, caps=caps), "TransferResult")
    assert clean["caps_fired"] == [] and clean["weighted_score"] == 100.0 and clean["all_cases_pass"]


def test_an_excluded_run_has_no_ccpf_and_says_why():
    (result,) = derived(events_of({}, ended="excluded", error="skill_bank_modified"), "TransferResult")
    assert result["excluded"] and result["exclusion_reason"] == "skill_bank_modified" and result["ccpf"] is None
    assert derived(events_of({}, ended="excluded", error="skill_bank_modified"), "TransferDimension") == []


def test_turns_and_phase_times_are_kept_apart():
    turn = lambda role: ("Turn", {"role": role, "text": {"text": "x", "sha256": "", "length": 1, "truncated": False},  # noqa: E731
                                  "source_event_id": None, "source_kind": None, "input_tokens": 5, "cached_tokens": 0,
                                  "output_tokens": 7, "reasoning_tokens": 0, "latency_ms": 0})
    phase = lambda name: ("TransferPhase", {"phase": name, "round": 0})  # noqa: E731
    extra = [phase("plan_handoff"), turn("simulated_user"), phase("implementing"), turn("agent"), phase("delivery"),
             phase("delivery_review"), turn("simulated_user"), phase("finished")]
    (result,) = derived(events_of({}, extra=extra), "TransferResult")
    assert (result["agent_turns"], result["user_turns"]) == (1, 2)
    assert (result["input_tokens"], result["output_tokens"]) == (15, 21)
    for key in ("agent_time_ms", "user_time_ms", "evaluation_time_ms"):
        assert result[key] >= 0
    assert derived(events_of({})[:1] + events_of({})[-1:], "TransferResult") == []  # no plan: not a transfer run


def test_published_engrambench_ccpf_from_evaluator_events():
    """Runs whose EvaluatorCase events reproduce EngramBench Table 2's case outcomes (No Skills) give
    the published MeterSettle and FlagFoundry figures: 94/123 = 76.42 % and 57/123 = 46.34 %."""
    require_shared(ENGRAM)
    manifests = {m.task_id: m for m in (load_manifest(p) for p in sorted(ENGRAM.glob("*.manifest.v2.json")))}
    outcomes = [o for o in table_2_outcomes(manifests, "no_skills") if o.task in ("MeterSettle", "FlagFoundry")]
    by_run = defaultdict(dict)
    for o in outcomes:
        by_run[(o.task, o.run)][o.case] = o.status
    events = []
    for (task, run), statuses in sorted(by_run.items()):
        raw = json.loads((ENGRAM / f"{task.lower()}.manifest.v2.json").read_text(encoding="utf-8"))
        cases = [{"case_id": c["id"], "dimension": c["dimension"], "weight": float(c["weight"]),
                  "prerequisites": c["prerequisites"]} for c in raw["cases"]]
        dims = [{"dimension": k, "title": v["title"], "weight": float(v["weight"])} for k, v in raw["dimensions"].items()]
        mapped = {c["case_id"]: ("not_applicable" if "V1" in c["prerequisites"] else statuses[c["case_id"]])
                  for c in cases if c["case_id"] in statuses or "V1" in c["prerequisites"]}
        events += events_of(mapped, cases=cases, dims=dims, task=task, run=f"{task}-{run}")
    totals = defaultdict(lambda: [0, 0])
    for r in derived(events, "TransferResult"):
        totals[r["task"]][0] += r["passed"]
        totals[r["task"]][1] += r["applicable"]
    assert {t: tuple(v) for t, v in totals.items()} == {"MeterSettle": (94, 123), "FlagFoundry": (57, 123)}
    assert round(100 * 94 / 123, 2) == 76.42 and round(100 * 57 / 123, 2) == 46.34
