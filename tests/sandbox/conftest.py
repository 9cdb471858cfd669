"""Sandbox fixtures: a backend by name, skipping (or, under CI=true, failing) when it is missing."""

from __future__ import annotations

import os
import shutil

import pytest

from sandbox.registry import get_sandbox
from sandbox.docker_backend import DEFAULT_HOST


def require_backend(name: str):
    """The named backend, working; otherwise skip with the reason — except that under CI=true a
    missing podman socket (or a broken backend) fails the test instead."""
    if name == "bwrap" and shutil.which("bwrap") is None and os.environ.get("CI") != "true":
        pytest.skip("bubblewrap (bwrap) is not installed")
    if name == "docker":
        host = os.environ.get("DOCKER_HOST", DEFAULT_HOST)
        if host.startswith("unix://") and not os.path.exists(host[len("unix://"):]):
            message = f"no Docker API socket at {host}: run deploy/podman/setup.sh (or set DOCKER_HOST)"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    backend = get_sandbox(name)
    ok, reason = backend.check()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"sandbox backend {name} does not work here: {reason}")
        pytest.skip(f"sandbox backend {name} does not work here: {reason}")
    return backend


@pytest.fixture(scope="session")
def bwrap_sandbox():
    return require_backend("bwrap")


@pytest.fixture(scope="session")
def docker_sandbox():
    return require_backend("docker")


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")
