"""Per-test CPU accounting for the suite's budget work: opt-in, off unless
`MEMBENCH_TEST_CPU=PREFIX` is set, e.g. `MEMBENCH_TEST_CPU=/tmp/suite-cpu .ci/run`.

A test's wall time on the 2-core machine says little about what it costs: under three xdist
workers a test that waits on a broker looks as slow as one that scores a hundred sessions. CPU is
the budget's real currency, and most of it is spent outside the test's process (the CLI
subprocesses, the scoring sandboxes, the agent CLIs, the brokers a test starts), where
`getrusage(RUSAGE_CHILDREN)` does not see it (a sandbox's processes are reaped inside its own PID
namespace). So each xdist worker moves itself into a cpuacct cgroup of its own (cgroup v1, or v2's
`cpu.stat`), which every process it starts inherits, and each test's line records the group's CPU
before and after the test's setup, call and teardown. A module or session fixture's cost lands on
the test that first asks for it, so sum per file. The shared Kafka broker and podman's service
run outside the groups and are not counted.

Each worker appends JSON lines `{"id", "cpu", "wall"}` (seconds) to `PREFIX.<worker id>`.
Needs root (it writes cgroup files); without them it says so once and records nothing."""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")


class _Group:
    def __init__(self, name: str) -> None:
        if (V1 / "cpuacct.usage").exists():
            self.path, self._read = V1 / "membench-tests" / name, self._v1
        else:
            self.path, self._read = V2 / "membench-tests" / name, self._v2
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def _v1(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def _v2(self) -> float:
        for line in (self.path / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
        raise OSError("cpu.stat has no usage_usec")

    def cpu_seconds(self) -> float:
        return self._read()


_state: dict = {}


def pytest_configure(config) -> None:
    prefix = os.environ.get("MEMBENCH_TEST_CPU")
    if not prefix:
        return
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        return  # the xdist controller runs no test; its workers record
    worker = getattr(config, "workerinput", {}).get("workerid", "main")
    try:
        group = _Group(f"{worker}-{os.getpid()}")
        group.cpu_seconds()
    except OSError as exc:
        warnings.warn(f"MEMBENCH_TEST_CPU is set but no cpu cgroup can be made here ({exc}): nothing recorded")
        return
    _state.update(group=group, out=open(f"{prefix}.{worker}", "a", encoding="utf-8"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    group = _state.get("group")
    if group is None:
        yield
        return
    cpu, wall = group.cpu_seconds(), time.monotonic()
    yield
    line = {"id": item.nodeid, "cpu": round(group.cpu_seconds() - cpu, 2), "wall": round(time.monotonic() - wall, 2)}
    _state["out"].write(json.dumps(line) + "\n")
    _state["out"].flush()
