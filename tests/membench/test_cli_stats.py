"""`membench stats compare|ccpf` and `membench bench stats` through click's CliRunner."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from membench.commands.bench import bench
from membench.analytics.holm import holm
from membench.commands.stats import stats
from tests.conftest import require_shared

SHARED = Path(__file__).parents[2] / ".." / "shared"
ENGRAM = SHARED / "external" / "engrambench"

# DreamBench-SWE Table 9, P1 and P4: per-trap (A-only, B-only) seed counts and both-pass cells.
P1 = ([(3, 0)] * 2 + [(2, 0)] * 5 + [(1, 0)] + [(2, 1)] * 2 + [(0, 2)] * 2 + [(0, 1)] * 9, 74)
P4 = ([(3, 0)] + [(2, 0)] * 5 + [(1, 0)] * 6 + [(0, 1)] * 5 + [(1, 2)] * 3, 73)


def layout_rows(traps, both_pass, a, b, units=60, seeds=3):
    rows, left = [], both_pass
    for t in range(units):
        a_only, b_only = traps[t] if t < len(traps) else (0, 0)
        outcomes = [(1, 0)] * a_only + [(0, 1)] * b_only
        while len(outcomes) < seeds:
            outcomes.append((1, 1) if left > 0 else (0, 0))
            left -= outcomes[-1] == (1, 1)
        for s, (pa, pb) in enumerate(outcomes):
            rows.append({"unit": f"t{t:02d}", "seed": s + 1, "condition": a, "passed": pa, "construct": "C1"})
            rows.append({"unit": f"t{t:02d}", "seed": s + 1, "condition": b, "passed": pb, "construct": "C1"})
    return rows


def write_csv(path: Path, rows, fields=("unit", "seed", "condition", "passed", "construct")):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture
def family_csv(tmp_path):
    rows = layout_rows(*P1, "hybrid", "B5") + layout_rows(*P4, "P4:hybrid", "P4:raw")
    return write_csv(tmp_path / "cells.csv", rows)


def run(group, args):
    result = CliRunner().invoke(group, args)
    return result


def test_compare_json_contract(family_csv):
    result = run(stats, ["compare", "--cells", str(family_csv), "--pair", "hybrid:B5", "--pair", "P4:hybrid:P4:raw"])
    # "P4:hybrid:P4:raw" is not A:B — condition names with ':' are rejected
    assert result.exit_code == 2
    result = run(stats, ["compare", "--cells", str(family_csv), "--pair", "hybrid:B5"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (p1,) = out["comparisons"]
    assert set(p1) == {"a", "b", "D", "discordant_a", "discordant_b", "units", "paired_cells", "p_clustered",
                       "p_mcnemar", "p_majority", "p_per_seed", "p_holm", "clustered_method"}
    assert p1["clustered_method"] == "exact"  # 60 traps are far below the exact test's bound
    assert (p1["a"], p1["b"], p1["D"], p1["discordant_a"], p1["discordant_b"]) == ("hybrid", "B5", 6, 21, 15)
    assert (p1["units"], p1["paired_cells"]) == (60, 180)
    assert p1["p_clustered"] == 0.5184192657470703  # DreamBench-SWE Appendix C.6
    assert round(p1["p_mcnemar"], 3) == 0.405  # §7
    assert p1["p_holm"] == p1["p_clustered"]  # a family of one
    assert set(p1["p_per_seed"]) == {"1", "2", "3"}
    assert all(0 < p <= 1 for p in p1["p_per_seed"].values())
    assert 0 < p1["p_majority"] <= 1
    assert out["family_size"] == 1


def test_compare_family_holm_and_padding(tmp_path):
    rows = layout_rows(*P1, "hybrid", "B5") + layout_rows(*P4, "hybrid2", "raw")
    path = write_csv(tmp_path / "cells.csv", rows)
    result = run(stats, ["compare", "--cells", str(path), "--pair", "hybrid:B5", "--pair", "hybrid2:raw",
                         "--family-size", "6"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    p1, p4 = out["comparisons"]
    assert out["family_size"] == 6
    assert p4["D"] == 11 and p4["p_clustered"] == 0.1278667449951172
    assert p4["p_holm"] == pytest.approx(0.7672004699707031, rel=1e-15)  # 6 × p in a six-slot family
    assert p1["p_holm"] == 1.0


def _ladder_csv(tmp_path: Path) -> Path:
    """12 traps × 3 seeds: B0 never passes, X always, Y in the first 8 traps."""
    rows = [{"unit": f"t{t:02d}", "seed": s, "condition": c, "passed": int(c == "X" or (c == "Y" and t < 8))}
            for t in range(12) for s in (1, 2, 3) for c in ("B0", "X", "Y")]
    return write_csv(tmp_path / "ladder.csv", rows, fields=("unit", "seed", "condition", "passed"))


def test_compare_without_a_registered_family_says_which_it_used(tmp_path):
    path = _ladder_csv(tmp_path)
    result = run(stats, ["compare", "--cells", str(path), "--pair", "X:B0", "--pair", "Y:B0"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["family"] == {"source": "--pair", "size": 2, "alpha": 0.05, "evaluated": 2, "unavailable": []}
    assert "Holm over a family of the 2 pair(s) given" in result.stderr
    assert "--unavailable COND" in result.stderr and "--study FILE" in result.stderr


def test_unavailable_slots_stay_in_the_family_at_p_1(tmp_path):
    path = _ladder_csv(tmp_path)
    pairs = ["--pair", "X:B0", "--pair", "Y:B0"]
    shrunk = json.loads(run(stats, ["compare", "--cells", str(path), *pairs]).stdout)
    result = run(stats, ["compare", "--cells", str(path), *pairs, "--unavailable", "Z", "--unavailable", "W:B0"])
    assert result.exit_code == 0, result.output
    assert "Holm over a family" not in result.stderr  # the family was registered: nothing to warn of
    out = json.loads(result.stdout)
    assert out["family"]["source"] == "--unavailable" and out["family"]["size"] == 4
    assert out["family"]["unavailable"] == [{"a": "Z", "b": "B0", "p": 1.0, "p_holm": 1.0},
                                            {"a": "W", "b": "B0", "p": 1.0, "p_holm": 1.0}]
    raw = [c["p_clustered"] for c in out["comparisons"]]
    assert [c["p_holm"] for c in out["comparisons"]] == list(holm([*raw, None, None]).adjusted[:2])
    # the same family registered by size alone gives the same Holm p-values
    padded = json.loads(run(stats, ["compare", "--cells", str(path), *pairs, "--family-size", "4"]).stdout)
    assert [c["p_holm"] for c in padded["comparisons"]] == [c["p_holm"] for c in out["comparisons"]]
    assert padded["family"]["unavailable"] == [{"a": None, "b": None, "p": 1.0, "p_holm": 1.0}] * 2
    # control: the two-pair family's smallest Holm p is half the four-slot family's
    assert out["comparisons"][0]["p_holm"] == pytest.approx(2 * shrunk["comparisons"][0]["p_holm"])


def test_a_study_file_registers_the_family(tmp_path):
    path = _ladder_csv(tmp_path)
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"families": [
        {"name": "A", "role": "primary", "comparisons": [["X", "B0"], ["Z", "B0"], ["Y", "B0"], ["W", "B0"]]},
        {"name": "B", "role": "sensitivity", "comparisons": [["X", "Y"]]}]}), encoding="utf-8")
    result = run(stats, ["compare", "--cells", str(path), "--study", str(study)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["family"]["source"] == "--study study.json (family A)" and out["family"]["size"] == 4
    assert [(u["a"], u["p"]) for u in out["family"]["unavailable"]] == [("Z", 1.0), ("W", 1.0)]
    by_option = json.loads(run(stats, ["compare", "--cells", str(path), "--pair", "X:B0", "--pair", "Y:B0",
                                       "--unavailable", "Z", "--unavailable", "W"]).stdout)
    assert out["comparisons"] == by_option["comparisons"]
    sensitivity = json.loads(run(stats, ["compare", "--cells", str(path), "--study", str(study),
                                         "--family", "B"]).stdout)
    assert sensitivity["family"]["size"] == 1 and sensitivity["comparisons"][0]["a"] == "X"


@pytest.mark.parametrize(("args", "needles"), [
    (["--pair", "X:B0", "--pair", "X:Y", "--unavailable", "Z"], ["--unavailable Z", "no common B", "A:B"]),
    (["--pair", "X:B0", "--unavailable", "X:B0"], ["--unavailable X:B0", "registered twice"]),
    (["--pair", "X:B0", "--unavailable", "Z", "--family-size", "1"], ["--family-size 1", "2 comparisons"]),
    (["--pair", "X:B0", "--study", "study.json"], ["--study", "without --pair"]),
    (["--pair", "X:B0", "--family", "A"], ["--family", "--study FILE"]),
    ([], ["--pair", "--study FILE"]),
    (["--study", "study.json", "--family", "C"], ["--family", "no family 'C'", "A"]),
    (["--study", "absent.json"], ["--study", "absent.json"]),
])
def test_compare_family_usage_errors_exit_2(tmp_path, monkeypatch, args, needles):
    path = _ladder_csv(tmp_path)
    (tmp_path / "study.json").write_text(json.dumps({"families": [
        {"name": "A", "role": "primary", "comparisons": [["X", "B0"]]}]}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = run(stats, ["compare", "--cells", str(path), *args])
    assert result.exit_code == 2, result.output
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_a_pair_that_did_not_run_points_to_unavailable(tmp_path):
    result = run(stats, ["compare", "--cells", str(_ladder_csv(tmp_path)), "--pair", "X:B0", "--pair", "Z:B0"])
    assert result.exit_code == 2 and "no data row has condition 'Z'" in result.stderr
    assert "--unavailable Z:B0" in result.stderr


def test_compare_with_exclusions(tmp_path):
    rows = [
        {"unit": "t1", "seed": 1, "condition": "A", "passed": 1, "valid": 1},
        {"unit": "t1", "seed": 1, "condition": "B", "passed": 0, "valid": 1},
        {"unit": "t1", "seed": 2, "condition": "A", "passed": 1, "valid": 1},
        {"unit": "t1", "seed": 2, "condition": "B", "passed": "", "valid": 0},
    ]
    path = write_csv(tmp_path / "cells.csv", rows, fields=("unit", "seed", "condition", "passed", "valid"))
    out = json.loads(run(stats, ["compare", "--cells", str(path), "--pair", "A:B"]).stdout)
    c = out["comparisons"][0]
    assert (c["paired_cells"], c["D"], c["p_clustered"], c["p_mcnemar"]) == (1, 1, 1.0, 1.0)


@pytest.mark.parametrize(
    ("text", "args", "needles"),
    [
        ("unit,seed,passed\nt,1,1\n", ["--pair", "A:B"], ["line 1", "column 'condition'", "missing required column"]),
        ("unit,seed,condition,passed\nt,1,A,1\nt,1,B,x\n", ["--pair", "A:B"],
         ["data row 2 (line 3)", "column 'passed'", "binary"]),
        ("unit,seed,condition,passed\nt,1,A,1\nt,1,B,0\nt,1,A,0\n", ["--pair", "A:B"],
         ["data row 3 (line 4)", "column 'unit,seed,condition'", "duplicate cell", "data row 1"]),
        ("unit,seed,condition,passed\nt,1,A,1\nt,1,B,0\n", ["--pair", "A:C"],
         ["column 'condition'", "no data row has condition 'C'", "A:C"]),
        ("unit,seed,condition,passed\nt,1,A,1\nt,1,B,0\n", ["--pair", "AB"], ["--pair 'AB'", "A:B"]),
        ("unit,seed,condition,passed\nt,1,A,1\nt,1,B,0\n", ["--pair", "A:B", "--pair", "B:A", "--family-size", "1"],
         ["--family-size 1"]),
    ],
)
def test_compare_usage_errors_exit_2(tmp_path, text, args, needles):
    path = tmp_path / "in.csv"
    path.write_text(text, encoding="utf-8")
    result = run(stats, ["compare", "--cells", str(path), *args])
    assert result.exit_code == 2
    message = result.stderr
    for needle in needles:
        assert needle in message, message
    if "--pair" not in needles[0] and "--family-size" not in needles[0]:
        assert "in.csv" in message


def test_compare_missing_file_exit_2(tmp_path):
    result = run(stats, ["compare", "--cells", str(tmp_path / "absent.csv"), "--pair", "A:B"])
    assert result.exit_code == 2 and "absent.csv" in result.stderr


def write_cases(path: Path, rows):
    return write_csv(path, rows, fields=("run", "task", "case", "status"))


def test_ccpf_without_manifest(tmp_path):
    rows = [
        {"run": "r1", "task": "T", "case": "a", "status": "passed"},
        {"run": "r1", "task": "T", "case": "b", "status": "error"},
        {"run": "r1", "task": "T", "case": "c", "status": "unreached"},
        {"run": "r1", "task": "T", "case": "d", "status": "excluded"},
        {"run": "r2", "task": "T", "case": "a", "status": "passed"},
        {"run": "r2", "task": "U", "case": "a", "status": "failed"},
    ]
    result = run(stats, ["ccpf", "--cases", str(write_cases(tmp_path / "cases.csv", rows))])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["overall"]["micro"] == {"passed": 2, "applicable": 5, "ccpf": 0.4}
    assert out["overall"]["macro"] == {"ccpf": pytest.approx((1 / 3 + 1 + 0) / 3), "runs": 3, "runs_without_cases": 0}
    assert out["tasks"]["T"]["micro"] == {"passed": 2, "applicable": 4, "ccpf": 0.5}
    assert out["tasks"]["T"]["macro"] == {"ccpf": pytest.approx((1 / 3 + 1) / 2), "runs": 2}
    assert out["overall"]["macro_over_tasks"] == pytest.approx((0.5 + 0) / 2)
    r1 = next(r for r in out["runs"] if (r["run"], r["task"]) == ("r1", "T"))
    assert (r1["excluded"], r1["statuses"]["error"], r1["statuses"]["unreached"]) == (1, 1, 1)


def test_ccpf_engrambench_metersettle_with_manifest(tmp_path):
    require_shared(ENGRAM)
    manifest = json.loads((ENGRAM / "metersettle.manifest.v2.json").read_text(encoding="utf-8"))
    applicable = [c["id"] for c in manifest["cases"] if "V1" not in c["prerequisites"]]
    v1_cases = [c["id"] for c in manifest["cases"] if "V1" in c["prerequisites"]]
    assert (len(applicable), len(v1_cases)) == (41, 3)
    rows = []
    for r, passes in enumerate((31, 31, 32)):  # Table 2, No Skills MeterSettle: 94/123 = 76.42%
        for i, case in enumerate(applicable[:-1]):  # the last applicable case is never reported
            rows.append({"run": f"run{r}", "task": "MeterSettle", "case": case,
                         "status": "passed" if i < passes else "failed"})
        for case in v1_cases:  # no V1 checkpoint: not applicable even when reported as passed
            rows.append({"run": f"run{r}", "task": "MeterSettle", "case": case, "status": "passed"})
    path = write_cases(tmp_path / "cases.csv", rows)
    result = run(stats, ["ccpf", "--cases", str(path), "--manifest", str(ENGRAM / "metersettle.manifest.v2.json"),
                         "--manifest", str(ENGRAM / "flagfoundry.manifest.v2.json")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    micro = out["tasks"]["MeterSettle"]["micro"]
    assert (micro["passed"], micro["applicable"]) == (94, 123)
    assert all((r["missing"], r["not_applicable_v1"]) == (1, 3) for r in out["runs"])
    assert round(100 * micro["ccpf"], 2) == 76.42
    assert out["manifests"] == ["flagfoundry", "metersettle"]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("run,task,case,status\nr,t,c,passed\nr,t,d,crashed\n", ["data row 2 (line 3)", "column 'status'", "crashed"]),
        ("run,task,status\nr,t,passed\n", ["line 1", "column 'case'", "missing required column"]),
        ("run,task,case,status\nr,t,c,passed\nr,t,c,failed\n", ["data row 2", "column 'run,task,case'", "duplicate"]),
    ],
)
def test_ccpf_usage_errors_exit_2(tmp_path, text, needles):
    path = tmp_path / "cases.csv"
    path.write_text(text, encoding="utf-8")
    result = run(stats, ["ccpf", "--cases", str(path)])
    assert result.exit_code == 2
    assert "cases.csv" in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_ccpf_bad_manifest_exit_2(tmp_path):
    cases = write_cases(tmp_path / "cases.csv", [{"run": "r", "task": "toy", "case": "Z", "status": "passed"}])
    manifest = tmp_path / "toy.json"
    manifest.write_text(json.dumps({"taskId": "toy", "cases": [{"id": "A-01"}]}), encoding="utf-8")
    result = run(stats, ["ccpf", "--cases", str(cases), "--manifest", str(manifest)])
    assert result.exit_code == 2
    assert "data row 1" in result.stderr and "column 'case'" in result.stderr and "'Z'" in result.stderr
    manifest.write_text("{not json", encoding="utf-8")
    result = run(stats, ["ccpf", "--cases", str(cases), "--manifest", str(manifest)])
    assert result.exit_code == 2 and "toy.json" in result.stderr and "invalid JSON" in result.stderr


def test_bench_is_a_group_with_stats():
    assert "stats" in bench.commands
    result = run(bench, ["stats", "--units", "12", "--cells", "3000", "--resamples", "50", "--repeats", "1",
                         "--compare-units", "200", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["machine"]) >= {"nproc", "cpu_model", "python"}
    names = [t["name"] for t in out["timings"]]
    assert names[:3] == ["P1-P6 family + gates + bootstrap CIs", "build synthetic cells",
                         "pass fractions + bootstrap CIs"]
    assert len(names) == 4 and "compare" in names[3]
    assert out["timings"][0]["detail"]["comparisons"] == 6
    assert out["timings"][0]["detail"]["cells"] == 12 * 3 * 6


def test_registered_in_the_main_cli():
    from membench.cli import main

    assert {"stats", "bench"} <= set(main.list_commands(None))
    result = CliRunner().invoke(main, ["stats", "--help"])
    assert result.exit_code == 0 and "compare" in result.output and "ccpf" in result.output


def test_compare_beyond_the_exact_bound_names_its_method(tmp_path):
    # 4,000 units x 3 seeds with d_t = +3, -3, +1 and (every other time) -1: k = 3,500 nonzero units,
    # S = 7,500, k * S > 2^24, so p_clustered is the seeded Monte Carlo sign-flip; D = 500 (z ~ 3.6)
    wins = {0: (3, 0), 1: (0, 3), 2: (1, 0), 3: (0, 1)}
    rows = []
    for u in range(4000):
        a_only, b_only = wins[u % 4] if u % 8 != 7 else (0, 0)
        for s in (1, 2, 3):
            a, b = s <= a_only, s <= b_only
            rows.append({"unit": f"u{u:05d}", "seed": s, "condition": "A", "passed": int(a)})
            rows.append({"unit": f"u{u:05d}", "seed": s, "condition": "B", "passed": int(b)})
    path = write_csv(tmp_path / "cells.csv", rows, fields=("unit", "seed", "condition", "passed"))
    result = run(stats, ["compare", "--cells", str(path), "--pair", "A:B"])
    assert result.exit_code == 0, result.output
    (c,) = json.loads(result.stdout)["comparisons"]
    mc = c["clustered_monte_carlo"]
    assert c["clustered_method"] == "monte_carlo"
    assert (mc["draws"], mc["seed"], mc["exact_max_work"]) == (1_000_000, 20260101, 2**24)
    assert mc["work"] == 3500 * 7500 > mc["exact_max_work"] and c["D"] == 500
    assert c["p_clustered"] == (mc["extreme_draws"] + 1) / (mc["draws"] + 1)
    low, high = mc["p_ci95"]
    assert 0 < low <= c["p_clustered"] <= high < 0.01 and high - low < 0.001
    again = json.loads(run(stats, ["compare", "--cells", str(path), "--pair", "A:B"]).stdout)
    assert again["comparisons"][0]["p_clustered"] == c["p_clustered"]  # seeded


def test_bench_compare_csv_workload():
    from membench.bench.stats_timings import bench_compare_csv

    timing = bench_compare_csv(units=2000, seeds=3, repeats=1)
    assert timing.detail["rows"] == 12_000 and timing.detail["clustered_method"] in ("exact", "monte_carlo")
    assert timing.detail["file_bytes"] > 12_000 * 10 and timing.min_s > 0
