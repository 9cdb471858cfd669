"""The sandbox backends by name (`--sandbox bwrap|docker`) and the probe `membench doctor` shows."""

from __future__ import annotations

from sandbox.base import IsolationUnavailable, Sandbox
from sandbox.bwrap import BwrapSandbox
from sandbox.docker_backend import DockerSandbox

BACKENDS: dict[str, type] = {"bwrap": BwrapSandbox, "docker": DockerSandbox}


def get_sandbox(name: str) -> Sandbox:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown sandbox backend {name!r} (expected {' or '.join(BACKENDS)})") from None


def check_backends() -> dict[str, dict[str, object]]:
    """{backend: {"ok": bool, "reason": str}} for every backend, as `membench doctor` reports it."""
    out: dict[str, dict[str, object]] = {}
    for name in BACKENDS:
        try:
            ok, reason = get_sandbox(name).check()
        except IsolationUnavailable as exc:
            ok, reason = False, str(exc)
        except Exception as exc:  # a broken backend is reported, not raised
            ok, reason = False, f"{type(exc).__name__}: {exc}"
        out[name] = {"ok": bool(ok), "reason": reason}
    return out
