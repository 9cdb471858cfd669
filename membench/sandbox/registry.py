"""The sandbox backends by name (`--sandbox bwrap|docker`); each probes itself (`Sandbox.probe`), and the
scoring pre-flight (membench/runner/scoring_preflight.py) that `membench doctor` shows runs that probe."""

from __future__ import annotations

from membench.sandbox.base import Sandbox
from membench.sandbox.bwrap import BwrapSandbox
from membench.sandbox.docker_backend import DockerSandbox

BACKENDS: dict[str, type] = {"bwrap": BwrapSandbox, "docker": DockerSandbox}


def get_sandbox(name: str) -> Sandbox:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r} (expected {' or '.join(BACKENDS)})") from None

