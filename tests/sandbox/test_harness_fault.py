"""A harness that produced no outcome is a suspicion the scoring names, never a pass (real bubblewrap),
on both oracle runners (`fast`, `pytest`).

- The oracle's interpreter cannot import pytest (site-packages hidden in the sandbox's own mount
  table, and the fast runner's stand-in missing from its harness mount, not by any file of the
  tree): `fail`, with `harness_fault` naming the cause; the same tree in the intact sandbox passes
  (control).
- What production code can do against the harness — exit the process at import or mid-test, raise
  at import, ship configuration that would make pytest collect nothing — leaves an outcome record:
  an ordinary `fail`, no suspicion at all (so no probe, and never an exclusion).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import write_files, write_tree
from tests.sandbox.broken_toolchain import PytestlessToolchain, says_pytest_is_missing

pytestmark = pytest.mark.integration

ORACLE = '''from ledger.money import parse_amount


def test_parse_amount():
    assert parse_amount("12.34") == 1234


def test_parse_whole():
    assert parse_amount("7") == 700
'''
GOOD = b"def parse_amount(text):\n    a, _, b = text.partition('.')\n    return int(a) * 100 + int((b + '00')[:2])\n"


@pytest.fixture
def repo(tmp_path: Path):
    base = {"ledger/__init__.py": b"", "ledger/money.py": b"def add(*a):\n    return sum(a)\n"}
    oracle = tmp_path / "hidden" / "s1_parse_amount.py"
    oracle.parent.mkdir()
    oracle.write_text(ORACLE)
    workspace = tmp_path / "workspace"
    write_tree(base, workspace)
    return base, workspace, oracle


@pytest.mark.parametrize("runner", ["fast", "pytest"])
def test_an_oracle_interpreter_without_pytest_is_a_harness_fault_not_a_pass(bwrap_sandbox, repo, runner):
    base, workspace, oracle = repo
    write_files({"ledger/money.py": GOOD}, workspace)
    result = score_session(PytestlessToolchain(bwrap_sandbox), base, workspace, oracle, timeout_s=60, runner=runner)
    assert result.outcome == "fail" and result.cases == []  # never a pass; the runner decides the rest
    assert result.runner == runner
    assert "left no outcome record" in result.harness_fault
    assert says_pytest_is_missing(result.harness_fault), result.harness_fault
    # control: the same tree, the intact installation
    intact = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60, runner=runner)
    assert intact.outcome == "pass" and intact.harness_fault == "", intact.detail


HOSTILE = {
    # production code ends its process as the oracle imports it
    "exits_at_import": {"ledger/money.py": b"import os\nos._exit(0)\n"},
    "raises_at_import": {"ledger/money.py": b"raise ImportError('no parse_amount here')\n"},
    "exits_during_the_test": {"ledger/money.py": b"import os\n\ndef parse_amount(text):\n    os._exit(0)\n"},
    "exits_with_systemexit_at_import": {"ledger/money.py": b"raise SystemExit(5)\n"},
    # configuration pytest would read to collect nothing, were it read from the tree
    "configures_pytest_to_collect_nothing": {
        "ledger/money.py": b"def parse_amount(text):\n    return 0\n",
        "pyproject.toml": b"[tool.pytest.ini_options]\naddopts = \"-k nothing_matches --co\"\n",
        "pytest.ini": b"[pytest]\naddopts = -k nothing_matches\n",
        "conftest.py": b"collect_ignore_glob = ['*']\n",
        "setup.cfg": b"[tool:pytest]\naddopts = -k nothing_matches\n"},
}


@pytest.mark.parametrize("runner", ["fast", "pytest"])
@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_production_code_that_attacks_the_harness_fails_without_a_harness_fault(bwrap_sandbox, repo, attack, runner):
    base, workspace, oracle = repo
    write_files(HOSTILE[attack], workspace)
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60, runner=runner)
    assert result.outcome == "fail", result.detail
    assert result.harness_fault == "", result.detail  # the oracle's process recorded what happened
