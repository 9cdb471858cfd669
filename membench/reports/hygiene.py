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
  ≥ 90% of the traps — the paper's 54 of 60), each with numerator and denominator; also
  `stratum_validity` (per construct: best condition ≥ 0.15, spread > 0, B0 ≤ 0.50), `warmup`
  (B0's non-scored task sessions, ≥ 0.80 passed), `continuation_audit` and `verdicts` (every gate
  by name → passed; `passed` is all of them); and `exclusion_balance` (per condition vs
  the baseline: its exclusion rate must not differ from the baseline's, `membench.reports.exclusions`).
- `hygiene_panel`: every hygiene metric (in `HYGIENE_METRICS` order) over the run set's scored
  sessions, with its direction and per condition; a metric nothing observed has denominator 0.

Reversed constructs. In C9 and C10 the trap runs the other way: the clean S3
passes without memory and a hoarding memory fails it, so `membench validate` *requires* B0 to
pass them, and the paper's B0 headroom gate fails them by design (its Table 10 reports exactly
that contradiction). Here they are reported apart: left out of `b0_headroom.overall` and
`b0_headroom.by_construct`, gated in `b0_headroom.reversed` by the mirror bound (B0 passes ≥ 0.50
of their cells: there is room for memory to hurt), and in `stratum_validity` with B0 ≥ 0.50.

Continuation audit (DreamBench-SWE §5, App. C.3: "S2 starts from S1's scored production tree, and S3
starts from S2's … clean-start S3 traps instead start S3 from the frozen clean base"). A valid cell
passes when its run has every session from 1 to the scored one (the last), every unscored session
after S1 starts as a continuation (S1 starts from the sequence's initial state, whatever its label), and its scored session starts the way every other
valid cell of the same trap does (a trap is clean-start or continuation for all conditions and
seeds). Required: every valid cell. `inherited_failed` discloses the paper's "continuation is
lenient by design": continuation cells whose previous session had not passed its oracle.

Warm-up: a non-scored session counts when it has an oracle verdict (history sessions have none)
and is not excluded.

Intervals: trap-cluster percentile bootstrap, the base report's resample count and seed; exact
Clopper–Pearson over traps where all or none of the cells passed (`ci_method`, membench.reports.conventions).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from membench.analytics.cells import Cell, pair_cells
from membench.analytics.gates import (REVERSED_CONSTRUCTS, b0_headroom, exclusion_gates, paired_units_gate, stratum_validity,
                             warmup_gate)
from membench.reports.conventions import cell_summary, condition_order, exclusion_of, valid_run
from membench.reports.exclusions import exclusion_balance_gates
from membench.reports.model import (ConditionStrata, ContinuationAudit, ExclusionGate, HeadroomGates, HeadroomOverall,
                           HygieneRate, LadderEntry, Ratio, Strata, Stratum, StratumGate, ValidityGates,
                           shallow_fields)
from membench.schemas.events import error_text
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow, SessionVerdictRow

NO_MEMORY = "B0"  # the paper's no-memory condition: the reference of the gates defined on B0
PREFERRED_HEADROOM = 0.40
MAX_HEADROOM = 0.50
MAX_EXCLUSION = 0.05
PAIRED_COVERAGE = 0.90
STRATUM_FLOOR = 0.15
WARMUP = 0.80
MAX_FINDINGS = 20

# every hygiene metric membench/processors/hygiene.py emits, with the better direction, in the panel's order
# (reports may not import processors; tests/reports/test_hygiene_section.py checks the two agree)
HYGIENE_METRICS: dict[str, str] = {
    "stale_use": "lower", "stale_activation": "lower", "overscope": "lower", "irrelevant_import": "lower",
    "contradiction_repair": "higher", "repeated_error": "lower", "human_feedback_use": "higher",
    "human_feedback_scope": "higher", "harmful_retrieval": "lower", "useful_memory_precision": "higher",
    "scope_accuracy": "higher", "memory_bloat": "lower", "commission_trip": "lower", "omission_trip": "lower",
}


@dataclass(frozen=True)
class HygieneSection:
    conditions: dict[str, ConditionStrata]
    ladder: list[LadderEntry]
    strata: Strata
    validity_gates: ValidityGates
    hygiene_panel: dict[str, HygieneRate]


def construct_sort(label: str) -> tuple[int, str]:
    return (int(label[1:]) if label[1:].isdigit() else 99, label)


def hygiene_section(reads: ReadModel, run_set: str, runs: list[RunSummaryRow],
                    baseline: str | None = None) -> HygieneSection:
    """BASELINE: the study's (membench.reports.study.resolve_baseline), for the gates that compare against the
    baseline; None: B0 (the paper's)."""
    constructs = reads.run_constructs(run_set)
    clean = reads.scored_clean_start(run_set)
    cells: list[Cell] = []
    clean_units: set[str] = set()
    cell_runs = {r.run_id: r for r in runs}
    for r in runs:
        cells.append(Cell(unit=r.task, seed=r.seed, condition=r.condition, passed=bool(r.scored_passed),
                          valid=valid_run(r), construct=constructs.get(r.run_id), exclusion=exclusion_of(r)))
        if clean.get(r.run_id):
            clean_units.add(r.task)
    conditions = sorted({c.condition for c in cells}, key=condition_order)
    traps = sorted({c.unit for c in cells})
    seeds = sorted({c.seed for c in cells})  # type: ignore[type-var]  # a report's seeds are ints (Seed: any hashable)
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
                       "ci_method": overall.ci_method, "passed": overall.passed, "valid": overall.valid})
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
        validity_gates=_validity_gates(cells, conditions, traps, seeds, reads, run_set, cell_runs,
                                       baseline or NO_MEMORY),
        hygiene_panel=_hygiene_panel(reads, run_set, cell_runs))


