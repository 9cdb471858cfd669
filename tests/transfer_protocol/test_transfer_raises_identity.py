"""A `raises` case is matched by class identity, resolved by the case runner itself: a
built-in exception from its own builtins, a project exception as the submission module's real
class. A submission's own `class ValueError(Exception)`, or a class named like the project's
exception but defined elsewhere, raises something of the right *name* and must not pass.

In process, `run_case` over a plain module (no proxy), with a control: the name-only rule the
runner had before does accept both forgeries. Then through the real evaluator (the submission in a
production sandbox, the runner in another, the proxy between them) on both backends.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from membench.transfer_protocol.evaluator import RUNNER, freeze_submission, run_evaluator
from membench.sandbox.workspace import write_tree
from membench.formats.transfer_format import TransferFormatError, load_evaluator

# the project's exception, and two functions that raise what the cases expect
HONEST = '''class VaultError(Exception):
    pass


def parse(text):
    raise ValueError(f"not a number: {text!r}")


def withdraw(amount):
    raise VaultError("overdrawn")


def double(x):
    return 2 * x
'''

# right names, wrong classes: its own ValueError (not the built-in), and a VaultError of a
# submodule (unrelated to the module's real VaultError, which it still defines)
FORGED = '''import types

class VaultError(Exception):
    pass


class ValueError(Exception):  # shadows the built-in in this module only
    pass


_other = types.ModuleType("vault.other")
exec("class VaultError(Exception):\\n    pass\\n", _other.__dict__)


def parse(text):
    raise ValueError("forged")


def withdraw(amount):
    raise _other.VaultError("forged")


def double(x):
    return 2 * x
'''

CASES = {"module": "vault", "cases": {"C-01": {"call": "parse", "args": ["x"], "raises": "ValueError"},
                                      "C-02": {"call": "withdraw", "args": [5], "raises": "VaultError"},
                                      "C-03": {"call": "double", "args": [2], "expect": 4}}}
MANIFEST = {"taskId": "vault", "dimensions": {"A": {"title": "errors", "weight": 1}},
            "cases": [{"id": c, "dimension": "A", "weight": 1, "prerequisites": ["FINAL"]} for c in CASES["cases"]]}


@pytest.fixture(scope="module")
def runner():
    """The case runner as a module of this process (its harness import resolved to the repository's)."""
    import membench.sandbox.harness as harness
    from membench.sandbox.harness import oracle_client

    saved = {k: sys.modules.get(k) for k in ("membench_harness", "membench_harness.oracle_client")}
    sys.modules["membench_harness"], sys.modules["membench_harness.oracle_client"] = harness, oracle_client
    try:
        spec = importlib.util.spec_from_file_location("membench_test_evaluator_runner", RUNNER)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value
        if "/harness" in sys.path:
            sys.path.remove("/harness")
    return module


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("vault")
    exec(compile(source, "vault/__init__.py", "exec"), module.__dict__)
    return module


def test_the_real_classes_pass(runner):
    module = _module(HONEST)
    assert [runner.run_case(module, CASES["cases"][c])[0] for c in ("C-01", "C-02", "C-03")] == ["passed"] * 3


def test_a_class_with_the_expected_name_does_not_pass(runner):
    module = _module(FORGED)
    status, evidence = runner.run_case(module, CASES["cases"]["C-01"])
    assert status == "failed" and "another class of that name, vault.ValueError" in evidence, evidence
    status, evidence = runner.run_case(module, CASES["cases"]["C-02"])
    assert status == "failed" and "another class of that name, vault.other.VaultError" in evidence, evidence


def test_control_the_name_only_rule_accepts_both_forgeries():
    """The rule the runner had (`type(exc).__name__ == check["raises"]`): the attack works there."""
    module = _module(FORGED)
    for cid in ("C-01", "C-02"):
        check = CASES["cases"][cid]
        with pytest.raises(Exception) as caught:
            getattr(module, check["call"])(*check["args"])
        assert type(caught.value).__name__ == check["raises"]


def test_a_raises_name_the_module_lacks_or_that_is_no_exception_fails(runner):
    module = _module(HONEST + "\nNotAnError = 3\n")
    for name in ("MissingError", "NotAnError"):
        status, evidence = runner.run_case(module, {"call": "withdraw", "args": [1], "raises": name})
        assert status == "failed" and name in evidence, evidence


def test_the_cases_file_refuses_a_raises_that_is_no_class_name(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "manifest.v2.json").write_text(json.dumps(MANIFEST))
    for bad in (["ValueError"], "builtins.ValueError", ""):
        cases = {"module": "vault", "cases": {**CASES["cases"], "C-01": {"call": "parse", "raises": bad}}}
        (hidden / "cases.json").write_text(json.dumps(cases))
        with pytest.raises(TransferFormatError, match=r"cases\.C-01\.raises"):
            load_evaluator(hidden / "manifest.v2.json", hidden / "cases.json")


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")


def _evaluate(sandbox, tmp_path: Path, source: str) -> dict[str, str]:
    hidden = tmp_path / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "manifest.v2.json").write_text(json.dumps(MANIFEST))
    (hidden / "cases.json").write_text(json.dumps(CASES))
    write_tree({"vault/__init__.py": source.encode()}, tmp_path / "workspace")
    freeze_submission(tmp_path / "workspace", tmp_path / "frozen")
    results = run_evaluator(sandbox, tmp_path / "frozen", load_evaluator(hidden / "manifest.v2.json",
                                                                          hidden / "cases.json"), 60)
    return {r.case_id: r.status for r in results}


@pytest.mark.integration
def test_through_the_proxy_the_real_classes_pass_and_the_forgeries_fail(any_sandbox, tmp_path):
    assert _evaluate(any_sandbox, tmp_path / "honest", HONEST) == {"C-01": "passed", "C-02": "passed",
                                                                   "C-03": "passed"}
    assert _evaluate(any_sandbox, tmp_path / "forged", FORGED) == {"C-01": "failed", "C-02": "failed",
                                                                   "C-03": "passed"}
