"""The comparisons/resources report section from run_results rows: the same numbers as the stats
functions (and `membench stats compare`) on the same cells, Holm over the registered family."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from membench.commands.stats import stats
from membench.reports.comparisons import baseline_of, comparisons_section, resources_from_rows
from membench.reports.model import to_json
from membench.reports.study import BaselineError, FamilySpec, Study
from membench.analytics.cells import Cell
from membench.analytics.compare import compare_family
from membench.analytics.holm import holm
from membench.warehouse.rows import RunSummaryRow
from tests.warehouse.row_fixtures import typed_row
from tests.reports.test_html import make_report, typed

TASKS = [f"t{i}" for i in range(6)]
SEEDS = [1, 2, 3]
# condition -> set of (task index, seed) that pass
PASSES = {
    "B0": {(0, 1), (1, 2)},
    "B3": {(0, 1), (1, 1), (2, 2), (3, 3), (4, 1)},
    "B5": {(i, s) for i in range(6) for s in SEEDS} - {(5, 3)},
}
EXCLUDED = {("B3", 5, 2)}


class Constructs:
    """A read model that answers the runs' constructs (their RunStarted events') from ROWS, and refuses
    every other read: the section reads nothing else."""

    def __init__(self, rows: list[dict]):
        self.constructs = {r["run_id"]: r["construct"] for r in rows}

    def run_constructs(self, run_set: str) -> dict[str, str | None]:
        return dict(self.constructs)

    def __getattr__(self, name):
        raise AssertionError(f"the section must read only the runs' constructs ({name})")


def run_rows(rows: list[dict]) -> list[RunSummaryRow]:
    """ROWS as the `run_results` rows the read model returns (a run row carries no construct)."""
    return [typed_row("run_results", **{k: v for k, v in r.items() if k != "construct"}) for r in rows]


def section_of(rows: list[dict], **kwargs):
    return comparisons_section(Constructs(rows), "rs", run_rows(rows), **kwargs)


def make_rows(passes=PASSES, excluded=EXCLUDED) -> list[dict]:
    rows, seq = [], 0
    for condition, passing in passes.items():
        for i, task in enumerate(TASKS):
            for seed in SEEDS:
                seq += 1
                out = (condition, i, seed) in excluded
                rows.append({
                    "run_id": f"{condition}-{task}-{seed}", "unit_id": f"suite/{task}/{condition}/{seed}",
                    "task": task, "seed": seed, "condition": condition, "suite": "suite", "agent": "scripted:x",
                    "status": "excluded" if out else "completed", "excluded": out,
                    "exclusion_reason": "isolation_unavailable" if out else None, "error_type": None,
                    "scored_passed": (i, seed) in passing and not out, "construct": f"C{i % 2 + 1}",
                    "source_seq": seq,
                    "input_tokens": 100 * (1 + list(passes).index(condition)), "cached_tokens": 10,
                    "output_tokens": 20, "reasoning_tokens": 5, "tool_calls": 3 + i % 2, "patch_invocations": 1,
                    "compactions": 0, "duration_ms": 1500,
                })
    return rows


def direct_cells(rows) -> list[Cell]:
    return [Cell(unit=r["task"], seed=r["seed"], condition=r["condition"], passed=r["scored_passed"],
                 valid=not r["excluded"], construct=r["construct"]) for r in rows]


def test_p_values_equal_compare_family_on_the_same_cells():
    rows = make_rows()
    section = to_json(section_of(rows).comparisons)
    assert section["baseline"] == "B0" and section["family_size"] == 2
    got = section["comparisons"]
    assert [(c["a"], c["b"]) for c in got] == [("B3", "B0"), ("B5", "B0")]
    family = compare_family(direct_cells(rows), [("B3", "B0"), ("B5", "B0")])
    for entry, comp, adjusted in zip(got, family.comparisons, family.holm_clustered.adjusted):
        assert entry["D"] == comp.statistic == comp.discordant_a - comp.discordant_b
        assert (entry["discordant_a"], entry["discordant_b"]) == (comp.discordant_a, comp.discordant_b)
        assert (entry["units"], entry["paired_cells"]) == (comp.units, comp.paired_cells)
        assert entry["p_clustered"] == comp.clustered.p_value
        assert entry["p_mcnemar"] == comp.mcnemar.p_value
        assert entry["p_majority"] == comp.majority.mcnemar.p_value
        assert entry["p_per_seed"] == {str(s): r.p_value for s, r in comp.per_seed.items()}
        assert entry["p_holm"] == adjusted
    # the excluded B3 cell is not paired; B5 passes 17 of 18 against B0's 2
    assert got[0]["paired_cells"] == 17 and got[1]["paired_cells"] == 18
    assert (got[1]["D"], got[1]["discordant_a"], got[1]["discordant_b"]) == (15, 15, 0)


def test_holm_over_the_family():
    got = to_json(section_of(make_rows()).comparisons)["comparisons"]
    raw = [c["p_clustered"] for c in got]
    assert [c["p_holm"] for c in got] == list(holm(raw).adjusted)
    assert raw[0] != raw[1]
    # Holm by hand: smallest p times 2, the other times 1, monotone, capped at 1
    low, high = sorted(raw)
    expected = {low: min(1.0, 2 * low), high: min(1.0, max(2 * low, high))}
    assert [c["p_holm"] for c in got] == [pytest.approx(expected[p]) for p in raw]


def test_same_json_as_stats_compare(tmp_path):
    rows = make_rows()
    path = tmp_path / "cells.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["unit", "seed", "condition", "passed", "valid", "construct"])
        for r in rows:
            writer.writerow([r["task"], r["seed"], r["condition"], int(r["scored_passed"]), int(not r["excluded"]),
                             r["construct"]])
    result = CliRunner().invoke(stats, ["compare", "--cells", str(path), "--pair", "B3:B0", "--pair", "B5:B0"])
    assert result.exit_code == 0, result.output
    section = to_json(section_of(rows).comparisons)
    out = json.loads(result.stdout)
    assert out.pop("family")["source"] == "--pair"  # what stats compare adds: which family Holm ran over
    assert out == {"comparisons": section["comparisons"], "family_size": section["family_size"]}


def test_baseline_choice_and_single_condition():
    assert baseline_of(["B0", "B5"]) == "B0"
    assert baseline_of(["B5", "curated_file", "no_memory"]) == "no_memory"
    assert baseline_of(["B3", "B5"], "B5") == "B5"
    assert baseline_of(["B0", "B5"], "B5") == "B5"  # --baseline wins over B0
    rows = [dict(r, condition={"B0": "no_memory", "B3": "curated_file", "B5": "B5"}[r["condition"]])
            for r in make_rows()]
    got = to_json(section_of(rows).comparisons)
    assert got["baseline"] == "no_memory"
    assert [(c["a"], c["b"]) for c in got["comparisons"]] == [("B5", "no_memory"), ("curated_file", "no_memory")]
    only = section_of(make_rows(passes={"B0": PASSES["B0"]}, excluded=set()))
    assert only.comparisons.comparisons == [] and only.comparisons.family_size == 0


def test_construct_from_run_started():
    from membench.bus.emitter import RunEmitter
    from membench.reports.comparisons import _constructs
    from tests.warehouse.read_model_fixtures import in_memory

    rows = make_rows()
    runs = []
    for r in rows:  # each run's RunStarted names its construct, as event schema v2 has it
        emitted: list = []
        RunEmitter("rs", r["run_id"], r["unit_id"], lambda e, d: emitted.append(e)).emit("RunStarted", {
            "suite": "suite", "task": r["task"], "condition": r["condition"], "seed": r["seed"],
            "agent": "scripted:x", "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
            "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1, "construct": "C7"})
        runs.append(emitted)
    assert set(_constructs(in_memory(runs), "rs", run_rows(rows)).values()) == {"C7"}


def test_resources_means_cost_per_success_and_reductions():
    rows = make_rows()
    res = to_json(resources_from_rows(run_rows(rows)))
    assert res["baseline"] == "B0"
    b0, b3, b5 = (res["conditions"][c] for c in ("B0", "B3", "B5"))
    assert (b0["runs"], b3["runs"], b5["runs"]) == (18, 17, 18)  # the excluded run is not a valid run
    assert b0["mean"]["input_tokens"] == 100 and b5["mean"]["input_tokens"] == 300
    assert b5["mean"]["total_tokens"] == 320 and b5["mean"]["cached_input_tokens"] == 10
    assert b5["mean"]["reasoning_tokens"] == 5 and b5["mean"]["wall_time_s"] == 1.5
    assert b5["mean"]["tool_invocations"] == 3.5 and b5["mean"]["compactions"] == 0
    assert b5["cost_per_success"] == {"total_cost": 320 * 18, "successes": 17, "runs": 18, "value": 320 * 18 / 17}
    assert b0["reduction_vs_baseline"] is None
    assert b5["reduction_vs_baseline"]["total_tokens"] == pytest.approx((120 - 320) / 120)
    assert b5["reduction_vs_baseline"]["tool_invocations"] == 0.0
    assert b5["reduction_vs_baseline"]["compactions"] is None  # baseline mean 0


def test_without_b0_or_no_memory_the_baseline_is_refused_not_guessed():
    """B3/B5 without --baseline used to be compared against B3 (sorted first)."""
    rows = [r for r in make_rows() if r["condition"] != "B0"]
    with pytest.raises(BaselineError, match=r"conditions \(B3, B5\) include neither B0 nor no_memory"):
        section_of(rows)
    with pytest.raises(BaselineError, match="--baseline: condition 'B9' is not in the run set"):
        section_of(rows, baseline="B9")
    chosen = section_of(rows, baseline="B5")
    assert chosen.comparisons.baseline == "B5" and chosen.families.baseline_source == "--baseline"
    assert [(c.a, c.b) for c in chosen.comparisons.comparisons] == [("B3", "B5")]
    study = Study(source="s.json", baseline="B3", alpha=0.05, families=())
    assert section_of(rows, study=study).families.baseline_source == "study file s.json"


def test_default_family_holm_per_test_effects_and_power():
    rows = make_rows()
    section = section_of(rows)
    family, _all_pairs = to_json(section.families)["families"]
    assert (family["name"], family["role"], family["family_size"]) == ("primary", "primary", 2)
    family_result = compare_family(direct_cells(rows), [("B3", "B0"), ("B5", "B0")])
    for i, entry in enumerate(family["comparisons"]):
        comp = family_result.comparisons[i]
        assert entry["tests"]["clustered"] == {"p": comp.clustered.p_value,
                                               "p_holm": family_result.holm_clustered.adjusted[i],
                                               "rejected": family_result.holm_clustered.rejected[i]}
        assert entry["tests"]["mcnemar"]["p_holm"] == family_result.holm_mcnemar.adjusted[i]
        assert entry["tests"]["majority"]["p_holm"] == family_result.holm_majority.adjusted[i]
        for seed, result in family_result.holm_per_seed.items():
            assert entry["per_seed"][str(seed)]["p_holm"] == result.adjusted[i]
        effect = entry["effect"]
        assert effect["difference"] == (comp.discordant_a - comp.discordant_b) / comp.paired_cells
        assert effect["ci95"][0] <= effect["difference"] <= effect["ci95"][1]
        assert entry["power"]["units"] == comp.units == 6
    # B5 vs B0: 15 of 18 paired cells favour B5 and none B0
    assert family["comparisons"][1]["effect"]["difference"] == 15 / 18
    # six equal-weight traps: the sign test rejects only at 6 of 6 (p = 1/32)
    assert family["comparisons"][1]["power"]["threshold"] == 6
    assert family["comparisons"][1]["power"]["by_q"]["0.9"] == pytest.approx(0.9 ** 6)
    # the minimum detectable difference: all 6 traps one way with probability 0.8 needs q = 0.8^(1/6),
    # then again for the traps that did differ (every one of the 6: B5 passes where B0 fails)
    all_differ, observed = family["comparisons"][1]["power"]["detectable"]
    assert (all_differ["traps"], all_differ["differing"], all_differ["seeds"]) == (6, 6, 3)
    assert all_differ["all_seeds_alike"] == pytest.approx(2 * 0.8 ** (1 / 6) - 1, abs=2e-4)
    # each differing trap differing in one of its 3 seeds: a third of that
    assert all_differ["one_discordant_seed"] == pytest.approx((2 * 0.8 ** (1 / 6) - 1) / 3, abs=1e-4)
    assert observed["differing"] == family_result.comparisons[1].clustered.nonzero_units
    # the published `comparisons` key is unchanged by the families
    assert [c.p_holm for c in section.comparisons.comparisons] == list(family_result.holm_clustered.adjusted)


def test_study_families_holm_within_each_family_and_unavailable_slots():
    rows = make_rows()
    study = Study(source="study.json", baseline=None, alpha=0.05, families=(
        FamilySpec("A", "primary", (("B5", "B0"), ("B3", "B0"), ("B7", "B0")), ("clustered", "mcnemar")),
        FamilySpec("B", "sensitivity", (("B5", "B3"),), ("majority",)),
    ))
    fams = to_json(section_of(rows, study=study).families)
    a, b, _all_pairs = fams["families"]
    assert fams["study"] == "study.json" and a["family_size"] == 3 and b["family_size"] == 1
    assert set(a["comparisons"][0]["tests"]) == {"clustered", "mcnemar"} and a["comparisons"][0]["per_seed"] is None
    unavailable = a["comparisons"][2]
    # an unavailable slot carries raw p = 1, as the paper writes it, not null
    assert unavailable["available"] is False and unavailable["tests"]["clustered"]["p"] == 1.0
    assert unavailable["tests"]["mcnemar"]["p"] == 1.0 and unavailable["primary"]["p"] == 1.0
    from membench.reports.markdown import _families_markdown

    row = next(line for line in _families_markdown(typed(make_report(families=fams))).splitlines()
               if line.startswith("| B7 | B0 |"))
    assert "clustered (primary) 1 → 1 not rejected" in row and "mcnemar 1 → 1" in row, row
    assert unavailable["tests"]["clustered"]["p_holm"] == 1.0
    raw = [c["tests"]["clustered"]["p"] for c in a["comparisons"]]
    assert [c["tests"]["clustered"]["p_holm"] for c in a["comparisons"]] == list(holm(raw).adjusted)
    # a family of one: Holm leaves its p as it is, whatever family A holds
    assert b["comparisons"][0]["tests"]["majority"]["p_holm"] == b["comparisons"][0]["tests"]["majority"]["p"]
    assert set(b["comparisons"][0]["tests"]) == {"majority"}


def test_markdown_and_html_state_the_minimum_detectable_difference():
    from membench.reports.html.study import families_html
    from membench.reports.markdown import _families_markdown

    section = section_of(make_rows())
    report = typed(make_report(families=to_json(section.families)))
    power = to_json(report)["families"]["families"][0]["comparisons"][1]["power"]
    mdd = power["detectable"][0]
    expected = (f"MDD at 80 %, one discordant seed per trap / all seeds alike: {100 * mdd['one_discordant_seed']:.1f}"
                f" / {100 * mdd['all_seeds_alike']:.1f} pp (6/6 traps differ)")
    assert expected.endswith("30.9 / 92.7 pp (6/6 traps differ)")
    assert expected in _families_markdown(report)
    assert expected in families_html(report)