def _hygiene_panel(reads: ReadModel, run_set: str, cell_runs: dict[str, RunSummaryRow]
                   ) -> dict[str, HygieneRate]:
    sums: dict[str, dict[str, list[int]]] = {}
    for observation in reads.scored_hygiene(run_set):
        if observation.run_id not in cell_runs:
            continue
        acc = sums.setdefault(observation.metric, {}).setdefault(cell_runs[observation.run_id].condition, [0, 0])
        acc[0] += int(observation.numerator)
        acc[1] += int(observation.denominator)
    panel = {}
    for metric in list(HYGIENE_METRICS) + sorted(set(sums) - set(HYGIENE_METRICS)):
        per = sums.get(metric, {})
        num, den = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
        panel[metric] = HygieneRate(
            direction=HYGIENE_METRICS.get(metric, "unknown"), numerator=num, denominator=den,
            rate=num / den if den else None,
            conditions={c: Ratio(n, d, n / d if d else None)
                        for c, (n, d) in sorted(per.items(), key=lambda kv: condition_order(kv[0]))})
    return panel


def _continuation_audit(reads: ReadModel, run_set: str, cell_runs: dict[str, RunSummaryRow],
                        sessions: dict[str, dict[int, SessionVerdictRow]]) -> ContinuationAudit:
    starts = reads.session_starts(run_set)
    valid = [r for r in cell_runs.values() if valid_run(r)]
    scored_state: dict[str, Counter] = {}
    for r in valid:
        scored = [s for s in starts.get(r.run_id, []) if s.scored]
        if scored:
            scored_state.setdefault(r.task, Counter())[scored[-1].start_state] += 1
    findings: list[str] = []
    ok = continuation = inherited_failed = 0
    for r in sorted(valid, key=lambda r: (r.task, condition_order(r.condition), str(r.seed))):
        mine = starts.get(r.run_id, [])
        indices = [s.session_index for s in mine]
        problem = None
        if not mine or indices != list(range(1, len(mine) + 1)):
            problem = f"sessions {indices} are not 1..{len(mine)}"
        elif not mine[-1].scored or any(s.scored for s in mine[:-1]):
            problem = "the scored session is not the last"
        elif any(s.start_state != "continuation" for s in mine[1:-1]):
            problem = "an unscored session after S1 did not inherit the previous tree"
        else:
            states = scored_state[r.task]
            if len(states) > 1:
                problem = (f"S{len(mine)} started as {mine[-1].start_state} while the trap's cells started as "
                           + ", ".join(f"{k} ({n})" for k, n in sorted(states.items())))
        if problem is None:
            ok += 1
            if len(mine) > 1 and mine[-1].start_state == "continuation":
                continuation += 1
                previous = sessions.get(r.run_id, {}).get(len(mine) - 1)
                inherited_failed += int(previous is None or not previous.passed)
        elif len(findings) < MAX_FINDINGS:
            findings.append(f"{r.task} {r.condition} seed {r.seed}: {problem}")
    value = ok / len(valid) if valid else None
    return ContinuationAudit(name="continuation audit", value=value, threshold=1.0, direction="min",
                             passed=value is not None and value >= 1.0, numerator=ok, denominator=len(valid),
                             continuation_cells=continuation, inherited_failed=inherited_failed, findings=findings)


