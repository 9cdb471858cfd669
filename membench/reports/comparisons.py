"""Report section: paired comparisons against the baseline (a registered Holm family) and resources.

Cells come from the run set's `run_results` rows the base report reads (one per unit: its newest
complete run): unit = task, seed, condition, passed = `scored_passed`, valid = completed and not
excluded, construct from the row when it carries one, else from the unit's RunStarted event. Cells are deduplicated (`dedup_cells`, newest `source_seq` wins) before
pairing.

The baseline is `--baseline`, else the study file's, else `B0`, else `no_memory` (imported packs);
with two or more conditions and none of these the section refuses (`membench.reports.study.BaselineError`)
instead of guessing.

Top level:
- `comparisons`: {"baseline", "family_size", "alpha", "test", "comparisons": [...]}; the family
  registers every non-baseline condition vs the baseline in report order, and each entry has
  exactly the fields `membench stats compare` prints (`a`, `b`, `D`, `discordant_a`,
  `discordant_b`, `units`, `paired_cells`, `p_clustered`, `p_mcnemar`, `p_majority`, `p_per_seed`,
  `p_holm`); `membench stats compare --pair A:B ...` over the same cells prints the same numbers.
- `resources`: {"baseline", "runs", "cost", "conditions": {condition: {"runs", "successes",
  "mean": {metric: per-run mean}, "total": {metric: sum}, "cost_per_success": {"total_cost",
  "successes", "runs", "value"}, "reduction_vs_baseline": {metric: (baseline − this) / baseline}
  or null for the baseline}}}. Runs are the condition's valid runs; metrics are input, cached
  input, output, reasoning and total (input + output) tokens, tool and patch invocations,
  compactions and wall time of the run in seconds (`wall_time_s`; the run rows carry no
  simulated-user or evaluation time, so pure agent time is not available here). Cost is total
  tokens, and cost per success = total tokens of all valid runs / passed runs (null without a pass).
- `families`: {"baseline", "baseline_source", "study", "families": [...]}: every registered family
  (the study's, or the default primary family: every other condition vs the baseline) with, per
  comparison, the effect size (paired pass-rate difference with its trap-cluster bootstrap CI),
  the design's power (exact sign test over its paired traps) with the minimum detectable
  difference at 80 % power (when every paired trap differs, and for the traps that did differ) and, for each registered test
  (clustered, mcnemar, majority, per_seed), raw p, Holm-adjusted p within the family and
  rejection, and `primary`: the primary test's (`primary_test`, the exact trap-clustered
  sign-flip) raw and Holm p and verdict, present whether or not the family registers that test,
  so a renderer never shows a secondary test's rejection without the primary verdict beside it.
  The `comparisons` key stays the default family's clustered view, unchanged. After the study's
  (or default) families comes membench's secondary family `all_pairs`: every pair of the run set's
  conditions in conventions order, Holm over them alone (never mixed into the primary), left out
  when the primary family already asks every pair; each entry carries its own `paired_coverage`
  gate (the 90 % rule of the validity gates, for its own pair).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from membench.analytics.cells import Cell, dedup_cells, pair_cells
from membench.analytics.compare import FamilyResult, compare_family
from membench.analytics.effects import design_power, minimum_detectable_difference, paired_difference_ci
from membench.analytics.export import family_json
from membench.analytics.gates import paired_units_gate
from membench.analytics.resources import ResourceUsage, cost_per_success, resource_reductions, resource_totals
from membench.reports.conventions import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, condition_order, exclusion_of, valid_run
from membench.reports.hygiene import PAIRED_COVERAGE
from membench.reports.model import (
    BootstrapSettings,
    ComparisonEntry,
    ComparisonFamilies,
    ComparisonFamily,
    DesignPower,
    DetectableDifference,
    EffectSize,
    FamilyComparison,
    HolmTest,
    RegisteredFamily,
    ConditionResources,
    CostPerSuccess,
    Resources,
    from_json,
)
from membench.reports.study import (ALL_PAIRS, BASELINES, DEFAULT_STUDY, SECONDARY, FamilySpec, Study, families_for,
                           resolve_baseline)
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow

ALPHA = 0.05
# the test whose verdict decides a comparison (DreamBench-SWE's exact trap-clustered sign-flip over
# traps); McNemar, the majority collapse and per-seed tests are secondary views (the design registers
# the primary)
PRIMARY_TEST = "clustered"
RESOURCE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "total_tokens",
                   "tool_invocations", "patch_invocations", "compactions", "wall_time_s")


def baseline_of(conditions: list[str], requested: str | None = None, study: Study = DEFAULT_STUDY) -> str | None:
    """`requested`, else the study's baseline, else B0, else no_memory; BaselineError when two or more
    conditions leave the choice open (membench.reports.study.resolve_baseline)."""
    return resolve_baseline(conditions, requested, study)


def baseline_source(conditions: list[str], requested: str | None, study: Study) -> str:
    if requested is not None:
        return "--baseline"
    if study.baseline is not None:
        return f"study file {study.source}"
    present = [name for name in BASELINES if name in conditions]
    return f"{present[0]} in the run set" if present else "single condition"


@dataclass(frozen=True)
class ComparisonsSection:
    comparisons: ComparisonFamily
    resources: Resources
    families: ComparisonFamilies


def _constructs(reads: ReadModel, run_set: str, runs: list[RunSummaryRow]) -> dict[str, str | None]:
    """run_id -> construct, from the runs' RunStarted events (a run_results row carries none)."""
    constructs = reads.run_constructs(run_set)
    return {r.run_id: constructs.get(r.run_id) for r in runs}


