"""The fast oracle runner and pytest give the same verdicts on the built-in packs (real bubblewrap).

A sample of each built-in pack's pytest-scored sessions (smoke, hygiene-v1, hygiene-v2 and the
transfer-v1 study's learning tasks), each under the null patch (its start tree) and its reference
solution, scored on both runners: the outcome, every case's outcome and the harness-fault
suspicion agree. The full sweep over every session is `membench.bench.scoring_cpu.compare_runners` over
`built_in_cases` (docs/benchmarks.md records it); this keeps CI to a few sessions per pack.
"""

from __future__ import annotations

import pytest

from membench.bench.scoring_cpu import built_in_cases, compare_runners

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return built_in_cases(tmp_path_factory.mktemp("home"))


@pytest.mark.parametrize("pack", ["smoke", "hygiene-v1", "hygiene-v2", "transfer-v1"])
def test_both_runners_score_the_packs_sessions_alike(bwrap_sandbox, cases, pack):
    sample = [cases[pack][0], cases[pack][-1]]  # a first session and a last (a scored one)
    rows = compare_runners(bwrap_sandbox, sample)
    assert [r["patch"] for r in rows] == ["null", "reference"] * 2
    assert all(r["same"] for r in rows), [r for r in rows if not r["same"]]
    # the comparison can tell: the reference passes and the null patch fails
    assert {r["patch"]: r["fast"]["outcome"] for r in rows[:2]} == {"null": "fail", "reference": "pass"}
