"""`membench run --sandbox docker`: the same run through the Docker API (podman's socket)."""

from __future__ import annotations

import json
import os

import pytest


def _report(home):
    return json.loads(max((home / "runs").glob("*/report.json"), key=os.path.getmtime).read_text())


@pytest.mark.integration
@pytest.mark.docker
def test_run_with_docker_sandbox(docker_sandbox, cli, home):
    proc = cli("run", "smoke", "--seeds", "1", "--conditions", "B5", "--sandbox", "docker", timeout=900)
    assert proc.returncode == 0, proc.stderr
    (b5,) = _report(home)["conditions"]
    assert b5["cells"] == b5["passed"] == 3 and b5["excluded"] == 0


@pytest.mark.integration
def test_run_with_docker_unavailable_is_excluded(cli, home, tmp_path):
    proc = cli("run", "smoke", "--seeds", "1", "--conditions", "B5", "--sandbox", "docker",
               env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (b5,) = _report(home)["conditions"]
    assert b5["passed"] == 0 and b5["excluded"] == 3