def cells_from_rows(runs: list[RunSummaryRow], constructs: dict[str, str | None] | None = None) -> list[Cell]:
    """One cell per run_results row, deduplicated (newest source_seq per (condition, seed, unit))."""
    constructs = constructs or {}
    cells = []
    for r in runs:
        cells.append(Cell(
            unit=r.task, seed=r.seed, condition=r.condition, passed=bool(r.scored_passed),
            valid=valid_run(r), construct=constructs.get(r.run_id),
            order=r.source_seq, exclusion=exclusion_of(r)))
    return dedup_cells(cells)


def comparisons_from_cells(cells: list[Cell], conditions: list[str] | None = None,
                           baseline: str | None = None) -> ComparisonFamily:
    """The `comparisons` key: every non-baseline condition vs the baseline, one Holm family."""
    conditions = conditions or sorted({c.condition for c in cells}, key=condition_order)
    baseline = baseline or baseline_of(conditions)
    pairs = [(c, baseline) for c in conditions if c != baseline] if baseline is not None else []  # None: no conditions
    family = compare_family(cells, pairs, alpha=ALPHA)
    family_out = family_json(family)
    return ComparisonFamily(baseline=baseline, alpha=ALPHA,
                            test="exact trap-clustered sign-flip; p_holm = Holm over the family's p_clustered",
                            comparisons=[from_json(ComparisonEntry, entry, "comparisons") for entry in family_out["comparisons"]],
                            family_size=family_out["family_size"])


def usage_from_row(row: RunSummaryRow) -> ResourceUsage:
    return ResourceUsage(
        input_tokens=row.input_tokens, cached_input_tokens=row.cached_tokens,
        output_tokens=row.output_tokens, reasoning_tokens=row.reasoning_tokens,
        wall_time_s=row.duration_ms / 1000, tool_invocations=row.tool_calls,
        patch_invocations=row.patch_invocations, compactions=row.compactions,
        success=bool(row.scored_passed))


def resources_from_rows(runs: list[RunSummaryRow], conditions: list[str] | None = None,
                        baseline: str | None = None) -> Resources:
    """The `resources` key: per-condition means over valid runs, cost per success, reductions."""
    conditions = conditions or sorted({r.condition for r in runs}, key=condition_order)
    baseline = baseline or baseline_of(conditions)
    usage = {c: [usage_from_row(r) for r in runs if r.condition == c and valid_run(r)] for c in conditions}
    out: dict[str, ConditionResources] = {}
    for condition in conditions:
        mine = usage[condition]
        totals = resource_totals(mine)
        cps = cost_per_success([replace(u, cost_usd=float(u.total_tokens)) for u in mine])
        reduction = None
        if baseline is not None and condition != baseline:
            reductions = resource_reductions(usage[baseline], mine, baseline=baseline, candidate=condition)
            reduction = {m: reductions.metrics[m].reduction for m in RESOURCE_FIELDS}
        out[condition] = ConditionResources(
            runs=len(mine), successes=cps.successes,
            mean={m: totals[m] / len(mine) if mine else None for m in RESOURCE_FIELDS},
            total={m: totals[m] for m in RESOURCE_FIELDS},
            cost_per_success=CostPerSuccess(total_cost=cps.total_cost, successes=cps.successes, runs=cps.runs,
                                            value=cps.value),
            reduction_vs_baseline=reduction)
    return Resources(baseline=baseline, runs="valid runs (completed, not excluded); means are per run",
                     cost="total tokens (input + output); cost per success = total cost / passed runs",
                     conditions=out)


def families_from_cells(cells: list[Cell], conditions: list[str], baseline: str | None, study: Study = DEFAULT_STUDY,
                        source: str = "") -> ComparisonFamilies:
    """The `families` key: each registered family, Holm within it for each of its tests."""
    out = []
    present = set(conditions)
    min_units = math.ceil(PAIRED_COVERAGE * len({c.unit for c in cells}))
    specs = families_for(study, conditions, baseline)
    pairs = all_pairs(conditions, specs)
    if pairs:
        specs = (*specs, FamilySpec(name=ALL_PAIRS, role=SECONDARY, comparisons=pairs, tests=(PRIMARY_TEST,)))
    for spec in specs:
        available = [p for p in spec.comparisons if p[0] in present and p[1] in present]
        unavailable = [p for p in spec.comparisons if p not in available]
        result = compare_family(cells, available, unavailable=unavailable, alpha=study.alpha)
        out.append(RegisteredFamily(name=spec.name, role=spec.role, alpha=study.alpha, tests=list(spec.tests),
                                    family_size=result.family_size,
                                    comparisons=[_family_entry(cells, result, i, spec.tests, min_units)
                                                 for i in range(result.family_size)]))
    return ComparisonFamilies(baseline=baseline, baseline_source=source or baseline_source(conditions, None, study),
                              study=study.source, families=out, primary_test=PRIMARY_TEST)


