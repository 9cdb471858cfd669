"""`membench bench scoring` on one smoke session (real bubblewrap, cgroup cpuacct as root): every
floor piece and both runners are measured in one run, the fast runner costs less than pytest,
both agree on the verdict; and the accounting itself counts the sandboxes' CPU."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from membench.bench.scoring_cpu import CPUACCT, cpu_account, format_lines
from membench.commands.bench import bench

pytestmark = pytest.mark.integration

needs_cpuacct = pytest.mark.skipif(os.geteuid() != 0 or not (CPUACCT / "cgroup.procs").exists(),
                                   reason="cgroup v1 cpuacct accounting needs root")


@needs_cpuacct
def test_the_command_measures_each_piece_and_both_runners(bwrap_sandbox):
    result = CliRunner().invoke(bench, ["scoring", "--sessions", "1", "--repeats", "1", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    cpu = figures["cpu_s"]
    assert set(cpu) == {"sandbox_start", "sandbox_start_site", "import_pytest", "oracle_functions",
                        "pytest_runner", "fast_runner"}
    # one round each: a bare start and a start running the oracle's functions differ by less than the
    # noise, so only the order of magnitude that the bench exists to show is asserted
    assert 0 < cpu["sandbox_start"] and 0 < cpu["oracle_functions"] and cpu["import_pytest"] > cpu["sandbox_start"]
    assert cpu["fast_runner"] < cpu["pytest_runner"]
    assert figures["disagreements"] == [] and figures["sessions"] == 1
    assert len(format_lines(figures)) == 12


@needs_cpuacct
def test_the_accounting_counts_what_the_sandbox_burns(bwrap_sandbox, tmp_path):
    from membench.sandbox.base import SandboxSpec

    spin = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    with cpu_account() as read:
        before = read()
        bwrap_sandbox.run(["python3", "-I", "-S", "-c", spin], SandboxSpec(workspace=tmp_path))
        burnt = read() - before
    assert 0.3 <= burnt < 1.5  # the sandboxed process's CPU is in the group
    with cpu_account() as read:  # control: a group that nothing runs in stays near zero
        before = read()
        idle = read() - before
    assert idle < 0.05
