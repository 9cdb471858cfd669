"""Sandbox fixtures: `any_sandbox` runs a test on each backend (`bwrap_sandbox` and
`docker_sandbox` live in tests/conftest.py: they skip, or under CI fail, when a backend is missing)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["bwrap", pytest.param("docker", marks=pytest.mark.docker)])
def any_sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")
