"""Sandboxes run below the run process's priority (membench/sandbox/bwrap.py `sandbox_nice`): with many units
in flight the run process, whose model gateway relays every agent's calls, is scheduled before the
agents and the code under test. Real bubblewrap; the control runs at the run's own priority."""

from __future__ import annotations

import os

import pytest

from membench.sandbox.base import SandboxSpec

pytestmark = pytest.mark.integration

NICENESS = ["python3", "-c", "import os; print(os.nice(0))"]


def _niceness(sandbox, tmp_path) -> int:
    result = sandbox.run(NICENESS, SandboxSpec(workspace=tmp_path, wall_time_s=60, cpu_time_s=30))
    return int(result.stdout.strip())


@pytest.mark.parametrize("setting,expected", [(None, 10), ("15", 15), ("0", 0)])
def test_a_sandboxs_processes_run_at_the_sandbox_niceness(bwrap_sandbox, tmp_path, monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv("MEMBENCH_SANDBOX_NICE", raising=False)
    else:
        monkeypatch.setenv("MEMBENCH_SANDBOX_NICE", setting)
    assert _niceness(bwrap_sandbox, tmp_path) == os.nice(0) + expected  # "0": the control, the run's own
