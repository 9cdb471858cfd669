"""The report's validity gates, on runs shaped like hygiene-v1 under
`scripted:memory-literal`: B0 fails the forward traps and passes the reversed ones (C9), B5 the
opposite — exactly what `membench validate` admits.

Before the fix the verdict was always FAIL on such a pack (per-construct B0
headroom failed the reversed construct). The continuation audit and the warm-up gate are shown to
fail on runs that break them. The runs are read from an in-memory read model (the processors' derived
events of them): the gates are report logic; tests/warehouse/test_read_model.py holds the model to
the warehouse's SQL."""

from __future__ import annotations

from membench.bus.emitter import RunEmitter
from membench.reports.build import build_report
from membench.schemas.events import bounded_text
from tests.warehouse.read_model_fixtures import in_memory


TRAPS = {"c1-a": "C1", "c1-b": "C1", "c9-a": "C9"}


def _run(task: str, condition: str, seed: int, s3_passes: bool, *, warmup: tuple[bool, bool] = (True, True),
         starts: tuple[str, str, str] = ("continuation", "continuation", "continuation")) -> list:
    emitted: list = []
    em = RunEmitter("rs", f"{task}-{condition}-{seed}", f"hyg/{task}/{condition}/{seed}",
                    lambda e, d: emitted.append(e))
    em.emit("RunStarted", {"suite": "hyg", "task": task, "condition": condition, "seed": seed, "agent": "scripted:x",
                           "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                           "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1,
                           "construct": TRAPS[task], "family": "f"})
    for i, passed in enumerate((*warmup, s3_passes), start=1):
        em.session_index = i
        em.emit("SessionStarted", {"session_index": i, "instruction": bounded_text("do"), "start_state": starts[i - 1],
                                   "workspace_digest": "w", "scored": i == 3, "oracle_id": f"o{i}"})
        em.emit("OracleVerdict", {"oracle_id": f"o{i}", "outcome": "pass" if passed else "fail", "cases": [],
                                  "exit_status": 0, "inconclusive": False, "duration_ms": 1}, visibility="harness")
        em.emit("SessionEnded", {"session_index": i, "status": "completed"})
    em.session_index = -1
    em.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")
    return emitted


def _report(tmp_path, runs: list[list], baseline: str | None = None):
    return build_report(in_memory(runs), "rs", baseline=baseline)


def _grid(overrides: dict | None = None, conditions: tuple[str, ...] = ("B0", "B5")) -> list[list]:
    runs = []
    for task, construct in TRAPS.items():
        for condition in conditions:
            for seed in (1, 2, 3):
                memory_helps = construct != "C9"
                passes = (condition != "B0") == memory_helps
                kwargs = (overrides or {}).get((task, condition, seed), {})
                runs.append(_run(task, condition, seed, passes, **kwargs))
    return runs


def test_a_valid_pack_with_reversed_traps_passes_every_gate(tmp_path):
    gates = _report(tmp_path, _grid()).validity_gates
    head = gates.b0_headroom
    assert head.passed and head.failing_constructs == [] and list(head.by_construct) == ["C1"]
    assert (head.overall.numerator, head.overall.denominator) == (0, 6)  # C9's passes are not headroom
    assert (head.reversed["C9"].numerator, head.reversed["C9"].denominator, head.reversed["C9"].passed) == (3, 3, True)
    assert gates.stratum_validity["C9"].reversed and gates.stratum_validity["C9"].passed
    assert gates.stratum_validity["C1"].passed and gates.stratum_validity["C1"].max_condition == "B5"
    assert (gates.warmup.numerator, gates.warmup.denominator, gates.warmup.passed) == (18, 18, True)
    audit = gates.continuation_audit
    assert (audit.numerator, audit.denominator, audit.findings, audit.continuation_cells) == (18, 18, [], 18)
    assert gates.verdicts and all(gates.verdicts.values()) and gates.passed


