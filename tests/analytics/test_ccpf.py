"""CCPF: EngramBench Table 2 rebuilt from per-case outcomes with the paper's denominators.

Denominators: MeterSettle and FlagFoundry have 44 manifest cases of which 3 need the V1
checkpoint, so 41 applicable cases per run and 3 × 41 = 123 per task (76.42% = 94/123). EscrowGuard
and CapacityLease manifests are not public; the only denominators consistent with every Table 2
percentage *and* both micro-averages are 45 and 46 cases per run (3 × 45 = 135, 3 × 46 = 138),
found by exhaustive search: No Skills 242/519 = 46.63%, S-Full-20 266/519 = 51.25%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.analytics.ccpf import CaseOutcome, EvaluatorManifest, ManifestCase, UnknownCaseError, ccpf
from membench.analytics.loaders import load_manifest
from tests.conftest import require_shared

SHARED = Path(__file__).parents[2] / ".." / "shared"
ENGRAM = SHARED / "external" / "engrambench"


def engram_manifests() -> dict[str, EvaluatorManifest]:
    require_shared(ENGRAM)
    return {m.task_id: m for m in (load_manifest(p) for p in sorted(ENGRAM.glob("*.manifest.v2.json")))}


FILLER = ("failed", "error", "unreached", "failed")


def runs_for(task: str, case_ids: list[str], passes: list[int], *, skip_last_in_run0: bool = False,
             extra: dict[str, str] | None = None) -> list[CaseOutcome]:
    """Per-case outcomes of len(passes) runs: run r passes its first passes[r] cases; the other
    applicable cases fail, error or are unreached. Optional ``extra`` rows are added per run."""
    out = []
    for r, n in enumerate(passes):
        for i, case in enumerate(case_ids):
            if skip_last_in_run0 and r == 0 and i == len(case_ids) - 1:
                continue  # never reported: must still count (as unreached)
            status = "passed" if i < n else FILLER[i % len(FILLER)]
            out.append(CaseOutcome(f"run{r + 1}", task, case, status))
        for case, status in (extra or {}).items():
            out.append(CaseOutcome(f"run{r + 1}", task, case, status))
    return out


def table_2_outcomes(manifests, config: str) -> list[CaseOutcome]:
    passes = {
        "no_skills": {"MeterSettle": [31, 31, 32], "FlagFoundry": [19, 19, 19],
                      "EscrowGuard": [8, 8, 9], "CapacityLease": [22, 22, 22]},
        "s_full_20": {"MeterSettle": [33, 33, 33], "FlagFoundry": [19, 19, 20],
                      "EscrowGuard": [15, 15, 15], "CapacityLease": [21, 21, 22]},
    }[config]
    outcomes = []
    for task, key in (("MeterSettle", "metersettle"), ("FlagFoundry", "flagfoundry")):
        m = manifests[key]
        applicable = [c.id for c in m.cases if not c.needs_v1]
        v1_cases = {c.id: "passed" for c in m.cases if c.needs_v1}  # reported, but not applicable
        outcomes += runs_for(task, applicable, passes[task], skip_last_in_run0=True, extra=v1_cases)
    escrow = [f"{d}-{i:02d}" for d in "ABCDE" for i in range(1, 10)]  # 45 cases
    capacity = [f"{d}-{i:02d}" for d in "ABCDE" for i in range(1, 10)] + ["E-10"]  # 46 cases
    outcomes += runs_for("EscrowGuard", escrow, passes["EscrowGuard"], extra={"X-01": "excluded", "X-02": "excluded"})
    outcomes += runs_for("CapacityLease", capacity, passes["CapacityLease"])
    return outcomes


def pct(value: float) -> float:
    return round(100 * value, 2)


def test_engrambench_table_2_micro_averages():
    manifests = engram_manifests()
    no_skills = ccpf(table_2_outcomes(manifests, "no_skills"), manifests)
    s_full = ccpf(table_2_outcomes(manifests, "s_full_20"), manifests)

    assert {t: (r.micro.numerator, r.micro.denominator) for t, r in no_skills.tasks.items()} == {
        "CapacityLease": (66, 138), "EscrowGuard": (25, 135), "FlagFoundry": (57, 123), "MeterSettle": (94, 123)}
    assert {t: pct(r.micro.value) for t, r in no_skills.tasks.items()} == {
        "MeterSettle": 76.42, "FlagFoundry": 46.34, "EscrowGuard": 18.52, "CapacityLease": 47.83}
    assert {t: pct(r.micro.value) for t, r in s_full.tasks.items()} == {
        "MeterSettle": 80.49, "FlagFoundry": 47.15, "EscrowGuard": 33.33, "CapacityLease": 46.38}
    assert (no_skills.micro.numerator, no_skills.micro.denominator) == (242, 519)
    assert (s_full.micro.numerator, s_full.micro.denominator) == (266, 519)
    assert pct(no_skills.micro.value) == 46.63
    assert pct(s_full.micro.value) == 51.25
    assert round(100 * (s_full.micro.value - no_skills.micro.value), 2) == 4.62  # Table 2 "+4.62"


def test_case_accounting_per_run():
    manifests = engram_manifests()
    report = ccpf(table_2_outcomes(manifests, "no_skills"), manifests)
    runs = {(r.task, r.run): r for r in report.runs}
    meter1 = runs[("MeterSettle", "run1")]
    assert (meter1.passed, meter1.applicable, meter1.not_applicable_v1, meter1.missing) == (31, 41, 3, 1)
    assert sum(meter1.statuses.values()) == 41 and meter1.statuses["unreached"] >= 1
    escrow = runs[("EscrowGuard", "run3")]
    assert (escrow.passed, escrow.applicable, escrow.excluded) == (9, 45, 2)
    # macro over runs: the mean of the twelve per-run CCPFs
    expected = sum(r.passed / r.applicable for r in report.runs) / 12
    assert report.macro == pytest.approx(expected) and report.macro_runs == 12
    assert report.tasks["MeterSettle"].macro == pytest.approx((31 / 41 + 31 / 41 + 32 / 41) / 3)
    assert report.macro_over_tasks == pytest.approx((94 / 123 + 57 / 123 + 25 / 135 + 66 / 138) / 4)


def test_v1_checkpoint_makes_v1_cases_applicable():
    manifests = engram_manifests()
    outcomes = table_2_outcomes(manifests, "no_skills")
    report = ccpf(outcomes, manifests, v1_checkpoint_runs={("run1", "MeterSettle")})
    meter1 = next(r for r in report.runs if (r.task, r.run) == ("MeterSettle", "run1"))
    assert (meter1.passed, meter1.applicable, meter1.not_applicable_v1) == (34, 44, 0)


def tiny_manifest() -> EvaluatorManifest:
    return EvaluatorManifest("toy", (
        ManifestCase("A-01", "A", 1, ("FINAL",)),
        ManifestCase("A-02", "A", 1, ("FINAL", "PERF")),
        ManifestCase("E-01", "E", 1, ("V1_CHECKPOINT", "FINAL")),
        ManifestCase("E-02", "E", 1, ("frozen_v1_checkpoint",)),
    ))


def test_statuses_and_denominators_without_shared_data():
    outcomes = [
        CaseOutcome("r1", "Toy", "A-01", "passed"),
        CaseOutcome("r1", "Toy", "A-02", "error"),  # errored: stays in the denominator
        CaseOutcome("r2", "Toy", "A-01", "excluded"),  # excluded: dropped
        CaseOutcome("r2", "Toy", "E-01", "passed"),  # V1 case without checkpoint: not applicable
        CaseOutcome("r1", "Other", "x", "unreached"),
        CaseOutcome("r1", "Other", "y", "passed"),
        CaseOutcome("r2", "Other", "x", "excluded"),
    ]
    report = ccpf(outcomes, [tiny_manifest()])
    runs = {(r.task, r.run): r for r in report.runs}
    assert (runs[("Toy", "r1")].passed, runs[("Toy", "r1")].applicable) == (1, 2)
    r2 = runs[("Toy", "r2")]
    assert (r2.passed, r2.applicable, r2.excluded, r2.missing, r2.not_applicable_v1) == (0, 1, 1, 1, 2)
    other2 = runs[("Other", "r2")]
    assert other2.applicable == 0 and other2.ccpf is None
    assert (report.micro.numerator, report.micro.denominator) == (2, 5)
    assert report.runs_without_cases == 1 and report.macro_runs == 3
    assert report.macro == pytest.approx((1 / 2 + 0 + 1 / 2) / 3)


def test_ccpf_errors():
    with pytest.raises(UnknownCaseError):
        ccpf([CaseOutcome("r", "toy", "Z-99", "passed")], [tiny_manifest()])
    with pytest.raises(ValueError, match="unknown case status"):
        ccpf([CaseOutcome("r", "t", "c", "crashed?")])
    with pytest.raises(ValueError, match="duplicate"):
        ccpf([CaseOutcome("r", "t", "c", "passed"), CaseOutcome("r", "t", "c", "failed")])


def test_manifest_loader_reads_the_published_manifests():
    manifests = engram_manifests()
    assert set(manifests) == {"metersettle", "flagfoundry"}
    for m in manifests.values():
        assert len(m.cases) == 44
        assert len(m.applicable(v1_checkpoint=False)) == 41
        assert len(m.applicable(v1_checkpoint=True)) == 44


def test_manifest_loader_reads_a_manifest_carrying_design_version(tmp_path):
    """`stats ccpf` reads the keys CCPF needs and accepts the rest, as `membench transfer` does."""
    import json

    published = require_shared(ENGRAM / "metersettle.manifest.v2.json")
    raw = {"designVersion": "hidden-test-v2", **json.loads(published.read_text(encoding="utf-8"))}
    path = tmp_path / "designversion.manifest.v2.json"
    path.write_text(json.dumps(raw))
    assert load_manifest(path) == load_manifest(published)
