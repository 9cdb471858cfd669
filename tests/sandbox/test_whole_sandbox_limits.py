"""Limits hold for the sandbox as a whole, not per process: six processes cannot hold
six times the memory limit between them (real bubblewrap with cgroups, real podman)."""

from __future__ import annotations

import pytest

from membench.sandbox.base import SandboxSpec
from membench.sandbox.cgroups import limits_mode
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.integration

# Six children each commit 300 MiB and hold it for three seconds; the parent prints how many of them
# finished normally (the others were killed at the limit or could not allocate).
GREEDY = r"""
import os, sys, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(300 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(3)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    children.append(pid)
survivors = 0
for pid in children:
    _, status = os.waitpid(pid, 0)
    survivors += os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
print(survivors)
"""


def _run(sandbox, tmp_path, memory_mb):
    spec = SandboxSpec(workspace=tmp_path, memory_mb=memory_mb, max_processes=32, wall_time_s=120, cpu_time_s=60)
    return sandbox.run(["python3", "-c", GREEDY], spec)


def test_memory_is_limited_for_the_whole_sandbox(any_sandbox, tmp_path):
    if any_sandbox.name == "bwrap" and not limits_mode()[0]:
        skip_or_fail(f"whole-sandbox limits unavailable here: {limits_mode()[1]}")
    limited = _run(any_sandbox, tmp_path, memory_mb=512)
    survivors = int(limited.stdout.strip() or 0)
    assert survivors * 300 <= 600, f"{survivors} processes held 300 MiB each under a 512 MiB limit"
    if any_sandbox.name == "bwrap":  # the cgroup's own accounting
        assert limited.peak_memory_mb is not None and limited.peak_memory_mb <= 512
        assert limited.memory_limit_hits > 0
    # the control: with room for all six, all six finish (the program itself works)
    roomy = _run(any_sandbox, tmp_path, memory_mb=4096)
    assert roomy.stdout.strip() == "6", roomy.stderr[-500:]
