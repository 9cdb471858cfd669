"""Scoring: only the production diff reaches the oracle, in its own sandbox (real bubblewrap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.sandbox.scoring import expected_tests, score_session
from membench.sandbox.workspace import diff_trees, is_test_path, snapshot, write_tree

pytestmark = pytest.mark.integration

ORACLE = '''from ledger.money import parse_amount


def test_parse_amount():
    assert parse_amount("12.34") == 1234
'''
GOOD = b"def parse_amount(text):\n    a, _, b = text.partition('.')\n    return int(a) * 100 + int((b + '00')[:2])\n"
BAD = b"def parse_amount(text):\n    return 0\n"
CHEAT_CONFTEST = b'''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


@pytest.fixture
def repo(tmp_path: Path):
    base = {"ledger/__init__.py": b"", "ledger/money.py": b"def add(*a):\n    return sum(a)\n",
            "tests/test_money.py": b"def test_ok():\n    pass\n"}
    oracle = tmp_path / "hidden" / "s1_parse_amount.py"
    oracle.parent.mkdir()
    oracle.write_text(ORACLE)
    workspace = tmp_path / "workspace"
    write_tree(base, workspace)
    return base, workspace, oracle


def _edit(workspace: Path, files: dict[str, bytes]) -> None:
    for rel, content in files.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_bytes(content)


def test_correct_production_change_passes(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    _edit(workspace, {"ledger/money.py": GOOD})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60)
    assert result.outcome == "pass", result.detail
    assert [(c["case_id"], c["outcome"]) for c in result.cases] == [("test_parse_amount", "pass")]
    assert result.cases[0]["duration_ms"] >= 0 and result.isolation == "process"
    assert result.diff.production == ["ledger/money.py"] and result.diff.tests == []


def test_edits_to_tests_and_conftest_are_stripped_and_recorded(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    _edit(workspace, {"ledger/money.py": BAD, "conftest.py": CHEAT_CONFTEST, "ledger/conftest.py": CHEAT_CONFTEST,
                      "pytest.ini": b"[pytest]\naddopts = -p no:python\n", "tests/test_oracle.py": ORACLE.encode(),
                      "test_oracle.py": b"def test_x():\n    pass\n", "sitecustomize.py": b"import os\nos._exit(0)\n",
                      "ledger/evil.pth": b"import os; os._exit(0)\n"})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60)
    assert result.outcome == "fail"  # the cheats never reached the oracle's checkout
    assert sorted(result.diff.tests) == sorted(["conftest.py", "ledger/conftest.py", "pytest.ini",
                                                "tests/test_oracle.py", "test_oracle.py", "sitecustomize.py",
                                                "ledger/evil.pth"])
    assert result.diff.production == ["ledger/money.py"]
    assert "conftest.py" not in result.scored_tree and "tests/test_oracle.py" not in result.scored_tree


def test_only_test_edits_is_an_empty_production_diff(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    _edit(workspace, {"conftest.py": CHEAT_CONFTEST, "tests/test_s1_parse_amount.py": ORACLE.encode()})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60)
    assert result.outcome == "empty_production_diff"
    assert sorted(result.diff.tests) == ["conftest.py", "tests/test_s1_parse_amount.py"]


def test_edit_under_git_rejects_the_patch(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    _edit(workspace, {"ledger/money.py": GOOD, ".git/hooks/pre-commit": b"#!/bin/sh\n"})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60)
    assert result.outcome == "production_patch_apply_failed"
    assert result.diff.git == [".git/hooks/pre-commit"]
    assert result.scored_tree == base  # nothing of the patch is kept


def test_production_code_cannot_fake_a_pass(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    # exits 0 as soon as the oracle imports it, and shadows pytest from the workspace
    _edit(workspace, {"ledger/money.py": b"import os\nos._exit(0)\n",
                      "pytest.py": b"import sys\nsys.exit(0)\n", "_pytest/__init__.py": b"raise SystemExit(0)\n"})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=60)
    assert result.outcome == "fail", result.detail


def test_oracle_timeout(bwrap_sandbox, repo):
    base, workspace, oracle = repo
    _edit(workspace, {"ledger/money.py": b"import time\n\ndef parse_amount(text):\n    time.sleep(60)\n"})
    result = score_session(bwrap_sandbox, base, workspace, oracle, timeout_s=3)
    assert result.outcome == "oracle_timeout" and result.inconclusive


def test_classification_and_expected_tests(tmp_path):
    for rel in ("conftest.py", "a/conftest.py", "pytest.ini", "sitecustomize.py", "x.pth", "tests/util.py",
                "test_a.py", "a/b_test.py"):
        assert is_test_path(rel), rel
    for rel in ("ledger/money.py", "pyproject.toml", "README.md"):
        assert not is_test_path(rel), rel
    diff = diff_trees({"a.py": b"1", ".git/HEAD": b"x"}, {"a.py": b"2", ".git/HEAD": b"y", "tests/t.py": b""})
    assert diff.production == ["a.py"] and diff.git == [".git/HEAD"] and diff.tests == ["tests/t.py"]
    oracle = tmp_path / "o.py"
    oracle.write_text("def test_a():\n    pass\n\nclass TestB:\n    def test_c(self):\n        pass\n\n"
                      "def helper():\n    pass\n")
    assert expected_tests(oracle) == {"test_a", "test_c"}
    assert snapshot(tmp_path) == {"o.py": oracle.read_bytes()}


class _DeadServerSandbox:
    """A backend whose production server exits before it serves (e.g. a broken interpreter in an
    image): a unit isolates scoring from the real backends, which the isolation tests cover."""

    name = "dead"

    def run(self, argv, spec, stop=None):
        from membench.sandbox.base import SandboxResult

        return SandboxResult(1, "", "python3: cannot start", False, 1)


def test_a_production_sandbox_that_never_serves_is_isolation_unavailable_not_a_fail(repo):
    base, workspace, oracle = repo
    _edit(workspace, {"ledger/money.py": GOOD})
    result = score_session(_DeadServerSandbox(), base, workspace, oracle, timeout_s=5)
    assert result.outcome == "isolation_unavailable"
    assert "did not start serving" in result.detail and "cannot start" in result.detail
