"""Hygiene observations, from events: numerators and denominators per label and per construct."""

from __future__ import annotations

from tests.processors.test_failure_rules import ALL, RunBuilder, memory_run


def observed(run: RunBuilder) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for row in run.derived("HygieneObservation"):
        num, den = out.get(row["metric"], (0, 0))
        out[row["metric"]] = (num + row["numerator"], den + row["denominator"])
    return out


def test_per_construct_memory_metrics():
    run = memory_run()
    run.label("task_scope", [], fact_ids=["pkg"])
    run.task(injected=ALL, cited=["m_stale"], outcome="fail")
    obs = observed(run)
    assert obs["irrelevant_import"] == (1, 3)  # m_other of three injected
    assert obs["stale_activation"] == (1, 1)
    assert obs["stale_use"] == (1, 1)
    assert "overscope" not in obs  # no injected memory records a scope
    rows = run.derived("HygieneObservation")
    assert {r["construct"] for r in rows} == {"C1"} and all(r["scored"] for r in rows)


def test_label_metrics_and_scope():
    run = RunBuilder("B5")
    run.label("human-feedback", ["e_fb"])
    run.label("contradiction", ["e_new"])
    run.label("repeated-error-opportunity", ["e_err"])
    run.label("harmful-retrieval", ["e_bad"])
    run.label("task_scope", [], fact_ids=["pkg/a.py"])
    run.history(deliver={"e_fb": "m_fb", "e_new": "m_new", "e_err": "m_err", "e_bad": "m_bad"},
                scope={"m_fb": ["pkg"], "m_bad": ["other/b.py"]})
    run.task(injected=["m_fb", "m_bad"], cited=["m_fb"], outcome="pass")
    obs = observed(run)
    assert obs["human_feedback_use"] == (1, 1)
    assert obs["human_feedback_scope"] == (1, 1)  # pkg contains the task's pkg/a.py
    assert obs["contradiction_repair"] == (1, 1)
    assert obs["repeated_error"] == (0, 1)
    assert obs["harmful_retrieval"] == (1, 1)
    assert obs["overscope"] == (1, 2)  # m_bad's scope misses the task


def test_no_memory_gets_outcome_metrics_only():
    run = RunBuilder("B0")
    run.label("human-feedback", ["e_fb"])
    run.label("repeated-error-opportunity", ["e_err"])
    run.history(deliver={"e_fb": None, "e_err": None})
    run.task(read=False, outcome="fail")
    assert observed(run) == {"human_feedback_use": (0, 1), "repeated_error": (1, 1)}


def test_precision_scope_accuracy_and_bloat():
    run = memory_run()
    run.label("task_scope", [], fact_ids=["pkg/a.py"])
    run.task(injected=["m_rel", "m_other"], outcome="pass")
    obs = observed(run)
    assert obs["useful_memory_precision"] == (1, 2)  # m_rel of the two injected
    assert obs["memory_bloat"] == (3, 1)  # three memories held, one useful
    assert obs["scope_accuracy"] == (0, 2)  # neither records a scope, so neither matches


def test_scope_accuracy_counts_matching_scopes():
    run = RunBuilder("B5")
    run.label("required", ["e_a"])
    run.label("task_scope", [], fact_ids=["pkg/a.py"])
    run.history(deliver={"e_a": "m_a", "e_b": "m_b", "e_c": "m_c"},
                scope={"m_a": ["pkg/a.py"], "m_b": ["other/b.py"]})
    run.task(injected=["m_a", "m_b", "m_c"], outcome="pass")
    obs = observed(run)
    assert obs["scope_accuracy"] == (1, 3) and obs["overscope"] == (1, 2)


def test_commission_and_omission_checks_trip_on_their_failed_cases():
    run = RunBuilder("B0")
    run.label("commission-check", [], fact_ids=["test_stale_absent"])
    run.label("omission-check", [], fact_ids=["test_current", "test_other"])
    run.history()
    run.task(read=False, outcome="fail", cases=[("test_stale_absent", "fail"), ("test_current", "pass"),
                                                ("test_other[1]", "pass")])
    assert observed(run) == {"commission_trip": (1, 1), "omission_trip": (0, 1)}


def test_a_declared_case_missing_from_the_verdict_counts_as_tripped():
    run = RunBuilder("B0")
    run.label("omission-check", [], fact_ids=["test_current"])
    run.history()
    run.task(read=False, outcome="fail", cases=[])
    assert observed(run) == {"omission_trip": (1, 1)}
    run = RunBuilder("B0")
    run.label("omission-check", [], fact_ids=["test_current"])
    run.history()
    run.task(read=False, outcome=None)  # no verdict: nothing observed
    assert observed(run) == {}
