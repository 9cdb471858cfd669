"""Repeated-run reliability: pass^k, the share of traps passed under every one of k seeds.

Source: τ-bench's pass^k (the chance that all k trials of a task succeed), read here over the seeds
a run set actually ran rather than estimated from n > k trials: a trap counts as passed when every
one of the run set's k seeds passed it.

Definition (per condition):

    pass^k = #{traps t complete, and cell(t, s) passed for every seed s} / #{traps t complete}

where k = |seeds| (the run set's seeds) and a trap is *complete* when it has a valid (scored, not
excluded) cell under every one of the k seeds. A trap with a missing or excluded seed is left out of
numerator and denominator alike and counted as `incomplete`: an unobserved seed is neither a pass
(that would credit reliability never measured) nor a fail (an excluded cell is never imputed, as in
the pass rate). pass^k is undefined (None) when no trap is complete. With k = 1 it equals the pass
rate over the complete traps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PassHatK:
    k: int  # seeds every trap must pass under
    traps: int  # traps with at least one cell
    complete: int  # traps with a valid cell under every seed: the denominator
    passed: int  # complete traps passed under every seed: the numerator
    incomplete: int  # traps with a missing or excluded seed (left out)
    value: float | None  # passed / complete; None when no trap is complete


def pass_hat_k(cells: Iterable[tuple[str, str, bool | None]], seeds: Sequence[str]) -> PassHatK:
    """pass^k over CELLS, (trap, seed, outcome) with outcome True (passed), False (failed) or None
    (not valid: excluded, abandoned); SEEDS are the k seeds a complete trap has a valid cell under.
    A cell whose seed is not in SEEDS is ignored; a repeated (trap, seed) keeps its last outcome."""
    wanted = set(seeds)
    by_trap: dict[str, dict[str, bool | None]] = {}
    for trap, seed, outcome in cells:
        if seed in wanted:
            by_trap.setdefault(trap, {})[seed] = outcome
    complete = passed = 0
    for outcomes in by_trap.values():
        if len(outcomes) == len(wanted) and all(o is not None for o in outcomes.values()):
            complete += 1
            passed += all(outcomes.values())
    return PassHatK(k=len(wanted), traps=len(by_trap), complete=complete, passed=passed,
                    incomplete=len(by_trap) - complete, value=passed / complete if complete else None)


__all__ = ["PassHatK", "pass_hat_k"]
