"""The transfer study on the embedded path: the built-in study `transfer-v1` end to end through the real CLI
(bubblewrap sandboxes for oracles, public checks and the hidden evaluator; the chDB warehouse; the
Avro log), figures read back from the warehouse as `membench sql` reads them (tests/integration/sql_batch.py:
every query of the module in one subprocess)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_cli_inprocess
from tests.integration.conftest import TRANSFER_AGENTS
from tests.integration.sql_batch import sql_batch

pytestmark = pytest.mark.integration

STUDY = Path(__file__).parents[2] / "fixtures" / "transfer-v1"


def sql(home: Path, *queries: str) -> list[list[dict]]:
    """Each query's rows (JSONEachRow) from HOME's warehouse, all in one subprocess."""
    return [[json.loads(line) for line in out.splitlines() if line.strip()]
            for out in sql_batch(home, list(queries), fmt="JSONEachRow")]


def run_set_of(home: Path, agent: str) -> str:
    short = agent.split(":")[1]
    return next(p.name for p in (home / "runs").iterdir() if p.name.startswith(f"transfer-v1-{short}-"))


def results_sql(run_set: str) -> str:
    return "SELECT * FROM transfer_results WHERE run_set = '" + run_set + "' LIMIT 1 BY derived_id"


def by_task(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["task"], r["condition"]): r for r in rows}


def null_passed_sql(run_set: str) -> str:
    return ("SELECT unit_id, JSONExtractString(payload, 'case_id') AS case_id FROM trajectory_events "
            f"WHERE run_set = '{run_set}' AND kind = 'EvaluatorCase' "
            "AND JSONExtractString(payload, 'status') = 'passed' LIMIT 1 BY event_id")


def reviews_sql(run_set: str) -> str:
    return ("SELECT count() AS n FROM trajectory_events WHERE run_set = '" + run_set + "' "
            "AND kind = 'Turn' AND JSONExtractString(payload, 'role') = 'simulated_user' "
            "AND JSONExtractString(payload, 'text', 'text') LIKE 'The public check fails%'")


def phases_sql(run_set: str) -> str:
    return ("SELECT unit_id, groupArray(JSONExtractString(payload, 'phase')) AS phases FROM "
            f"(SELECT unit_id, payload FROM trajectory_events WHERE run_set = '{run_set}' "
            "AND kind = 'TransferPhase' ORDER BY unit_id, seq LIMIT 1 BY event_id) GROUP BY unit_id")


def frozen_sql(run_set: str) -> str:
    return ("SELECT JSONExtractString(payload, 'bank') AS bank, JSONExtractString(payload, 'digest') AS d, "
            "JSONLength(payload, 'files') AS n FROM trajectory_events WHERE run_set = '" + run_set + "' "
            "AND kind = 'SkillBankFrozen' LIMIT 1 BY event_id")


def started_sql(run_set: str) -> str:
    return ("SELECT JSONExtractString(payload, 'condition') AS c, "
            "JSONExtractString(payload, 'skill_bank_digest') AS d FROM trajectory_events "
            f"WHERE run_set = '{run_set}' AND kind = 'RunStarted' LIMIT 1 BY event_id")


@pytest.fixture(scope="module")
def study(transfer_study_home):
    """The three scripted agents over the whole study (2 projects × 4 conditions, seed 1: the
    session's shared run, tests/integration/conftest.py), and what the tests read of it from the
    warehouse: every query in one `sql_batch` subprocess (one interpreter start, not one per query);
    the warehouse does not change after the runs."""
    home = transfer_study_home
    out = {agent: run_set_of(home, agent) for agent in TRANSFER_AGENTS}
    refsol, null, literal = (out[a] for a in ("scripted:refsol", "scripted:null", "scripted:memory-literal"))
    names = ["refsol", "null", "literal", "null_passed", "null_reviews", "phases", "frozen", "started"]
    rows = sql(home, results_sql(refsol), results_sql(null), results_sql(literal), null_passed_sql(null),
               reviews_sql(null), phases_sql(literal), frozen_sql(literal), started_sql(literal))
    return home, out, dict(zip(names, rows))


def test_refsol_reaches_ccpf_1_on_both_projects(study):
    got = by_task(study[2]["refsol"])
    assert {k[0] for k in got} == {"settle", "jobqueue"} and len(got) == 8
    for key, row in got.items():
        assert row["ccpf"] == 1.0 and row["all_cases_pass"] and row["weighted_score"] == 100.0, key
        assert row["caps_fired"] == [] and row["public_check_passed"] and not row["excluded"]
        assert row["applicable"] >= 40 and row["blocked"] == 0


def test_null_gets_only_what_the_starting_point_passes(study, bwrap_sandbox, tmp_path):
    """The evaluator run directly on each project's untouched workspace gives the passing set null must match."""
    from membench.transfer_protocol.evaluator import freeze_submission, run_evaluator
    from membench.formats.transfer_format import load_study

    tables = study[2]
    passed = tables["null_passed"]
    loaded = load_study(STUDY)
    for project in loaded.projects:
        frozen = tmp_path / project.project_id
        freeze_submission(project.workspace, frozen)
        baseline = {r.case_id for r in run_evaluator(bwrap_sandbox, frozen, project.evaluator, 60)
                    if r.status == "passed"}
        assert baseline and len(baseline) < len(project.evaluator.cases)
        for condition in ("no_memory", "learned_bank", "native_bank", "ablated_bank"):
            unit = f"transfer-v1/{project.project_id}/{condition}/1"
            assert {r["case_id"] for r in passed if r["unit_id"] == unit} == baseline, unit
    got = by_task(tables["null"])
    assert all(not r["public_check_passed"] and r["ccpf"] < 0.3 for r in got.values())
    # the failing public check went back to the agent as delivery-review turns of the simulated user
    reviews = tables["null_reviews"]
    assert reviews[0]["n"] == 8 * 2  # two review rounds per unit (scenario max_review_rounds)


def test_memory_literal_scores_higher_with_the_learned_bank(study):
    got = by_task(study[2]["literal"])
    for project in ("settle", "jobqueue"):
        learned, none = got[(project, "learned_bank")], got[(project, "no_memory")]
        assert learned["ccpf"] > none["ccpf"] and learned["weighted_score"] > none["weighted_score"]
        assert learned["ccpf"] == 1.0
    # the ablated skill (L1-fees) is what settle's fee cases need: ablation costs exactly those
    assert got[("settle", "ablated_bank")]["ccpf"] < got[("settle", "learned_bank")]["ccpf"]
    assert "FEE_CONSERVATION" in got[("settle", "ablated_bank")]["caps_fired"]
    assert got[("jobqueue", "ablated_bank")]["ccpf"] == got[("jobqueue", "learned_bank")]["ccpf"]
    assert got[("settle", "no_memory")]["cap_reasons"] and got[("settle", "no_memory")]["weighted_score"] <= 35


def test_protocol_events_and_resources(study):
    home, runs, tables = study
    run_set = runs["scripted:memory-literal"]
    phases = tables["phases"]
    assert len(phases) == 8
    for row in phases:
        assert row["phases"] == ["plan_handoff", "implementing", "delivery", "delivery_review", "freezing", "testing",
                                 "test_feedback", "finished"], row
    frozen = tables["frozen"]
    banks = {r["bank"]: r for r in frozen}
    assert set(banks) == {"learned", "ablated", "native"}
    assert (banks["learned"]["n"], banks["ablated"]["n"], banks["native"]["n"]) == (6, 5, 3)
    started = tables["started"]
    for row in started:
        if row["c"] in ("learned_bank", "ablated_bank", "native_bank"):
            assert row["d"] == banks[row["c"].split("_")[0]]["d"]
    got = by_task(tables["literal"])
    for row in got.values():
        assert row["agent_turns"] == 1 and row["user_turns"] == 3  # plan, acceptance, test feedback
        assert row["lines_added"] > 0 and row["patch_invocations"] == 1 and row["submission_digest"]
    report = json.loads((home / "runs" / run_set / "report.json").read_text())
    section = report["transfer"]
    by = {(p["project"], p["condition"]): p for p in section["projects"]}
    for key, row in got.items():
        assert by[key]["ccpf_micro"] == pytest.approx(row["ccpf"])
        assert by[key]["weighted_score_mean"] == pytest.approx(row["weighted_score"])
        assert [d["dimension"] for d in by[key]["dimensions"]] == list("ABCDE")
    cond = {c["condition"]: c for c in section["conditions"]}
    assert cond["no_memory"]["reduction_vs_baseline"] is None
    assert set(cond["learned_bank"]["reduction_vs_baseline"]) >= {"agent_turns", "agent_time_ms", "total_tokens"}
    md = (home / "runs" / run_set / "report.md").read_text()
    html = (home / "runs" / run_set / "report.html").read_text()
    assert "## Transfer (EngramBench protocol)" in md and "FEE_CONSERVATION" in md
    assert 'id="transfer"' in html and "<svg" in html


def test_tampered_bank_excludes_the_condition(tmp_path, bwrap_sandbox):
    home = tmp_path / "home"
    run_cli("transfer", "transfer-v1", "--agent", "scripted:memory-literal", "--phase", "learning", home=home,
            check=True)
    run_set = run_set_of(home, "scripted:memory-literal")
    skill = home / "runs" / run_set / "banks" / "s1" / "learned" / "L3-retries" / "SKILL.md"
    skill.chmod(0o644)
    skill.write_text(skill.read_text() + "\nMAX_RETRIES = 9\n")
    proc = run_cli("transfer", "transfer-v1", "--agent", "scripted:memory-literal", "--phase", "transfer", home=home)
    # the study ran and excluded the condition; what the run set holds does not verify (the bank
    # beside its log no longer matches the digest its learning run froze), so the command exits 1
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "skill bank 'learned' no longer matches its manifest" in proc.stderr and "does not verify" in proc.stderr
    results, reasons = sql(home, results_sql(run_set), (
        "SELECT JSONExtractString(payload, 'text', 'text') AS t FROM trajectory_events "
        f"WHERE run_set = '{run_set}' AND kind = 'Turn' AND JSONExtractString(payload, 'role') = 'system'"
        " LIMIT 1 BY event_id"))
    got = by_task(results)
    for project in ("settle", "jobqueue"):
        row = got[(project, "learned_bank")]
        assert row["excluded"] and row["exclusion_reason"] == "skill_bank_modified" and row["ccpf"] is None
        for other in ("no_memory", "native_bank", "ablated_bank"):
            assert not got[(project, other)]["excluded"]
    assert len(reasons) == 2 and all("skill_bank_modified" in r["t"] and "L3-retries/SKILL.md" in r["t"] for r in reasons)
    report = json.loads((home / "runs" / run_set / "report.json").read_text())
    rows = {(p["project"], p["condition"]): p for p in report["transfer"]["projects"]}
    assert rows[("settle", "learned_bank")]["exclusion_reasons"] == {"skill_bank_modified": 1}
    assert not report["verification"]["verified"] and "no longer matches its manifest" in \
        report["verification"]["first_finding"]


@pytest.mark.parametrize("breakage, field", [
    (lambda m: m["cases"][3].update(dimension="Z"), "cases[3].dimension"),
    (lambda m: m["cases"][0].pop("weight"), "cases[0].weight"),
    (lambda m: m["cases"][1].update(prerequisites=["NOPE"]), "cases[1].prerequisites[0]"),
])
def test_malformed_manifest_is_a_usage_error_and_writes_nothing(tmp_path, breakage, field):
    study = tmp_path / "study"
    shutil.copytree(STUDY, study)
    path = study / "hidden" / "projects" / "settle" / "manifest.v2.json"
    manifest = json.loads(path.read_text())
    breakage(manifest)
    path.write_text(json.dumps(manifest))
    home = tmp_path / "home"
    proc = run_cli_inprocess("transfer", str(study), "--agent", "scripted:null", home=home)
    assert proc.returncode == 2, proc.stderr
    assert "manifest.v2.json" in proc.stderr and f"'{field}'" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not home.exists() or not any(home.rglob("*"))


def test_malformed_scenario_is_a_usage_error_and_writes_nothing(tmp_path):
    study = tmp_path / "study"
    shutil.copytree(STUDY, study)
    path = study / "projects" / "jobqueue" / "scenario.json"
    scenario = json.loads(path.read_text())
    scenario["max_review_rounds"] = "two"
    path.write_text(json.dumps(scenario))
    home = tmp_path / "home"
    proc = run_cli_inprocess("transfer", str(study), home=home)
    assert proc.returncode == 2
    assert "scenario.json" in proc.stderr and "'max_review_rounds'" in proc.stderr
    assert not home.exists() or not any(home.rglob("*"))
