"""podman's Docker-compatible socket from deploy/podman/setup.sh runs sandbox containers.

Uses docker-py against DOCKER_HOST (default unix:///run/podman/podman.sock) and
the image localhost/membench-python:latest that setup.sh builds offline.
Skipped when the socket does not answer, except under CI=true, where that is a
failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.integration, pytest.mark.docker]

SOCKET_URL = os.environ.get("DOCKER_HOST", "unix:///run/podman/podman.sock")
IMAGE = os.environ.get("MEMBENCH_IMAGE", "localhost/membench-python:latest")


@pytest.fixture(scope="module")
def client():
    problem = None
    try:
        import docker

        c = docker.DockerClient(base_url=SOCKET_URL, timeout=120)
        c.ping()
        c.images.get(IMAGE)
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable"
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        msg = (
            f"podman Docker API not usable at {SOCKET_URL} with image {IMAGE} ({problem}). "
            "Run deploy/podman/setup.sh"
        )
        skip_or_fail(msg)
    yield c
    c.close()


def test_container_with_no_network_binds_and_limits(client, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    rw = tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    rw.chmod(0o777)
    (ro / "task.py").write_text("print('task says', 6 * 7)\n")

    script = "\n".join(
        [
            "import os, runpy, socket, sys",
            "runpy.run_path('/task/task.py')",
            "print('interfaces', sorted(n for _, n in socket.if_nameindex()))",
            "open('/out/result.txt', 'w').write('from the container\\n')",
            "try:",
            "    open('/task/forbidden', 'w')",
            "    print('ro mount writable')",
            "except OSError as exc:",
            "    print('ro mount denied', exc.errno)",
            "import pytest",
            "print('pytest', pytest.__version__)",
        ]
    )
    out = client.containers.run(
        IMAGE,
        ["python3", "-c", script],
        remove=True,
        network_mode="none",
        volumes={
            str(ro): {"bind": "/task", "mode": "ro"},
            str(rw): {"bind": "/out", "mode": "rw"},
        },
        mem_limit="256m",
        pids_limit=64,
    ).decode()

    assert "task says 42" in out, out
    assert "interfaces ['lo']" in out, out  # network_mode none: loopback only
    assert "ro mount denied" in out, out
    assert "pytest " in out, out
    assert (rw / "result.txt").read_text() == "from the container\n"
    assert not (ro / "forbidden").exists()


def test_limits_are_applied(client) -> None:
    out = client.containers.run(
        IMAGE,
        [
            "python3",
            "-c",
            "\n".join(
                [
                    "import subprocess",
                    "print(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip()"
                    " if __import__('os').path.exists('/sys/fs/cgroup/memory/memory.limit_in_bytes')"
                    " else open('/sys/fs/cgroup/memory.max').read().strip())",
                    "ps = []",
                    "try:",
                    "    for _ in range(64): ps.append(subprocess.Popen(['sleep', '5']))",
                    "    print('spawned', len(ps))",
                    "except OSError:",
                    "    print('pids limited at', len(ps))",
                    "for p in ps: p.kill()",
                ]
            ),
        ],
        remove=True,
        network_mode="none",
        mem_limit="128m",
        pids_limit=16,
    ).decode()
    lines = out.split("\n")
    assert lines[0] == str(128 * 1024 * 1024), out
    assert "pids limited at" in out, out