def gate_references(baseline: str) -> dict[str, str]:
    """Each gate family -> the condition it is measured on or against (docs/reports.md). B0 headroom,
    stratum validity's B0 clause and warm-up are defined on B0 by the paper (App. C.8 "B0 S3 pass
    rate", Table 10's "B0 rate", §5 "B0 S1+S2 warmup"); exclusions and paired coverage belong to each
    comparison (App. C.6, "each side"), so they follow the study's baseline."""
    return {"b0_headroom": NO_MEMORY, "stratum_validity.b0_rate": NO_MEMORY, "warmup": NO_MEMORY,
            "exclusions": baseline, "paired_coverage": baseline, "exclusion_balance": baseline}


def _run_whys(reads: ReadModel, run_set: str) -> dict[str, str]:
    """run id -> why the run ended as it did, in its own words: the run-level system Turn the runner
    writes for an excluded or failed run (`run_end_reasons`; for a traceback, its last line), bounded and
    redacted."""
    whys = {}
    for reason in reads.run_end_reasons(run_set):
        lines = [line for line in reason.text.strip().splitlines() if line.strip()]
        if lines:
            whys[reason.run_id] = error_text(lines[-1] if lines[0].startswith("Traceback") else " ".join(lines), bound=300)
    return whys


def _validity_gates(cells: list[Cell], conditions: list[str], traps: list[str], seeds: list,
                    reads: ReadModel, run_set: str, cell_runs: dict[str, RunSummaryRow],
                    baseline: str) -> ValidityGates:
    has_b0 = any(c.condition == NO_MEMORY for c in cells)
    has_study_baseline = any(c.condition == baseline for c in cells)
    if has_b0:
        headroom = b0_headroom(cells, baseline=NO_MEMORY, threshold=MAX_HEADROOM,
                               reversed_constructs=REVERSED_CONSTRUCTS, reversed_threshold=MAX_HEADROOM)
        overall_rate = headroom.overall.value
        b0 = HeadroomGates(
            overall=HeadroomOverall(**shallow_fields(headroom.overall), preferred_threshold=PREFERRED_HEADROOM,
                                    preferred_passed=overall_rate is not None and overall_rate <= PREFERRED_HEADROOM),
            by_construct=dict(headroom.by_construct),
            passed=headroom.passed,
            failing_constructs=[k for k, g in {**headroom.by_construct, **headroom.reversed}.items() if not g.passed],
            reversed=dict(headroom.reversed),
            note=(f"{', '.join(headroom.reversed)} run the other way (B0 passes, memory can hurt): reported apart in "
                  f"`reversed`, where {NO_MEMORY} must pass at least {MAX_HEADROOM:.2f} of their cells"
                  if headroom.reversed else None))
    else:
        b0 = HeadroomGates(overall=None, by_construct={}, passed=False, failing_constructs=[],
                           note=f"no {NO_MEMORY} cells in this run set")
    expected = len(traps) * len(seeds)
    whys = _run_whys(reads, run_set) if any(not c.valid for c in cells) else {}
    min_units = math.ceil(PAIRED_COVERAGE * len(traps))
    exclusions: dict[str, ExclusionGate] = {}
    paired_coverage = {}
    for condition in conditions:
        other = baseline if condition != baseline and has_study_baseline else condition
        paired = pair_cells(cells, condition, other)
        gate = exclusion_gates(paired, max_fraction=MAX_EXCLUSION, expected_cells=max(expected, len(paired.grid)))[0]
        reasons = Counter(c.exclusion or "unknown" for c in cells if c.condition == condition and not c.valid)
        examples, example_units = {}, {}
        for run_id, r in sorted(cell_runs.items()):
            if r.condition == condition and not valid_run(r) and run_id in whys:
                reason = exclusion_of(r) or "unknown"
                if reason not in examples:
                    examples[reason], example_units[reason] = whys[run_id], r.unit_id
        exclusions[condition] = ExclusionGate(**shallow_fields(gate), reasons=dict(sorted(reasons.items())),
                                              examples=dict(sorted(examples.items())) or None,
                                              example_units=dict(sorted(example_units.items())) or None)
        if condition != other:
            paired_coverage[f"{condition} vs {other}"] = paired_units_gate(paired, min_units=min_units,
                                                                          min_paired_seeds=2)
    strata = {construct: StratumGate(reversed=s.reversed, max_condition=s.max_condition, max_rate=s.max_rate,
                                     spread=s.spread, b0_rate=s.b0_rate, passed=s.passed)
              for construct, s in stratum_validity(cells, baseline=NO_MEMORY, floor=STRATUM_FLOOR,
                                                   b0_threshold=MAX_HEADROOM,
                                                   reversed_constructs=REVERSED_CONSTRUCTS).items()}
    sessions: dict[str, dict[int, SessionVerdictRow]] = {}
    for row in reads.session_results(run_set):
        sessions.setdefault(row.run_id, {})[row.session_index] = row
    warmup = warmup_gate(
        ((not row.excluded, bool(row.passed))
         for run_id, rows in sessions.items()
         if run_id in cell_runs and cell_runs[run_id].condition == NO_MEMORY and valid_run(cell_runs[run_id])
         for row in rows.values() if not row.scored and row.outcome != "no_verdict"),
        baseline=NO_MEMORY, threshold=WARMUP)
    audit = _continuation_audit(reads, run_set, cell_runs, sessions)
    verdicts = {"b0_headroom": b0.passed}
    verdicts.update({f"exclusions {c}": g.passed for c, g in exclusions.items()})
    verdicts.update({f"paired_coverage {k}": g.passed for k, g in paired_coverage.items()})
    balance = exclusion_balance_gates(cells, conditions, baseline)  # (membench.reports.exclusions)
    verdicts.update({f"exclusion_balance {k}": g.passed for k, g in balance.items()})
    verdicts.update({f"stratum_validity {c}": g.passed for c, g in strata.items()})
    verdicts["warmup"] = warmup.passed
    verdicts["continuation_audit"] = audit.passed
    return ValidityGates(baseline=baseline, traps=len(traps), seeds=len(seeds), b0_headroom=b0,
                         exclusions=exclusions, paired_coverage=paired_coverage, passed=all(verdicts.values()),
                         stratum_validity=strata, warmup=warmup, continuation_audit=audit, verdicts=verdicts,
                         reference=gate_references(baseline), exclusion_balance=balance)
