"""The scoring pre-flight in process (membench/runner/scoring_preflight.py), on real bubblewrap: the smoke
pack scores as authored; a trap whose reference solution is broken is found and named as the pack's
fault (the harness's self-test passes), with the unbroken pack as the control; which case stands for
each repository. Without pytest in the sandbox's interpreter: tests/integration/test_scoring_preflight.py."""

from __future__ import annotations

import json

import pytest

from membench.runner.scoring_preflight import (SELF_TEST, ScoringPreflightFailed, probe_cases, require_scoring,
                                         scoring_preflight)
from membench.formats.pack_format import load_pack
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration


@pytest.fixture
def currency(tmp_path):
    """The smoke pack cut to smoke-currency (no secret placeholders left in S1: loadable as it is)."""
    return smoke_cut_to(tmp_path / "smoke-currency")


def test_the_pack_scores_as_authored(currency, bwrap_sandbox):
    result = require_scoring(load_pack(currency), "bwrap")
    assert result.ok and result.probe.ok and result.probe.pytest and result.probe.backend_version
    assert [(c.repo, c.trap, c.reference, c.base) for c in result.checks] == [
        ("ledger", "smoke-currency", "pass", "fail")]
    assert result.reason == "ok: reference solutions pass and untouched bases fail in bwrap: ledger (smoke-currency)"


def test_a_broken_reference_solution_is_named_as_the_packs(currency, bwrap_sandbox):
    solution = currency / "hidden" / "smoke-currency" / "s1.solution.json"
    doc = json.loads(solution.read_text())
    doc["files"]["ledger/money.py"] = doc["files"]["ledger/money.py"].replace("* 100", "* 10")
    solution.write_text(json.dumps(doc))
    result = scoring_preflight(load_pack(currency), "bwrap")
    assert not result.ok
    assert [(c.reference, c.base) for c in result.checks] == [("fail", "fail")]
    assert result.reason.startswith("trap smoke-currency of repository ledger does not score as authored in bwrap")
    assert "self-test passes" in result.reason and "membench validate" in result.reason
    with pytest.raises(ScoringPreflightFailed, match="scoring pre-flight failed: trap smoke-currency"):
        require_scoring(load_pack(currency), "bwrap")


def test_a_repository_without_an_oracle_trap_is_covered_by_the_self_test(currency):
    manifest = json.loads((currency / "manifest.json").read_text())
    pack = load_pack(currency)
    assert [c.repo for c in probe_cases(pack)] == ["ledger"]
    # a session scored by commands (an imported pack's shape): no oracle to score the reference by
    manifest["sequences"][0]["sessions"][0]["scoring"] = {"commands": [["python3", "-c", "pass"]]}
    (currency / "manifest.json").write_text(json.dumps(manifest))
    assert [(c.repo, c.trap) for c in probe_cases(load_pack(currency, check_hidden=False))] == [(SELF_TEST, SELF_TEST)]
    assert [c.repo for c in probe_cases(None)] == [SELF_TEST]


@pytest.mark.parametrize("runner", ["pytest", "fast"])
def test_the_pack_scores_as_authored_on_either_oracle_runner(currency, bwrap_sandbox, monkeypatch, runner):
    monkeypatch.setenv("MEMBENCH_ORACLE_RUNNER", runner)
    result = scoring_preflight(load_pack(currency), "bwrap")
    assert result.ok, result.reason
    assert [(c.reference, c.base) for c in result.checks] == [("pass", "fail")]


def test_a_misspelt_oracle_runner_stops_the_command_before_anything_is_scored(currency, monkeypatch):
    monkeypatch.setenv("MEMBENCH_ORACLE_RUNNER", "pytset")
    result = scoring_preflight(load_pack(currency), "bwrap")
    assert not result.ok and result.checks == ()
    assert result.reason == "MEMBENCH_ORACLE_RUNNER must be one of fast, pytest, not 'pytset'"
    with pytest.raises(ScoringPreflightFailed, match="MEMBENCH_ORACLE_RUNNER must be one of"):
        require_scoring(load_pack(currency), "bwrap")
