"""The bubblewrap backend: new namespaces (no network), only the workspace writable, the Python
toolchain read-only, a temporary HOME, a clean environment, rlimits, and every process killed
when the sandbox's init exits (`--unshare-pid --die-with-parent`)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sandbox.base import IsolationUnavailable, SandboxResult, SandboxSpec

_OUTPUT_LIMIT = 1 << 20


def toolchain_mounts() -> list[str]:
    """Read-only directories an agent or an oracle needs to run Python: the system's /usr and
    the interpreter and virtual environment membench itself runs on."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.prefix)}
    out = []
    for path in sorted(paths, key=str):
        if path.exists() and not str(path).startswith("/usr"):
            out.append(str(path))
    return out


class BwrapSandbox:
    name = "bwrap"

    def __init__(self, binary: str | None = None):
        self.binary = binary or shutil.which("bwrap") or "bwrap"

    def check(self) -> tuple[bool, str]:
        if shutil.which(self.binary) is None:
            return False, "bubblewrap (bwrap) is not installed"
        probe = subprocess.run(
            [self.binary, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
             "--proc", "/proc", "--dev", "/dev", "/usr/bin/true"],
            capture_output=True, text=True, timeout=30,
        )
        if probe.returncode != 0:
            return False, f"bwrap cannot create namespaces here: {probe.stderr.strip()[:200]}"
        return True, "ok"

    def argv(self, command: list[str], spec: SandboxSpec) -> list[str]:
        args = [
            self.binary, "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--dir", "/tmp/home",
            "--bind", str(spec.workspace), "/workspace",
        ]
        for path in toolchain_mounts():
            args += ["--ro-bind", path, path]
        for dest, host in spec.ro_mounts.items():
            args += ["--ro-bind", str(host), dest]
        for dest, host in spec.rw_mounts.items():
            args += ["--bind", str(host), dest]
        env = {
            "HOME": "/tmp/home", "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin",
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp",
            **spec.env,
        }
        args += ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        args += ["--chdir", "/workspace", "--", *command]
        return args

    def run(self, command: list[str], spec: SandboxSpec) -> SandboxResult:
        if shutil.which(self.binary) is None:
            raise IsolationUnavailable("bubblewrap (bwrap) is not installed")

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (spec.cpu_time_s, spec.cpu_time_s))
            memory = spec.memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            resource.setrlimit(resource.RLIMIT_NPROC, (spec.max_processes, spec.max_processes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        started = time.monotonic()
        proc = subprocess.Popen(
            self.argv(command, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL, preexec_fn=limits, start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=spec.wall_time_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        duration = int((time.monotonic() - started) * 1000)
        stderr = err.decode("utf-8", "replace")[-_OUTPUT_LIMIT:]
        if proc.returncode != 0 and stderr.startswith("bwrap:"):
            raise IsolationUnavailable(f"bwrap failed to start: {stderr.strip()[:300]}")
        return SandboxResult(proc.returncode, out.decode("utf-8", "replace")[-_OUTPUT_LIMIT:], stderr,
                             timed_out, duration)
