"""The sandbox interface shared by the backends (docs/design.md §6).

A backend runs one command in a fresh jail: the workspace read-write at /workspace, the mounts
the caller names, nothing else of the host's files; no network; a temporary HOME; a clean
environment; CPU-time, wall-time, memory, process-count and file-size limits; every process
killed at the end. A backend that cannot do all of that raises `IsolationUnavailable` — callers
record `isolation_unavailable` and never run the command unjailed.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

SANDBOX_HOME = "/tmp/home"  # the temporary HOME inside every sandbox
SANDBOX_UID = 65534  # "nobody": the unprivileged user a container runs as


class IsolationUnavailable(RuntimeError):
    """The backend cannot isolate here; the caller records `isolation_unavailable`."""


@dataclass(frozen=True)
class SandboxSpec:
    workspace: Path  # mounted read-write at /workspace
    ro_mounts: dict[str, Path] = field(default_factory=dict)  # sandbox path -> host path
    rw_mounts: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    wall_time_s: float = 120.0
    cpu_time_s: int = 120  # per process (RLIMIT_CPU)
    memory_mb: int = 2048  # the whole sandbox (a cgroup; see membench/sandbox/cgroups.py for the fallback)
    max_processes: int = 256  # the whole sandbox (pids cgroup), and RLIMIT_NPROC of its own uid
    file_size_mb: int = 256  # largest file a process may write (RLIMIT_FSIZE)
    tmp_mb: int = 64  # size of the private /tmp (tmpfs)
    open_files: int = 1024  # RLIMIT_NOFILE


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int
    peak_memory_mb: int | None = None  # the whole sandbox's peak, where a cgroup measured it
    memory_limit_hits: int = 0  # allocations refused or OOM kills at the whole-sandbox memory limit
    stdout_dropped: int = 0  # bytes of stdout past the backend's limit (STDOUT_LIMIT), read and not kept


@dataclass(frozen=True)
class BackendProbe:
    """A backend's probe of itself: a real jailed interpreter importing what the oracle runner needs
    (pytest for the pytest runner, the standard library for the fast one), and the versions a
    run set records of the environment it was scored in (docs/sandbox.md)."""

    ok: bool
    reason: str  # why not, or what works
    backend_version: str = ""  # e.g. "bubblewrap 0.8.0", "Podman Engine 4.3.1 (image …)"
    python: str = ""  # the sandboxed interpreter's version
    pytest: str = ""  # its pytest's version ("" when it cannot import it)


# what the probe runs in the sandbox: the interpreter's and pytest's versions, or why it cannot
PROBE_SCRIPT = ("import sys; print('python', sys.version.split()[0]); import pytest, socket; "
                "print('pytest', pytest.__version__); print('ok')")
# the same for the fast oracle runner, which needs the standard library only (pytest's version is
# still recorded when it is installed: an oracle the fast runner refuses is run with it)
FAST_PROBE_SCRIPT = ("import sys; print('python', sys.version.split()[0]); import ast, json, socket\n"
                     "try:\n    from importlib.metadata import version; print('pytest', version('pytest'))\n"
                     "except Exception:\n    pass\nprint('ok')")


def read_probe(stdout: str) -> dict[str, str]:
    """{"python": …, "pytest": …} from PROBE_SCRIPT's output (what it got to print)."""
    out = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("python", "pytest") and value:
            out[key] = value.strip()
    return out


class Sandbox(Protocol):
    name: str

    def check(self) -> tuple[bool, str]:
        """(works here?, why not): `probe()`'s first two fields."""

    def probe(self) -> BackendProbe:
        """Run `membench.sandbox.oracle_runners.probe_script()` in a real jail: whether the backend works here, and its versions."""

    def run(self, argv: list[str], spec: SandboxSpec, stop: threading.Event | None = None) -> SandboxResult:
        """Run argv inside the sandbox; raises IsolationUnavailable rather than run unjailed. Setting
        `stop` ends the sandbox early (every process in it is killed; `timed_out` stays False)."""


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give a host directory tree to the sandbox's user (so an unprivileged jail can write it)."""
    root = Path(root)
    os.chown(root, uid, gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


class BoundedReader:
    """Drains a pipe on a thread, keeping at most `limit` bytes (the head, or the tail), so an agent
    that floods its output cannot exhaust the harness's memory."""

    def __init__(self, stream: IO[bytes], limit: int, keep: str = "head"):
        self._stream, self._limit, self._keep = stream, limit, keep
        self._chunks: list[bytes] = []
        self._size = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while True:
                chunk = self._stream.read(65536)
                if not chunk:
                    break
                if self._keep == "head":
                    room = self._limit - self._size
                    if room > 0:
                        self._chunks.append(chunk[:room])
                        self._size += min(room, len(chunk))
                    self.dropped += max(0, len(chunk) - max(room, 0))
                else:
                    self._chunks.append(chunk)
                    self._size += len(chunk)
                    while self._size - len(self._chunks[0]) >= self._limit and len(self._chunks) > 1:
                        self._size -= len(self._chunks[0])
                        self.dropped += len(self._chunks.pop(0))
        finally:
            self._stream.close()

    def text(self, timeout: float = 10.0) -> str:
        self._thread.join(timeout)
        data = b"".join(self._chunks)
        if self._keep == "tail":
            data = data[-self._limit:]
        return data.decode("utf-8", "replace")
