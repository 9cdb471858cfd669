"""Fail closed: a backend that cannot isolate makes units `isolation_unavailable` (excluded, never
passes), nothing runs unjailed, a command on it stops at the scoring pre-flight, and `membench
doctor` says which backends work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from membench.agents.base import AgentTask
from membench.agents.registry import make_agent
from membench.agents.command import CommandAgent
from membench.memory_systems.base import MemoryContext
from membench.sandbox import IsolationUnavailable, SandboxSpec
from membench.sandbox.bwrap import BwrapSandbox
from membench.sandbox.docker_backend import DockerSandbox


@pytest.fixture
def broken_bwrap(tmp_path: Path) -> Path:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_broken_bwrap_raises_isolation_unavailable(broken_bwrap, tmp_path):
    sandbox = BwrapSandbox(binary=str(broken_bwrap))
    with pytest.raises(IsolationUnavailable, match="failed to start"):
        sandbox.run(["true"], SandboxSpec(workspace=tmp_path))
    ok, reason = sandbox.check()
    assert not ok and "failed to start" in reason
    missing = BwrapSandbox(binary=str(tmp_path / "no-such-bwrap"))
    with pytest.raises(IsolationUnavailable, match="not installed"):
        missing.run(["true"], SandboxSpec(workspace=tmp_path))


@pytest.mark.integration
def test_a_jailed_command_cannot_fake_isolation_unavailable(bwrap_sandbox, tmp_path):
    result = bwrap_sandbox.run(["sh", "-c", "echo 'bwrap: Creating new namespace failed' >&2; exit 1"],
                               SandboxSpec(workspace=tmp_path))
    assert result.exit_code == 1 and "bwrap:" in result.stderr  # an ordinary failure of the command


# Forks until fork() fails; reports how many succeeded, the errno and the RLIMIT_NPROC it saw.
FORK_BOMB = """
import errno, json, os, resource, time
forks, error = 0, None
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(30)  # hold the slot; the PID namespace reaps it when the parent exits
            os._exit(0)
        forks += 1
except OSError as exc:
    error = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps({"forks": forks, "errno": error, "nproc": resource.getrlimit(resource.RLIMIT_NPROC)[0]}))
"""


@pytest.mark.integration
def test_process_limit_binds_even_for_root(bwrap_sandbox, tmp_path):
    """fork() fails with EAGAIN exactly at the configured RLIMIT_NPROC, not for some other reason
    (a broken interpreter, RLIMIT_AS, a crash): a control run with a higher limit forks further."""
    def forks_under(limit: int) -> dict:
        result = bwrap_sandbox.run(["python3", "-c", FORK_BOMB], SandboxSpec(workspace=tmp_path, max_processes=limit))
        assert result.exit_code == 0, result
        return json.loads(result.stdout)

    low, high = forks_under(10), forks_under(40)
    assert low["nproc"] == 10 and high["nproc"] == 40, (low, high)
    # EAGAIN: RLIMIT_NPROC (and the pids cgroup, where bwrap has one: sized to bind at the same count)
    assert low["errno"] == high["errno"] == "EAGAIN", (low, high)
    assert low["forks"] < 10 < high["forks"] < 40, (low, high)
    if os.geteuid() == 0:  # as root the sandbox gets a fresh uid: the program is its only other process
        assert (low["forks"], high["forks"]) == (9, 39), (low, high)


def test_docker_without_socket_is_unavailable(tmp_path):
    sandbox = DockerSandbox(base_url=f"unix://{tmp_path}/no.sock")
    with pytest.raises(IsolationUnavailable, match="no Docker API socket"):
        sandbox.run(["true"], SandboxSpec(workspace=tmp_path))
    assert sandbox.check()[0] is False


@pytest.mark.integration
@pytest.mark.docker
def test_docker_missing_image_is_unavailable(docker_sandbox, tmp_path):
    sandbox = DockerSandbox(image="localhost/membench-no-such-image:latest")
    with pytest.raises(IsolationUnavailable, match="not present"):
        sandbox.run(["true"], SandboxSpec(workspace=tmp_path))


def test_command_agent_refuses_to_run_without_a_sandbox(tmp_path):
    agent = make_agent("command:/bin/true --flag")
    assert isinstance(agent, CommandAgent) and agent.name == "command:/bin/true --flag"
    task = AgentTask("do it", tmp_path, MemoryContext((), (), 100), solution=None)
    with pytest.raises(IsolationUnavailable):
        agent.act(task, emitter=None)


def test_broken_bwrap_run_stops_before_any_unit(cli, home, broken_bwrap):
    """The scoring pre-flight finds the broken backend first: no unit is run (units that could not
    be scored are excluded at the unit level, tests/runner/test_agent_chosen_failures.py)."""
    proc = cli("run", "smoke", "--seeds", "1", "--conditions", "B0,B5", "--agent", "scripted:refsol",
               env={"MEMBENCH_BWRAP": str(broken_bwrap)}, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert "scoring pre-flight failed: the bwrap sandbox does not work here" in proc.stderr
    assert "Permission denied" in proc.stderr and "membench doctor" in proc.stderr
    assert not (home / "runs").exists() and not (home / "warehouse").exists()


def test_doctor_json_reports_each_backend(cli, broken_bwrap, tmp_path):
    proc = cli("doctor", "--json",
               env={"MEMBENCH_BWRAP": str(broken_bwrap), "DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    doc = json.loads(proc.stdout)
    assert set(doc["backends"]) == {"bwrap", "docker"}
    for status in doc["backends"].values():
        assert status["ok"] is False and status["reason"]
        assert status["preflight"]["ok"] is False and status["preflight"]["reason"] == status["reason"]
    assert "Permission denied" in doc["backends"]["bwrap"]["reason"]
    assert proc.returncode == 1
