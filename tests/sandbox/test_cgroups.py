"""A sandbox whose owner died is cleared by the next sandbox (real cgroup v1 controllers, as root).

A runner killed with SIGKILL closes none of its sandboxes; what was left in their cgroups (seen: a
bwrap sandbox init blocked forever on its parent) must not outlive it past the next sandbox
anyone starts on the host, and a live owner's sandbox must never be touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from membench.sandbox.cgroups import SandboxCgroup, limits_mode, reap_orphans
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# an owner: one sandbox group with a process in it (a shell that joined it, then exec'd sleep), then
# it waits to be killed
OWNER = """
import subprocess, time
from membench.sandbox.cgroups import SandboxCgroup
group = SandboxCgroup.create(256, 8)
child = subprocess.Popen(group.wrap(["sleep", "600"]), start_new_session=True)
print(group.name, child.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie waiting for init."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _members(group: Path) -> list[int]:
    try:
        return [int(p) for p in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def test_a_killed_owners_sandbox_is_killed_and_removed_by_the_next_sandbox():
    ok, why = limits_mode()
    if not ok:
        skip_or_fail(f"whole-sandbox limits unavailable here: {why}")
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    live, orphan = None, None
    try:
        name, pid = owner.stdout.readline().split()
        orphan = int(pid)
        group = SandboxCgroup.named(name)
        memory, pids = group.memory, group.pids
        deadline = time.monotonic() + 30
        while orphan not in _members(memory) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert orphan in _members(memory), "the owner's sandbox process never joined its group"
        # a live owner's sandbox is not touched: not by a reap, nor by another sandbox's creation
        live = SandboxCgroup.create(256, 8)
        assert name not in reap_orphans() and not _gone(orphan)
        owner.kill()  # SIGKILL: nothing of the owner runs again
        owner.wait(timeout=30)
        # the orphan is what a killed runner leaves behind (sleep outlives its owner by itself); a sandbox
        # another test starts meanwhile may reap it first: the effect is what counts
        reap_orphans()
        deadline = time.monotonic() + 10
        while not _gone(orphan) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(orphan)
        assert not memory.exists() and not pids.exists()
        assert live.memory.exists()  # this process's group, still in use, stayed
    finally:
        if owner.poll() is None:
            owner.kill()
        if live is not None:
            live.close()
        if orphan is not None and not _gone(orphan):
            os.kill(orphan, signal.SIGKILL)
