"""Resource reductions pinned to EngramBench §6.2–6.4 (Tables 3, 4 and 5)."""

from __future__ import annotations

import pytest

from membench.analytics.resources import ResourceUsage, cost_per_success, relative_reduction, resource_reductions


def split(total: int | float, parts: int = 12) -> list:
    """Split a total over ``parts`` runs unevenly (integers stay integers)."""
    if isinstance(total, int):
        base, rest = divmod(total, parts)
        return [base + (1 if i < rest else 0) for i in range(parts)]
    return [total / parts] * parts


def runs_from_totals(parts: int = 12, **totals) -> list[ResourceUsage]:
    columns = {k: split(v, parts) for k, v in totals.items()}
    return [ResourceUsage(**{k: col[i] for k, col in columns.items()}) for i in range(parts)]


def test_table_3_average_per_run():
    # No Skills vs S-Full-20, averages per run: tokens, non-cached input, turns, coding time.
    # Modelled as single-run averages; the coding time is pure agent time (wall minus off-cycle).
    no_skills = ResourceUsage(input_tokens=49_000_000, output_tokens=1_025_849,
                              cached_input_tokens=49_000_000 - 3_211_135, turns=27,
                              wall_time_s=189.00 * 60 + 900, simulated_user_time_s=600, evaluation_time_s=300)
    s_full = [
        ResourceUsage(input_tokens=39_500_000, output_tokens=692_203,
                      cached_input_tokens=39_500_000 - 612_849, turns=turns,
                      wall_time_s=84.46 * 60 + 420, simulated_user_time_s=300, evaluation_time_s=100, paused_time_s=20)
        for turns in (26, 27)  # 26.50 turns on average
    ]
    result = resource_reductions([no_skills], s_full, baseline="No Skills", candidate="S-Full-20")
    red = {m: r.reduction for m, r in result.metrics.items()}
    assert no_skills.total_tokens == 50_025_849 and s_full[0].total_tokens == 40_192_203
    assert round(100 * red["total_tokens"], 2) == 19.66
    assert round(100 * red["non_cached_input_tokens"], 2) == 80.91
    assert round(100 * red["turns"], 2) == 1.85
    assert no_skills.pure_agent_time_s == pytest.approx(189.00 * 60)
    assert s_full[0].pure_agent_time_s == pytest.approx(84.46 * 60)
    assert round(100 * red["pure_agent_time_s"], 1) == 55.3
    assert result.metrics["pure_agent_time_s"].baseline_mean - result.metrics["pure_agent_time_s"].candidate_mean \
        == pytest.approx(104.54 * 60)  # "saving over 104 minutes per run"
    assert (result.baseline, result.candidate, result.baseline_runs, result.candidate_runs) == \
        ("No Skills", "S-Full-20", 1, 2)


# Table 5: totals across 12 runs per configuration.
TABLE_5 = {
    "No Skills": dict(tool_invocations=6484, tool_output_chars=13_660_000, patch_invocations=865,
                      added_patch_lines=40_393, reasoning_tokens=441_803, compactions=21),
    "S-Full-20": dict(tool_invocations=4850, tool_output_chars=6_060_000, patch_invocations=607,
                      added_patch_lines=38_914, reasoning_tokens=302_016, compactions=11),
    "S-Ablated-20": dict(tool_invocations=5979, tool_output_chars=10_110_000, patch_invocations=751,
                         added_patch_lines=41_500, reasoning_tokens=360_958, compactions=16),
    "Coreless-3": dict(tool_invocations=8195, tool_output_chars=14_760_000, patch_invocations=988,
                       added_patch_lines=46_059, reasoning_tokens=699_961, compactions=26),
}


def test_table_5_behavioural_audit():
    runs = {name: runs_from_totals(**totals) for name, totals in TABLE_5.items()}
    full = resource_reductions(runs["No Skills"], runs["S-Full-20"], baseline="No Skills", candidate="S-Full-20")
    assert full.metrics["patch_invocations"].baseline_total == 865
    assert round(100 * full.metrics["patch_invocations"].reduction, 1) == 29.8  # "29.8% less often"
    assert round(100 * full.metrics["added_patch_lines"].reduction, 2) == 3.66  # "only decreased by 3.66%"
    per_patch = full.added_lines_per_patch
    assert (round(per_patch[0]), round(per_patch[1])) == (47, 64)  # "from an average of 47 to 64 lines"
    coreless = resource_reductions(runs["S-Full-20"], runs["Coreless-3"], baseline="S-Full-20", candidate="Coreless-3")
    # increases are negative reductions: "+68.97%" tool invocations, "+131.76%" reasoning tokens
    assert round(100 * coreless.metrics["tool_invocations"].reduction, 2) == -68.97
    assert round(100 * coreless.metrics["reasoning_tokens"].reduction, 2) == -131.76
    assert coreless.metrics["compactions"].candidate_total == 26


def test_table_4_ablated_time_penalty_and_helpers():
    # S-Ablated-20 takes 91.74 min vs S-Full-20 84.46 min: "+8.6% coding time"
    assert round(-100 * relative_reduction(84.46, 91.74), 1) == 8.6
    assert relative_reduction(0, 5) is None
    empty = resource_reductions([], [ResourceUsage(turns=3)])
    assert empty.metrics["turns"].baseline_mean is None and empty.metrics["turns"].reduction is None
    assert empty.added_lines_per_patch == (None, None)


def test_cost_per_success():
    runs = [ResourceUsage(cost_usd=0.5, success=True), ResourceUsage(cost_usd=0.25),
            ResourceUsage(cost_usd=0.75, success=True)]
    cps = cost_per_success(runs)
    assert (cps.total_cost, cps.successes, cps.runs, cps.value) == (1.5, 2, 3, 0.75)
    assert cost_per_success([ResourceUsage(cost_usd=1.0)]).value is None


def test_per_cell_and_per_pass_spread_the_total_and_are_undefined_at_zero():
    from membench.analytics.resources import per_cell_and_pass

    got = per_cell_and_pass(12.0, cells=4, passes=3)
    assert (got.total, got.per_cell, got.per_pass) == (12.0, 3.0, 4.0)
    # per pass charges the failed cells' spend to the passes: higher than per cell whenever a cell failed
    assert got.per_pass > got.per_cell
    no_pass = per_cell_and_pass(12.0, cells=4, passes=0)
    assert (no_pass.per_cell, no_pass.per_pass) == (3.0, None)  # undefined, never 0 or infinite
    nothing = per_cell_and_pass(0.0, cells=0, passes=0)
    assert (nothing.total, nothing.per_cell, nothing.per_pass) == (0.0, None, None)
