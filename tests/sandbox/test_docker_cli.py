"""`membench run --sandbox docker`: the same run through the Docker API (podman's socket). One
sequence of the smoke pack (3 sessions: the agent and both scoring sandboxes of each in
containers) shows the whole path; every trap's attacks on both backends are the sandbox tests'.
Without the socket the run stops at the scoring pre-flight."""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.pack_helpers import smoke_cut_to


def _report(home):
    return json.loads(max((home / "runs").glob("*/report.json"), key=os.path.getmtime).read_text())


@pytest.mark.integration
@pytest.mark.docker
def test_run_with_docker_sandbox(docker_sandbox, cli, home, tmp_path):
    pack = smoke_cut_to(tmp_path / "smoke-currency")
    proc = cli("run", str(pack), "--seeds", "1", "--conditions", "B5", "--sandbox", "docker", timeout=900)
    assert proc.returncode == 0, proc.stderr
    (b5,) = _report(home)["conditions"]
    assert b5["cells"] == b5["passed"] == 1 and b5["excluded"] == 0


@pytest.mark.integration
def test_run_with_docker_unavailable_stops_at_the_preflight(cli, home, tmp_path):
    """No unit runs on a backend the scoring pre-flight finds missing (a unit that meets it later is
    excluded: tests/runner/test_agent_chosen_failures.py)."""
    proc = cli("run", "smoke", "--seeds", "1", "--conditions", "B5", "--sandbox", "docker",
               env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert "scoring pre-flight failed: the docker sandbox does not work here: no Docker API socket" in proc.stderr
    assert not (home / "runs").exists()
