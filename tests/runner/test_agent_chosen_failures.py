"""An agent cannot choose to have its cell excluded. Real runner, real smoke pack, real
processors; scoring in real bubblewrap where a session is scored.

- A harness exception once the agent has started fails that session (`harness_error`, traceback in
  a harness Turn) and the run goes on; before the agent started it is still the unit's error
  (the control: the same exception, one step earlier, excludes the cell).
- Isolation that fails on the agent's tree but not on the pack's base checkout fails the session
  (`patch_broke_scoring`); isolation that fails on the base checkout too still excludes (control),
  and with the probe bypassed the agent's tree would have excluded the cell (control).
- A diff over the store limit is stored cut, and the cut is recorded in the run's events.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import membench.runner.grid as runner
from membench.packs.pack_resolver import open_pack
from membench.reports.conventions import exclusion_of, valid_run
from membench.sandbox.base import IsolationUnavailable
from membench.sandbox.workspace import DIFF_STORE_LIMIT
from tests.runner.unit_runs import WorkAgent, run_smoke_unit

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return open_pack("smoke", tmp_path_factory.mktemp("home"))


def _raise(task, session):
    raise RuntimeError("provoked by the agent")


def test_an_exception_after_the_agent_started_fails_the_session_and_the_run_goes_on(pack, bwrap_sandbox, tmp_path):
    events, summary, failures = run_smoke_unit(pack, bwrap_sandbox, WorkAgent(_raise), tmp_path)
    assert events[-1].payload == {"status": "completed", "error_type": None}
    assert valid_run(summary) and summary.scored_passed is False
    assert sorted(failures) == [1, 2, 3]  # every session ran, each failed by name
    assert {(f["failure_reason"], f["rule"], f["excluded"]) for f in failures.values()} == {
        ("harness_error", "harness_exception_after_agent_started", False)}
    tracebacks = [e for e in events if e.kind == "Turn" and e.payload["source_kind"] == "harness_error"]
    assert len(tracebacks) == 3 and "provoked by the agent" in tracebacks[0].payload["text"]["text"]
    assert all(e.visibility == "harness" for e in tracebacks)


class _BrokenMemory:
    uses_memory = True

    def __init__(self, fail_read: bool):
        self.fail_read = fail_read

    def read(self, query, budget):
        if self.fail_read:
            raise RuntimeError("memory read broke before the agent started")
        from membench.memory_systems.base import MemoryContext
        return MemoryContext(items=(), candidates=(), token_budget=budget)

    def write(self, events):
        raise RuntimeError("memory write broke on the agent's events")


def test_an_exception_before_the_agent_started_still_excludes_and_after_it_fails(pack, bwrap_sandbox, tmp_path,
                                                                               monkeypatch):
    # control: nothing of the agent's ran, so the unit is the harness's error and its cell excluded
    monkeypatch.setattr(runner, "make_memory", lambda *a, **k: _BrokenMemory(fail_read=True))
    events, summary, _ = run_smoke_unit(pack, bwrap_sandbox, WorkAgent(lambda task, session: None), tmp_path)
    assert events[-1].payload == {"status": "error", "error_type": "task_exception:RuntimeError"}
    assert not valid_run(summary) and exclusion_of(summary) == "task_exception:RuntimeError"  # the report's rule
    # the same kind of exception after the agent acted (writing memory from its session's events):
    # the run completes with its unfinished sessions unpassed, the cell valid and failed
    monkeypatch.setattr(runner, "make_memory", lambda *a, **k: _BrokenMemory(fail_read=False))
    events, summary, _ = run_smoke_unit(pack, bwrap_sandbox, WorkAgent(lambda task, session: None), tmp_path)
    assert events[-1].payload == {"status": "completed", "error_type": "harness_error:RuntimeError"}
    assert valid_run(summary) and summary.scored_passed is False


class _BreaksOn:
    """The real backend, except that a sandbox whose workspace holds MARKER cannot start — what a
    patch that stops the production server's start looks like to the runner."""

    MARKER = "BREAK_SCORING"

    def __init__(self, real, always: bool = False):
        self.real, self.always, self.name = real, always, real.name

    def run(self, argv, spec, **kwargs):
        if self.always or (Path(spec.workspace) / self.MARKER).exists():
            raise IsolationUnavailable("the production sandbox did not start serving: no answer")
        return self.real.run(argv, spec, **kwargs)

    def check(self):
        return self.real.check()


def _break_scored_session(task, session):
    if session == 3:
        (task.workspace / "currency.py").write_text("BROKEN = True\n")
        (task.workspace / _BreaksOn.MARKER).write_text("x")


def test_isolation_that_fails_only_on_the_agents_tree_fails_the_session(pack, bwrap_sandbox, tmp_path):
    events, summary, failures = run_smoke_unit(pack, _BreaksOn(bwrap_sandbox),
                                               WorkAgent(_break_scored_session), tmp_path)
    assert events[-1].payload["status"] == "completed"
    assert valid_run(summary) and summary.scored_passed is False
    assert (failures[3]["failure_reason"], failures[3]["rule"]) == ("invalid_agent_output",
                                                                    "scoring_failed_only_on_agent_tree")
    probe = [e for e in events if e.kind == "Turn" and e.payload["source_kind"] == "isolation_probe"]
    assert len(probe) == 1 and "base checkout" in probe[0].payload["text"]["text"]


def test_isolation_unavailable_on_the_base_checkout_still_excludes(pack, bwrap_sandbox, tmp_path):
    events, summary, _ = run_smoke_unit(pack, _BreaksOn(bwrap_sandbox, always=True),
                                        WorkAgent(_break_scored_session), tmp_path)
    assert events[-1].payload == {"status": "excluded", "error_type": "isolation_unavailable"}
    assert not valid_run(summary) and exclusion_of(summary) == "isolation_unavailable"


def test_control_without_the_probe_the_agents_tree_would_exclude_its_cell(pack, bwrap_sandbox, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr(runner, "_isolation_proven", lambda *a, **k: True)
    events, summary, _ = run_smoke_unit(pack, _BreaksOn(bwrap_sandbox), WorkAgent(_break_scored_session), tmp_path)
    assert not valid_run(summary) and exclusion_of(summary) == "isolation_unavailable"


def _big_diff(task, session):
    if session == 3:
        for i in range(6):  # ~0.9 MiB of text each: line-diffed, together over DIFF_STORE_LIMIT
            (task.workspace / f"gen_{i}.py").write_text("".join(f"value_{n:07d} = {n}\n" for n in range(40_000)))


def test_a_diff_over_the_store_limit_is_cut_and_the_cut_recorded(pack, bwrap_sandbox, tmp_path):
    events, summary, failures = run_smoke_unit(pack, bwrap_sandbox, WorkAgent(_big_diff), tmp_path)
    (patch,) = [e.payload for e in events if e.kind == "PatchProduced" and e.session_index == 3]
    assert patch["production_diff"] is None  # over the inline limit: a blob
    blob = (tmp_path / "blobs" / patch["production_diff_sha256"]).read_bytes()
    assert len(blob) <= DIFF_STORE_LIMIT + 200 and b"\\ membench: diff truncated after" in blob
    cut = [e for e in events if e.kind == "Turn" and e.payload["source_kind"] == "diff_truncated"]
    assert len(cut) == 1 and cut[0].visibility == "harness" and "production_diff" in cut[0].payload["text"]["text"]
    assert patch["added_lines"] == 6 * 40_000 and valid_run(summary)
