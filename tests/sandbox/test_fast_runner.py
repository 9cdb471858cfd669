"""The fast oracle runner scores as pytest does (real bubblewrap, both runners on the same trees).

An oracle that uses every pytest facility the fast runner offers (`harness/pytest_standin.py`:
parametrisation with its ids, `pytest.param`, skip marks, `raises` in both forms, `approx`, the
oracle's own fixtures of each scope with `yield`, `tmp_path`, `monkeypatch`, `capsys`, a `Test`
class, `pytest.fail`) is scored on a correct and on a wrong tree by both runners: the outcome and
every case's id and outcome are the same. An oracle that uses something else is scored by pytest,
and the verdict's detail says why. What production code can do against the fast runner (raise
pytest's skip, patch the runner's module where it runs) fails the session, as on pytest.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import write_tree

pytestmark = pytest.mark.integration

BASE = {"calc/__init__.py": b"", "calc/ops.py": b"def add(a, b):\n    return a + b\n"}
GOOD = b'''import os


def add(a, b):
    return a + b


def ratio(a, b):
    if b == 0:
        raise ZeroDivisionError("b is zero")
    return a / b


def env_name():
    return "unused"


def greet(name):
    print("hello", name)
    return "hi " + name
'''
WRONG = GOOD.replace(b"return a + b", b"return a - b").replace(b'raise ZeroDivisionError("b is zero")',
                                                                b"return 0")
ORACLE = '''import os

import pytest
from calc.ops import add, greet, ratio

LOG = []


@pytest.fixture(scope="module")
def table():
    LOG.append("module setup")
    yield {"one": 1, "two": 2}
    LOG.append("module teardown")


@pytest.fixture
def two(table):
    return table["two"]


@pytest.mark.parametrize("a, b, total", [(1, 2, 3), (2, 2, 4), pytest.param(-1, 1, 0, id="opposites"),
                                         ("x", "y", "xy"), (0.1, 0.2, 0.30000000000000004)])
def test_add(a, b, total):
    assert add(a, b) == total


@pytest.mark.parametrize("b", [2, 4], ids=["half", "quarter"])
@pytest.mark.parametrize("a", [1, 1])
def test_ratio(a, b, two):
    assert ratio(a * two, b * two) == pytest.approx(a / b)


def test_ratio_by_zero():
    with pytest.raises(ZeroDivisionError, match="is zero") as caught:
        ratio(1, 0)
    assert caught.type is ZeroDivisionError
    pytest.raises(ZeroDivisionError, ratio, 2, 0)


def test_files_and_env(tmp_path, monkeypatch):
    (tmp_path / "f.txt").write_text("x")
    monkeypatch.setenv("MEMBENCH_TEST_VALUE", "1")
    assert os.environ["MEMBENCH_TEST_VALUE"] == "1" and (tmp_path / "f.txt").read_text() == "x"
    assert add(two_of(), 0) == 2


def two_of():
    return 2


def test_output(capsys):
    print("from the oracle")
    assert capsys.readouterr().out == "from the oracle\\n"
    assert greet("ann") == "hi ann"


@pytest.mark.skip(reason="not today")
def test_skipped():
    pytest.fail("never runs")


@pytest.mark.skipif(1 + 1 == 3, reason="arithmetic holds")
def test_not_skipped():
    assert add(1, 1) == 2


class TestFloats:
    def test_approx_list(self):
        assert [add(0.1, 0.2), 1.0] == pytest.approx([0.3, 1.0])

    def test_fail(self):
        if add(1, 1) != 2:
            pytest.fail("add is wrong")
'''


def _score(sandbox, tmp_path: Path, production: bytes, runner: str, oracle_text: str = ORACLE):
    oracle = tmp_path / "hidden" / "s1_calc.py"
    oracle.parent.mkdir(parents=True, exist_ok=True)
    oracle.write_text(oracle_text)
    workspace = tmp_path / f"workspace-{runner}"
    write_tree({**BASE, "calc/ops.py": production}, workspace)
    return score_session(sandbox, BASE, workspace, oracle, timeout_s=60, runner=runner)


def _verdict(result):
    return result.outcome, result.exit_status, sorted((c["case_id"], c["outcome"]) for c in result.cases)


@pytest.mark.parametrize("production", [GOOD, WRONG], ids=["correct", "wrong"])
def test_both_runners_give_the_same_verdict_case_by_case(bwrap_sandbox, tmp_path, production):
    fast = _score(bwrap_sandbox, tmp_path, production, "fast")
    slow = _score(bwrap_sandbox, tmp_path, production, "pytest")
    assert fast.runner == "fast" and slow.runner == "pytest"
    assert _verdict(fast) == _verdict(slow), (fast.detail, slow.detail)
    ids = {case_id for case_id, _ in _verdict(fast)[2]}
    assert {"test_add[1-2-3]", "test_add[opposites]", "test_add[x-y-xy]", "test_ratio[1_0-half]",
            "test_ratio[1_1-quarter]", "test_skipped", "test_approx_list"} <= ids
    # a skipped test is never a pass: the session fails on both
    assert fast.outcome == "fail" and dict(_verdict(fast)[2])["test_skipped"] == "excluded"
    if production == WRONG:
        assert "assert -1 == 3" in fast.detail  # the failed comparison is shown, as pytest shows it


@pytest.mark.parametrize("runner", ["fast", "pytest"])
def test_a_collection_error_is_status_2_with_a_record_on_both_runners(bwrap_sandbox, tmp_path, runner):
    missing = _score(bwrap_sandbox, tmp_path, b"def add(a, b):\n    return b + a\n", runner)  # no greet, ratio
    assert missing.outcome == "fail" and missing.exit_status == 2 and missing.cases == []
    assert missing.harness_fault == "" and "ImportError" in missing.detail


def test_an_oracle_the_fast_runner_does_not_offer_is_scored_by_pytest(bwrap_sandbox, tmp_path):
    oracle = ("import warnings\n\nimport pytest\nfrom calc.ops import add\n\n\ndef test_add():\n"
              "    with pytest.warns(UserWarning):\n        warnings.warn('x', UserWarning)\n"
              "    assert add(1, 2) == 3\n")
    result = _score(bwrap_sandbox, tmp_path, GOOD, "fast", oracle)
    assert result.outcome == "pass" and result.runner == "pytest", result.detail
    assert result.detail.startswith("[membench: scored with pytest; the fast oracle runner does not offer: "
                                    "line 8: uses pytest.warns]")


SKIP_FROM_PRODUCTION = b'''def add(a, b):
    import pytest
    pytest.skip("production says skip")


class Skipped(BaseException):
    pass


def ratio(a, b):
    raise Skipped("skipped by production")


def greet(name):
    import sys
    sys.path.insert(0, "/harness")
    from membench_harness import oracle_runner  # the runner's module, in the production process only
    oracle_runner.run_case = lambda *a, **k: {"case_id": "x", "outcome": "pass", "duration_ms": 0}
    oracle_runner.PASS = oracle_runner.FAIL = "pass"
    return "patched"
'''


def test_production_code_cannot_skip_or_rewrite_the_oracles_run(bwrap_sandbox, tmp_path):
    oracle = ("from calc.ops import add, greet, ratio\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
              "def test_ratio():\n    assert ratio(1, 2) == 0.5\n\n\n"
              "def test_greet():\n    assert greet('x') == 'hi x'\n")
    result = _score(bwrap_sandbox, tmp_path, SKIP_FROM_PRODUCTION, "fast", oracle)
    assert result.outcome == "fail", result.detail
    assert {c["case_id"]: c["outcome"] for c in result.cases} == {"test_add": "fail", "test_ratio": "fail",
                                                                  "test_greet": "fail"}


def test_control_a_skip_raised_in_the_oracles_own_process_would_exclude_the_case():
    """What the attack above aims at: pytest's skip, raised where the oracle runs, ends the case as
    `excluded` rather than `fail` — so its failure there is the process boundary's doing."""
    from membench.sandbox.harness import oracle_runner, pytest_standin

    def test_add():
        pytest_standin.skip("production says skip")

    case = oracle_runner.Case("test_add", test_add, None, {}, "test_add", None)
    record = oracle_runner.run_case(case, oracle_runner.Fixtures(type(pytest)("m")), [], "/oracle/test_oracle.py", [])
    assert record["outcome"] == "excluded"
