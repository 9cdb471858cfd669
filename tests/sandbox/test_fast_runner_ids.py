"""The fast runner's case ids and order are pytest's: the same oracle file collected by real pytest
(`--collect-only`, in a subprocess) and by `oracle_runner.collect` with the stand-in as `pytest`.
The ids are what the verdict records per case, so they must not depend on the runner."""

from __future__ import annotations

import subprocess
import sys
import types

from membench.sandbox.harness import oracle_runner, pytest_standin

ORACLE = '''import enum
import re

import pytest


class Color(enum.Enum):
    RED = 1


class Thing:
    pass


def helper():
    pass


@pytest.mark.parametrize("value", ["plain", "é ü", "tab\\there", "new\\nline", b"by\\xc3tes", 1.5, -3, None, True,
                                   2 + 1j, Color.RED, Thing, helper, Thing(), re.compile("a+b"), "x" * 101, "same",
                                   "same", "a1", "a1"])
def test_values(value):
    pass


@pytest.mark.parametrize("a, b", [(1, 2), pytest.param(3, 4, id="named"), (5, 6)], ids=["first", None, "third"])
def test_ids_list(a, b):
    pass


@pytest.mark.parametrize("n", [1, 2, 3], ids=lambda n: f"n{n * 10}" if n != 2 else None)
def test_ids_callable(n):
    pass


@pytest.mark.parametrize("outer", ["o1", "o2"])
@pytest.mark.parametrize("inner", [0, 1])
def test_stacked(outer, inner):
    pass


def test_plain():
    pass


class TestGroup:
    @pytest.mark.parametrize("k", ["x", "y"])
    def test_method(self, k):
        pass

    def test_other(self):
        pass


def test_last():
    pass
'''


def test_case_ids_and_order_are_pytests(tmp_path):
    oracle = tmp_path / "test_oracle.py"
    oracle.write_text(ORACLE, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly",
                           "-p", "no:cacheprovider", "-c", "/dev/null", "--rootdir", str(tmp_path), str(oracle)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    by_pytest = [line.rsplit("::", 1)[-1] for line in done.stdout.splitlines() if "::" in line]
    assert len(by_pytest) > 30, done.stdout + done.stderr

    saved = sys.modules.get("pytest")
    sys.modules["pytest"] = pytest_standin
    try:
        module = types.ModuleType("test_oracle")
        exec(compile(ORACLE, str(oracle), "exec"), vars(module))
    finally:
        sys.modules["pytest"] = saved
    by_fast = [case.case_id for case in oracle_runner.collect(module)]
    assert by_fast == by_pytest