def all_pairs(conditions: list[str], registered: tuple[FamilySpec, ...]) -> tuple[tuple[str, str], ...]:
    """Every pair of the run set's conditions in conventions order, the later one as A (as "X vs B0"),
    when the primary family leaves a pair unasked (with two conditions it asks the only one): the
    secondary `all_pairs` family, Holm over all of them, apart from the primary's."""
    ordered = sorted(conditions, key=condition_order)
    pairs = tuple((ordered[j], ordered[i]) for i in range(len(ordered)) for j in range(i + 1, len(ordered)))
    primary = {frozenset(p) for spec in registered if spec.role == "primary" for p in spec.comparisons}
    return pairs if any(frozenset(p) not in primary for p in pairs) else ()


def _family_entry(cells: list[Cell], result: FamilyResult, i: int, tests: tuple[str, ...],
                  min_units: int = 0) -> FamilyComparison:
    slot = result.slots[i]
    assert slot is not None, "an unavailable slot has no entry of its own"
    a, b = slot
    comp = result.comparisons[i]
    holms = {"clustered": result.holm_clustered, "mcnemar": result.holm_mcnemar, "majority": result.holm_majority}

    def held(h, p) -> HolmTest:
        return HolmTest(p=p, p_holm=h.adjusted[i], rejected=h.rejected[i])

    chosen = {t: holms[t] for t in tests if t in holms}
    if comp is None:  # an unavailable slot: raw p = 1, as the paper writes it (Appendix E.3), adjusted p = 1
        per_seed = ({str(s): HolmTest(p=1.0, p_holm=h.adjusted[i], rejected=h.rejected[i])
                     for s, h in result.holm_per_seed.items()} if "per_seed" in tests else None)
        return FamilyComparison(a=a, b=b, available=False, D=None, units=None, paired_cells=None, effect=None,
                                power=None, tests={t: held(h, 1.0) for t, h in chosen.items()}, per_seed=per_seed,
                                primary=held(result.holm_clustered, 1.0))
    raw = {"clustered": comp.clustered.p_value, "mcnemar": comp.mcnemar.p_value,
           "majority": comp.majority.mcnemar.p_value}
    per_seed = None
    if "per_seed" in tests:
        per_seed = {str(s): held(h, comp.per_seed[s].p_value if s in comp.per_seed else None)
                    for s, h in result.holm_per_seed.items()}
    paired = pair_cells(cells, a, b)
    effect = paired_difference_ci({u: list(seeds.values()) for u, seeds in paired.pairs.items()},
                                  resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    power = design_power(comp.units, alpha=result.holm_clustered.alpha)
    seeds = max((len(s) for s in paired.pairs.values()), default=0)
    detectable = [minimum_detectable_difference(comp.units, max(seeds, 1), m, alpha=power.alpha)
                  for m in (comp.units, comp.clustered.nonzero_units)]
    return FamilyComparison(
        a=a, b=b, available=True, D=comp.statistic, units=comp.units, paired_cells=comp.paired_cells,
        effect=EffectSize(difference=effect.difference, ci95=[effect.low, effect.high], paired_cells=effect.paired_cells,
                          discordant_a=comp.discordant_a, discordant_b=comp.discordant_b,
                          bootstrap=BootstrapSettings(resamples=effect.resamples, seed=effect.seed, level=effect.level)),
        power=DesignPower(units=power.units, alpha=power.alpha, threshold=power.threshold,
                          p_at_threshold=power.p_at_threshold, by_q=power.by_q,
                          detectable=[DetectableDifference(power=d.power, traps=d.traps, differing=d.differing,
                                                           seeds=seeds, q=d.q,
                                                           one_discordant_seed=d.one_discordant_seed,
                                                           all_seeds_alike=d.all_seeds_alike)
                                      for d in detectable]),
        tests={t: held(h, raw[t]) for t, h in chosen.items()}, per_seed=per_seed,
        primary=held(result.holm_clustered, raw[PRIMARY_TEST]),
        paired_coverage=paired_units_gate(paired, min_units=min_units, min_paired_seeds=2))


def comparisons_section(reads: ReadModel, run_set: str, runs: list[RunSummaryRow],
                        baseline: str | None = None, study: Study = DEFAULT_STUDY) -> ComparisonsSection:
    """Raises membench.reports.study.BaselineError when the baseline is ambiguous or not in the run set."""
    conditions = sorted({r.condition for r in runs}, key=condition_order)
    chosen = baseline_of(conditions, baseline, study)
    cells = cells_from_rows(runs, _constructs(reads, run_set, runs))
    return ComparisonsSection(comparisons=comparisons_from_cells(cells, conditions, chosen),
                              resources=resources_from_rows(runs, conditions, chosen),
                              families=families_from_cells(cells, conditions, chosen, study,
                                                           baseline_source(conditions, baseline, study)))
