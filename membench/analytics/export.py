"""JSON form of a registered comparison family: the one shape `membench stats compare` prints and
`report.json`'s `comparisons` carries, so the two can be diffed.

Each entry: `a`, `b`, `D` (Σ d_t = discordant_a − discordant_b), `discordant_a`, `discordant_b`,
`units` (units with ≥ 1 paired valid seed), `paired_cells`, `p_clustered` (exact trap-clustered
sign-flip), `p_mcnemar` (pooled exact McNemar), `p_majority` (unit-majority collapse), `p_per_seed`
{seed: p}, `p_holm` (Holm-adjusted `p_clustered` over the whole family, unavailable slots at p = 1),
`clustered_method` ("exact", or "monte_carlo" beyond the exact test's bound, then with
`clustered_monte_carlo`: draws, seed, extreme draws, the p-value's Clopper–Pearson 95% interval,
the work and the bound).
"""

from __future__ import annotations

from typing import Any

from .compare import Comparison, FamilyResult
from .exact import EXACT_MAX_WORK, SignFlipResult


def clustered_method_json(result: SignFlipResult) -> dict[str, Any]:
    """How p_clustered was computed: `clustered_method` "exact", or "monte_carlo" when the exact
    programme's work k · S exceeded the bound, with the draws, the seed, the Clopper–Pearson 95%
    interval of the exact p, and the work against the bound (membench/analytics/exact.py)."""
    out: dict[str, Any] = {"clustered_method": result.method}
    if result.method != "exact":
        out["clustered_monte_carlo"] = {"draws": result.draws, "seed": result.seed,
                                        "extreme_draws": result.extreme, "p_ci95": list(result.ci95 or ()),
                                        "work": result.work, "exact_max_work": EXACT_MAX_WORK}
    return out


def comparison_json(comp: Comparison, p_holm: float) -> dict[str, Any]:
    return {
        "a": comp.a,
        "b": comp.b,
        "D": comp.statistic,
        "discordant_a": comp.discordant_a,
        "discordant_b": comp.discordant_b,
        "units": comp.units,
        "paired_cells": comp.paired_cells,
        "p_clustered": comp.clustered.p_value,
        "p_mcnemar": comp.mcnemar.p_value,
        "p_majority": comp.majority.mcnemar.p_value,
        "p_per_seed": {str(seed): r.p_value for seed, r in comp.per_seed.items()},
        "p_holm": p_holm,
        **clustered_method_json(comp.clustered),
    }


def family_json(family: FamilyResult) -> dict[str, Any]:
    """{"comparisons": [entry per evaluated comparison, in registration order], "family_size": n}."""
    out = [comparison_json(comp, family.holm_clustered.adjusted[i])
           for i, comp in enumerate(family.comparisons) if comp is not None]
    return {"comparisons": out, "family_size": family.family_size}


__all__ = ["clustered_method_json", "comparison_json", "family_json"]
