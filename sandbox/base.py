"""The sandbox interface shared by the backends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class IsolationUnavailable(RuntimeError):
    """The backend cannot isolate here; the caller records `isolation_unavailable`."""


@dataclass(frozen=True)
class SandboxSpec:
    workspace: Path  # mounted read-write at /workspace
    ro_mounts: dict[str, Path] = field(default_factory=dict)  # sandbox path -> host path
    rw_mounts: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    wall_time_s: float = 120.0
    cpu_time_s: int = 120
    memory_mb: int = 2048
    max_processes: int = 256


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int


class Sandbox(Protocol):
    name: str

    def check(self) -> tuple[bool, str]:
        """(works here?, why not)."""

    def run(self, argv: list[str], spec: SandboxSpec) -> SandboxResult:
        """Run argv inside the sandbox; raises IsolationUnavailable rather than run unjailed."""


def get_sandbox(name: str) -> Sandbox:
    if name == "bwrap":
        from sandbox.bwrap import BwrapSandbox

        return BwrapSandbox()
    if name == "docker":
        try:
            from sandbox.docker_backend import DockerSandbox
        except ModuleNotFoundError as exc:
            raise IsolationUnavailable("the docker sandbox backend is not available in this build") from exc
        return DockerSandbox()
    raise ValueError(f"unknown sandbox backend {name!r} (expected bwrap or docker)")
