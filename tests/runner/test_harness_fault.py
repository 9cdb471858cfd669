"""A harness that produced no outcome is never an agent's failure, and an agent cannot pass its own
failure off as one. Real runner, real smoke pack, real processors, scoring in real bubblewrap.

- The scoring sandbox's interpreter cannot import pytest (its site-packages hidden by the sandbox's
  mount table): the pack's base checkout faults the same way, so the unit is excluded
  `harness_fault` with the cause in a harness Turn — no session is a `test_failure`.
- A patch whose production code exits at import: an ordinary `fail` (`test_failure`), the cell
  valid; no probe was even needed.
- A tree on which the harness does produce no outcome while the base checkout's does (what a patch
  that starves the oracle's harness would look like): the `fail` stands, the probe's finding in a
  harness Turn; with the probe bypassed, the same tree would have excluded its cell (control).
"""

from __future__ import annotations

import dataclasses

import pytest

import membench.runner.grid as runner
from membench.processors import derive_all
from membench.runner.grid import RunConfig
from membench.packs.pack_resolver import open_pack
from membench.reports.conventions import exclusion_of, run_summary_row, valid_run
from membench.sandbox.scoring import ScoreResult
from membench.sandbox.workspace import TreeDiff
from tests.sandbox.broken_toolchain import PytestlessToolchain, says_pytest_is_missing
from tests.runner.unit_runs import WorkAgent, run_smoke_unit

pytestmark = pytest.mark.integration

MARKER = "STARVE_THE_HARNESS"


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return open_pack("smoke", tmp_path_factory.mktemp("home"))


def _turns(events, source_kind):
    return [e.payload["text"]["text"] for e in events if e.kind == "Turn" and e.payload["source_kind"] == source_kind]


def _change(task, session):
    (task.workspace / "ledger" / "note.py").write_text(f"SESSION = {session}\n")


def test_an_interpreter_without_pytest_excludes_the_unit_as_a_harness_fault(pack, bwrap_sandbox, tmp_path):
    events, summary, failures = run_smoke_unit(pack, PytestlessToolchain(bwrap_sandbox),
                                               WorkAgent(_change, "test:harness"), tmp_path)
    assert events[-1].payload == {"status": "excluded", "error_type": "harness_fault"}
    assert not valid_run(summary) and exclusion_of(summary) == "harness_fault"
    (verdict,) = [e.payload for e in events if e.kind == "OracleVerdict"]  # the first session ends the unit
    assert verdict["outcome"] == "harness_fault"
    assert failures == {}  # the unit ends there: no session is classified, none as the agent's test_failure
    (cause,) = _turns(events, "harness_fault")
    assert cause.startswith("the oracle's harness left no outcome record (exit status 1): ModuleNotFoundError: "
                            "No module named '") and cause.endswith("', on the pack's base checkout too")
    assert says_pytest_is_missing(cause)
    assert all(e.visibility == "harness" for e in events if e.kind in ("OracleVerdict", "RunEnded"))


def _exit_at_import(task, session):
    (task.workspace / "ledger" / "money.py").write_text(f"import os\nos._exit({session - 1})\n")


def test_a_patch_that_exits_at_import_fails_and_is_never_excluded(pack, bwrap_sandbox, tmp_path):
    events, summary, failures = run_smoke_unit(pack, bwrap_sandbox,
                                               WorkAgent(_exit_at_import, "test:harness"), tmp_path)
    assert events[-1].payload == {"status": "completed", "error_type": None}
    assert valid_run(summary) and summary.scored_passed is False
    assert {f["failure_reason"] for f in failures.values()} == {"test_failure"}
    assert _turns(events, "harness_fault") == [] and _turns(events, "harness_probe") == []


def _starve_the_harness(task, session):
    (task.workspace / "ledger" / "money.py").write_text(f"BROKEN = {session}\n")  # a change in every session
    (task.workspace / MARKER).write_text("x")


def test_a_tree_that_starves_the_harness_while_the_base_does_not_fails_the_session(pack, bwrap_sandbox, tmp_path):
    starving = PytestlessToolchain(bwrap_sandbox, only_with=MARKER)
    events, summary, failures = run_smoke_unit(pack, starving, WorkAgent(_starve_the_harness, "test:harness"), tmp_path)
    assert events[-1].payload == {"status": "completed", "error_type": None}
    assert valid_run(summary) and summary.scored_passed is False
    assert {f["failure_reason"] for f in failures.values()} == {"test_failure"}
    assert {e.payload["outcome"] for e in events if e.kind == "OracleVerdict"} == {"fail"}
    probes = _turns(events, "harness_probe")
    assert len(probes) == 3 and says_pytest_is_missing(probes[0]) and "the agent's failure" in probes[0]


def test_control_without_the_probe_the_agents_tree_would_exclude_its_cell(pack, bwrap_sandbox, tmp_path,
                                                                          monkeypatch):
    # the defence bypassed: the base checkout is taken to fault as the agent's tree did
    monkeypatch.setattr(runner, "oracle_base_score", lambda *a, **k: dataclasses.replace(
        ScoreResult("fail", TreeDiff(), {}), harness_fault="taken on trust"))
    starving = PytestlessToolchain(bwrap_sandbox, only_with=MARKER)
    events, summary, _ = run_smoke_unit(pack, starving, WorkAgent(_starve_the_harness, "test:harness"), tmp_path)
    assert not valid_run(summary) and exclusion_of(summary) == "harness_fault"


def test_a_transfer_learning_task_without_pytest_excludes_its_unit_as_a_harness_fault(bwrap_sandbox, tmp_path):
    from membench.agents.scripted import RefsolAgent
    from membench.transfer_protocol.transfer_units import run_learning
    from membench.formats.transfer_format import load_study
    from tests.conftest import REPO

    events = []
    run_learning(load_study(REPO / "fixtures" / "transfer-v1"), 1, RunConfig("rs", "scripted:refsol"),
                 PytestlessToolchain(bwrap_sandbox), lambda event, datum: events.append(event), RefsolAgent(),
                 tmp_path / "banks")
    assert events[-1].payload == {"status": "excluded", "error_type": "harness_fault"}
    assert [e.payload["outcome"] for e in events if e.kind == "OracleVerdict"] == ["harness_fault"]
    assert says_pytest_is_missing(_turns(events, "harness_fault")[0])
    summary = run_summary_row(next(d for d in derive_all(events) if d.kind == "RunSummary"))
    assert exclusion_of(summary) == "harness_fault"
