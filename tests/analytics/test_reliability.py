"""pass^k: the share of complete traps passed under every seed, and what a missing or excluded seed
does to it."""

from __future__ import annotations

from membench.analytics.reliability import pass_hat_k

SEEDS = ["1", "2", "3"]


def cells(table: dict[str, list[bool | None]]) -> list[tuple[str, str, bool | None]]:
    """trap -> outcomes under SEEDS in order (None: not valid)."""
    return [(trap, seed, outcome) for trap, outcomes in table.items() for seed, outcome in zip(SEEDS, outcomes)]


def test_a_trap_counts_only_when_every_seed_passed():
    got = pass_hat_k(cells({"t1": [True, True, True], "t2": [True, False, True], "t3": [False, False, False],
                            "t4": [True, True, True]}), SEEDS)
    assert (got.k, got.traps, got.complete, got.passed, got.incomplete) == (3, 4, 4, 2, 0)
    assert got.value == 0.5
    # the pass rate over the same cells is 8/12: pass^k is the stricter, repeated-run figure
    assert got.value < 8 / 12


def test_missing_and_excluded_seeds_leave_the_trap_out_of_both_counts():
    table = {"t1": [True, True, True], "t2": [True, None, True], "t3": [True, True], "t4": [False, True, True]}
    got = pass_hat_k(cells(table), SEEDS)  # t2 excluded under seed 2, t3 never ran seed 3
    assert (got.traps, got.complete, got.passed, got.incomplete) == (4, 2, 1, 2)
    assert got.value == 0.5
    # control: counting t2 and t3 over their valid seeds only would credit reliability never
    # measured (3 of 4); treating them as failures would impute (1 of 4) — the definition does neither
    assert got.value not in (3 / 4, 1 / 4)


def test_no_complete_trap_is_undefined_not_zero():
    got = pass_hat_k(cells({"t1": [True, None, True], "t2": [None, None, None]}), SEEDS)
    assert (got.complete, got.incomplete, got.value) == (0, 2, None)
    assert pass_hat_k([], SEEDS).value is None


def test_k_of_one_is_the_pass_rate_and_foreign_seeds_are_ignored():
    got = pass_hat_k([("t1", "1", True), ("t2", "1", False), ("t3", "1", True), ("t1", "9", False)], ["1"])
    assert (got.k, got.complete, got.passed, got.value) == (1, 3, 2, 2 / 3)
