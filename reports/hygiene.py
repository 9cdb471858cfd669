"""Report section: the condition ladder, construct strata, the clean-start subset and the validity
gates of a memory-hygiene run set (DreamBench-SWE §6, Appendix C.6/C.8; docs/design.md §8).

A cell is one unit's scored (S3) outcome, as in the base report (excluded cells are counted, never
imputed). The report is rebuilt from the warehouse alone: each unit's construct comes from its
RunStarted event (`construct`, event schema v2; a log written before that field existed has no
construct and its cells fall in no construct stratum), and the clean-start flag from the scored
session's SessionStarted (`start_state == "clean"`).

Per entry of `conditions`:
- `by_construct`: construct -> {cells, valid, passed, pass_rate, ci95};
- `clean_start` and `continuation`: the same over clean-start S3 units and inherited-state units.
Top level:
- `ladder`: conditions ordered by pass rate (best first) with their trap-cluster bootstrap CIs;
- `strata`: {"constructs": {construct: {"traps": n, "pass_rate": {condition: rate}}},
  "clean_start": {"traps": n, "pass_rate": {...}}, "continuation": {...}};
- `validity_gates`: `b0_headroom` (overall and per construct, threshold 0.50 maximum, 0.40
  preferred), `exclusions` (per condition, ≤ 5% of the design grid of traps × seeds), and
  `paired_coverage` (per memory condition against B0: traps with ≥ 2 paired valid seeds, required
  ≥ 90% of the traps — the paper's 54 of 60), each with numerator and denominator.

Intervals: trap-cluster percentile bootstrap, the base report's resample count and seed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from analytics.cells import Cell, pair_cells
from analytics.gates import b0_headroom, exclusion_gates, paired_units_gate
from reports.conventions import cell_summary, condition_order, exclusion_of, valid_run
from reports.model import (ConditionStrata, ExclusionGate, HeadroomGates, HeadroomOverall, LadderEntry, Strata,
                           Stratum, ValidityGates, shallow_fields)
from warehouse import queries
from warehouse.protocol import WarehouseReader

BASELINE = "B0"
PREFERRED_HEADROOM = 0.40
MAX_HEADROOM = 0.50
MAX_EXCLUSION = 0.05
PAIRED_COVERAGE = 0.90


@dataclass(frozen=True)
class HygieneSection:
    conditions: dict[str, ConditionStrata]
    ladder: list[LadderEntry]
    strata: Strata
    validity_gates: ValidityGates


def construct_sort(label: str) -> tuple[int, str]:
    return (int(label[1:]) if label[1:].isdigit() else 99, label)


def hygiene_section(warehouse: WarehouseReader, run_set: str, runs: list[dict[str, Any]]) -> HygieneSection:
    constructs = queries.run_constructs(warehouse, run_set)
    clean = queries.scored_clean_start(warehouse, run_set)
    cells: list[Cell] = []
    clean_units: set[str] = set()
    for r in runs:
        cells.append(Cell(unit=r["task"], seed=r["seed"], condition=r["condition"], passed=bool(r["scored_passed"]),
                          valid=valid_run(r), construct=constructs.get(r["run_id"]), exclusion=exclusion_of(r)))
        if clean.get(r["run_id"]):
            clean_units.add(r["task"])
    conditions = sorted({c.condition for c in cells}, key=condition_order)
    traps = sorted({c.unit for c in cells})
    seeds = sorted({c.seed for c in cells})
    trap_construct = {c.unit: c.construct for c in cells if c.construct}
    construct_labels = sorted(set(trap_construct.values()), key=construct_sort)
    per_condition: dict[str, ConditionStrata] = {}
    ladder: list[dict[str, Any]] = []
    for condition in conditions:
        mine = [c for c in cells if c.condition == condition]
        per_condition[condition] = ConditionStrata(
            by_construct={label: cell_summary(c for c in mine if c.construct == label) for label in construct_labels},
            clean_start=cell_summary(c for c in mine if c.unit in clean_units),
            continuation=cell_summary(c for c in mine if c.unit not in clean_units))
        overall = cell_summary(mine)
        ladder.append({"condition": condition, "pass_rate": overall.pass_rate, "ci95": overall.ci95,
                       "passed": overall.passed, "valid": overall.valid})
    ladder.sort(key=lambda e: (-(e["pass_rate"] if e["pass_rate"] is not None else -1), condition_order(e["condition"])))
    strata = Strata(
        constructs={label: Stratum(traps=sum(1 for c in trap_construct.values() if c == label),
                                   pass_rate={cond: per_condition[cond].by_construct[label].pass_rate
                                              for cond in conditions})
                    for label in construct_labels},
        clean_start=Stratum(traps=len(clean_units),
                            pass_rate={cond: per_condition[cond].clean_start.pass_rate for cond in conditions}),
        continuation=Stratum(traps=len(set(traps) - clean_units),
                             pass_rate={cond: per_condition[cond].continuation.pass_rate for cond in conditions}))
    return HygieneSection(
        conditions=per_condition,
        ladder=[LadderEntry(**entry, rank=rank) for rank, entry in enumerate(ladder, 1)],
        strata=strata,
        validity_gates=_validity_gates(cells, conditions, traps, seeds))


def _validity_gates(cells: list[Cell], conditions: list[str], traps: list[str], seeds: list) -> ValidityGates:
    has_baseline = any(c.condition == BASELINE for c in cells)
    if has_baseline:
        headroom = b0_headroom(cells, baseline=BASELINE, threshold=MAX_HEADROOM)
        overall_rate = headroom.overall.value
        b0 = HeadroomGates(
            overall=HeadroomOverall(**shallow_fields(headroom.overall), preferred_threshold=PREFERRED_HEADROOM,
                                    preferred_passed=overall_rate is not None and overall_rate <= PREFERRED_HEADROOM),
            by_construct=dict(headroom.by_construct),
            passed=headroom.passed,
            failing_constructs=[k for k, g in headroom.by_construct.items() if not g.passed])
    else:
        b0 = HeadroomGates(overall=None, by_construct={}, passed=False, failing_constructs=[],
                           note=f"no {BASELINE} cells in this run set")
    expected = len(traps) * len(seeds)
    min_units = math.ceil(PAIRED_COVERAGE * len(traps))
    exclusions: dict[str, ExclusionGate] = {}
    paired_coverage = {}
    for condition in conditions:
        other = BASELINE if condition != BASELINE and has_baseline else condition
        paired = pair_cells(cells, condition, other)
        gate = exclusion_gates(paired, max_fraction=MAX_EXCLUSION, expected_cells=max(expected, len(paired.grid)))[0]
        reasons = Counter(c.exclusion or "unknown" for c in cells if c.condition == condition and not c.valid)
        exclusions[condition] = ExclusionGate(**shallow_fields(gate), reasons=dict(sorted(reasons.items())))
        if condition != other:
            paired_coverage[f"{condition} vs {other}"] = paired_units_gate(paired, min_units=min_units,
                                                                          min_paired_seeds=2)
    passed = b0.passed and all(g.passed for g in exclusions.values()) and all(
        g.passed for g in paired_coverage.values())
    return ValidityGates(baseline=BASELINE, traps=len(traps), seeds=len(seeds), b0_headroom=b0,
                         exclusions=exclusions, paired_coverage=paired_coverage, passed=bool(passed))