def test_warmup_and_continuation_audit_fail_on_broken_runs(tmp_path):
    broken = {("c1-a", "B0", 1): {"warmup": (False, False)}, ("c1-a", "B0", 2): {"warmup": (True, False)},
              ("c9-a", "B0", 1): {"warmup": (False, True)},
              ("c1-b", "B5", 2): {"starts": ("continuation", "continuation", "clean")}}
    gates = _report(tmp_path, _grid(broken)).validity_gates
    assert (gates.warmup.numerator, gates.warmup.denominator, gates.warmup.passed) == (14, 18, False)  # 0.78 < 0.80
    audit = gates.continuation_audit
    assert not audit.passed and audit.denominator == 18
    # the odd cell, and (since the trap's cells disagree) the others of that trap are named
    assert any(f.startswith("c1-b B5 seed 2: S3 started as clean") for f in audit.findings)
    assert audit.inherited_failed == 2  # c1-a B0 seeds 1 and 2 inherited an S2 that failed
    assert not gates.passed and {k for k, v in gates.verdicts.items() if not v} == {"warmup", "continuation_audit"}


def test_gates_against_the_baseline_follow_the_study_and_b0_gates_stay_on_b0(tmp_path):
    """--baseline B5: the per-comparison gates (paired coverage, exclusions) pair every condition with
    B5; B0 headroom, stratum validity's B0 clause and warm-up are the paper's B0 gates and stay on B0.
    Before the fix paired coverage was always "<condition> vs B0"."""
    conditions = ("B0", "B1", "B5")
    gates = _report(tmp_path, _grid(conditions=conditions), baseline="B5").validity_gates
    assert gates.baseline == "B5"
    assert set(gates.paired_coverage) == {"B0 vs B5", "B1 vs B5"}
    assert all((g.numerator, g.denominator) == (3, 3) for g in gates.paired_coverage.values())
    assert gates.reference == {"b0_headroom": "B0", "stratum_validity.b0_rate": "B0", "warmup": "B0",
                               "exclusions": "B5", "paired_coverage": "B5", "exclusion_balance": "B5"}
    assert set(gates.exclusion_balance) == {"B0 vs B5", "B1 vs B5"}  # Against the study's baseline
    head = gates.b0_headroom
    assert head.overall.name == "B0 headroom" and (head.overall.numerator, head.overall.denominator) == (0, 6)
    assert head.reversed["C9"].name == "B0 passes reversed C9"
    assert gates.stratum_validity["C1"].b0_rate.name == "B0 rate C1"
    assert gates.warmup.name == "B0 warm-up S1+S2" and gates.warmup.denominator == 18
    assert set(gates.exclusions) == set(conditions) and gates.passed


def test_a_run_set_without_b0_pairs_its_gates_with_the_named_baseline(tmp_path):
    """No B0: the B0 gates cannot be evaluated (and say so), while paired coverage is still measured
    against the study's baseline (before the fix it was silently empty)."""
    gates = _report(tmp_path, _grid(conditions=("B1", "B5")), baseline="B1").validity_gates
    assert gates.baseline == "B1" and set(gates.paired_coverage) == {"B5 vs B1"}
    assert gates.paired_coverage["B5 vs B1"].passed
    assert gates.b0_headroom.overall is None and gates.b0_headroom.note == "no B0 cells in this run set"
    assert gates.warmup.value is None and not gates.passed


def test_a_b0_alone_run_failing_a_reversed_construct_renders(tmp_path):
    """B0 alone, failing the reversed trap C9. `failing_constructs` names C9, whose gate
    is in `reversed`, not `by_construct`: report.md ended in KeyError 'C9'. The control shows the report
    does carry that shape (so the test exercises the path that crashed)."""
    from membench.reports.model import to_json
    from tests.reports.test_html import render_html, render_markdown

    runs = [_run(task, "B0", seed, False) for task in TRAPS for seed in (1, 2, 3)]
    document = to_json(_report(tmp_path, runs))
    head = document["validity_gates"]["b0_headroom"]
    assert "C9" in head["failing_constructs"] and "C9" not in head["by_construct"]  # the shape that crashed
    md = render_markdown(document)
    assert "C9" in md and "0/3, reversed" in md
    assert 'C9' in render_html(document)
