"""The bubblewrap backend (the default).

What one `run` gets:
- new mount, PID, network, IPC and UTS namespaces (and cgroup where possible): no network at all,
  only the sandbox's own processes in /proc;
- a read-only root built from nothing: /usr (with the /bin, /lib symlinks), the Python toolchain
  membench runs on (its virtual environment and base interpreter, at their own paths, read-only),
  a fresh /proc and /dev, a private size-limited /tmp holding the temporary HOME, the workspace
  read-write at /workspace and the mounts the caller names; no other host file;
- a clean environment (bwrap itself is started with an empty one too, so not even the sandbox's
  init process carries the parent's variables);
- rlimits set on bwrap and inherited by everything inside: CPU time, address space, file size,
  open files, no core dumps, and a process count;
- the command runs as an unprivileged uid without capabilities and with no_new_privs. When
  membench runs as root, RLIMIT_NPROC does not bind uid 0 (the kernel exempts it), so bwrap runs
  without a user namespace and `setpriv` drops to a fresh high uid that no other process on the
  host uses (the workspace is handed to that uid first): the process limit is then that uid's.
  Run as a normal user, bwrap uses a user namespace and the limit binds the caller's uid;
- the wall-clock limit kills bwrap's process group; `--die-with-parent` and the PID namespace
  take every process in the sandbox with it, and when the command exits any background process
  it left behind dies with the namespace.

Start is proved, not assumed: bwrap reports the sandboxed child's pid on `--json-status-fd`;
if that report never comes, bwrap failed to build the jail and `run` raises IsolationUnavailable
(an agent printing "bwrap:" to stderr cannot fake it).
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from membench.sandbox.base import (
    SANDBOX_HOME,
    BackendProbe,
    BoundedReader,
    IsolationUnavailable,
    SandboxResult,
    SandboxSpec,
    chown_tree,
    read_probe,
)
from membench.sandbox.cgroups import SandboxCgroup, limits_mode
from membench.sandbox.oracle_runners import probe_script

STDOUT_LIMIT = 4 << 20
STDERR_LIMIT = 1 << 20
SETPRIV = "/usr/bin/setpriv"
PRLIMIT = "prlimit"
NICE = "/usr/bin/nice"
# Sandboxes run at this niceness (MEMBENCH_SANDBOX_NICE, 0: the run's own): with many units in flight
# the run process (its unit threads and the model gateway relaying every agent's calls) is scheduled
# before the agents and the code under test, so a busy machine slows the sandboxes, not every model
# call (docs/benchmarks.md, "Concurrency for waiting work").
DEFAULT_SANDBOX_NICE = 10


def sandbox_nice() -> int:
    try:
        return max(0, min(19, int(os.environ.get("MEMBENCH_SANDBOX_NICE", DEFAULT_SANDBOX_NICE))))
    except ValueError:
        return DEFAULT_SANDBOX_NICE


# Fresh uids for sandboxed processes when membench runs as root: far above login and subordinate
# (container) uid ranges, one per sandbox so that RLIMIT_NPROC counts only that sandbox.
UID_BASE, UID_SPAN = 1_500_000_000, 500_000_000


def toolchain_mounts() -> list[str]:
    """Read-only directories an agent or an oracle needs to run Python beyond /usr: the virtual
    environment membench runs on and its base interpreter (pytest comes from there)."""
    paths = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.prefix)}
    out = []
    for path in sorted(paths, key=str):
        if path.exists() and not str(path).startswith("/usr"):
            out.append(str(path))
    return out


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _hard_limit(kind: int, wanted: int) -> int:
    """`wanted`, lowered to the current hard limit (without CAP_SYS_RESOURCE nobody may raise it)."""
    _soft, hard = resource.getrlimit(kind)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


BWRAP_OWN_PROCESSES = 2  # the outer bwrap and the sandbox's init (pid 1)


def _wait(proc: subprocess.Popen, wall_time_s: float, stop: threading.Event | None) -> str | None:
    """None when the process ended by itself; "timeout" at the wall-clock limit; "stopped" when the
    caller set `stop` (the harness ends a sandbox it no longer needs, e.g. a production server)."""
    deadline = time.monotonic() + wall_time_s
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        try:
            proc.wait(timeout=remaining if stop is None else min(remaining, 0.05))
            return None
        except subprocess.TimeoutExpired:
            if stop is not None and stop.is_set():
                return "stopped"


class BwrapSandbox:
    name = "bwrap"

    def __init__(self, binary: str | None = None):
        # MEMBENCH_BWRAP points the backend at another bwrap binary (tests use a broken one).
        wanted = binary or os.environ.get("MEMBENCH_BWRAP") or "bwrap"
        self.binary = shutil.which(wanted) or wanted
        self.as_root = os.geteuid() == 0

    # ------------------------------------------------------------------ availability
    def _missing(self) -> str | None:
        if shutil.which(self.binary) is None:
            return f"bubblewrap ({self.binary}) is not installed"
        if shutil.which(PRLIMIT) is None:
            return "prlimit (util-linux) is not installed; resource limits cannot be set"
        if self.as_root and not os.access(SETPRIV, os.X_OK):
            return f"{SETPRIV} (util-linux) is missing; cannot drop root inside the sandbox"
        return None

    def check(self) -> tuple[bool, str]:
        probe = self.probe()
        return probe.ok, probe.reason

    def version(self) -> str:
        """`bwrap --version` (e.g. "bubblewrap 0.8.0"), or "" when it does not answer."""
        try:
            done = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    def probe(self) -> BackendProbe:
        missing = self._missing()
        if missing:
            return BackendProbe(False, missing)
        workspace = Path(os.environ.get("TMPDIR", "/tmp"))
        import tempfile

        with tempfile.TemporaryDirectory(prefix="membench-probe-", dir=workspace) as tmp:
            spec = SandboxSpec(workspace=Path(tmp), wall_time_s=30, cpu_time_s=10, memory_mb=512, max_processes=16)
            try:
                result = self.run(["python3", "-c", probe_script()], spec)
            except IsolationUnavailable as exc:
                return BackendProbe(False, str(exc), self.version())
        versions = read_probe(result.stdout)
        if result.exit_code != 0 or result.stdout.strip().splitlines()[-1:] != ["ok"]:
            return BackendProbe(False, f"the toolchain does not run inside the sandbox: {result.stderr.strip()[-300:]}",
                                self.version(), versions.get("python", ""), versions.get("pytest", ""))
        mode = "as root: setpriv to an unprivileged uid" if self.as_root else "unprivileged user namespace"
        return BackendProbe(True, f"ok ({self.binary}; {mode}; no network; rlimits cpu/nproc/fsize; "
                                  f"memory: {limits_mode()[1]})",
                            self.version(), versions.get("python", ""), versions.get("pytest", ""))

    # ------------------------------------------------------------------ command line
    def argv(self, command: list[str], spec: SandboxSpec, uid: int | None = None, status_fd: int | None = None,
             whole_sandbox_memory: bool = False) -> list[str]:
        # With a memory cgroup over the whole sandbox, no per-process address-space limit: it would
        # only break runtimes that reserve address space (V8, the JVM) without bounding the total.
        address_space = ([] if whole_sandbox_memory
                         else [f"--as={_hard_limit(resource.RLIMIT_AS, spec.memory_mb << 20)}"])
        limits = [
            PRLIMIT,
            f"--cpu={_hard_limit(resource.RLIMIT_CPU, spec.cpu_time_s)}",
            *address_space,
            f"--nproc={_hard_limit(resource.RLIMIT_NPROC, spec.max_processes)}",
            f"--fsize={_hard_limit(resource.RLIMIT_FSIZE, spec.file_size_mb << 20)}",
            f"--nofile={_hard_limit(resource.RLIMIT_NOFILE, spec.open_files)}",
            "--core=0", "--",
        ]
        args = [self.binary, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "membench-sandbox"]
        if uid is None:  # unprivileged caller: a user namespace, no capabilities, no nested namespaces
            args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
        else:  # root: keep only what setpriv needs to drop to `uid`; setpriv then clears everything
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        args += [
            "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev",
            "--perms", "1777", "--size", str(spec.tmp_mb << 20), "--tmpfs", "/tmp",
            "--perms", "0700" if uid is None else "0777", "--dir", SANDBOX_HOME,
            "--bind", str(spec.workspace), "/workspace",
        ]
        mounts = [(path, path, "--ro-bind") for path in toolchain_mounts()]
        mounts += [(dest, str(host), "--ro-bind") for dest, host in spec.ro_mounts.items()]
        mounts += [(dest, str(host), "--bind") for dest, host in spec.rw_mounts.items()]
        made: set[str] = set()
        for dest, host, flag in mounts:
            for parent in _parents(dest):  # traversable skeleton dirs (bwrap would make them 0700)
                if parent not in made and parent not in ("/tmp", "/usr", "/workspace"):
                    args += ["--perms", "0755", "--dir", parent]
                    made.add(parent)
            args += [flag, host, dest]
        args += ["--remount-ro", "/"]
        env = {
            "HOME": SANDBOX_HOME, "PATH": f"{Path(sys.prefix) / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp", "USER": "sandbox",
            **spec.env,
        }
        args += ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        if status_fd is not None:
            args += ["--json-status-fd", str(status_fd)]
        if uid is None:
            args += ["--chdir", "/workspace", "--"]
        else:  # bwrap (root, nearly without capabilities) may not enter a workspace it handed to `uid`
            args += ["--chdir", "/", "--", SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                     "--inh-caps=-all", "--no-new-privs", "--", "/usr/bin/env", "--chdir=/workspace", "--"]
        return limits + args + list(command)

    # ------------------------------------------------------------------ run
    def run(self, command: list[str], spec: SandboxSpec, stop: threading.Event | None = None) -> SandboxResult:
        missing = self._missing()
        if missing:
            raise IsolationUnavailable(missing)
        uid = None
        if self.as_root:
            uid = UID_BASE + secrets.randbelow(UID_SPAN)
            for path in [spec.workspace, *spec.rw_mounts.values()]:
                chown_tree(Path(path), uid, uid)
        # bwrap itself and its PID-namespace init are in the cgroup too: the command keeps max_processes
        cgroup = SandboxCgroup.create(spec.memory_mb, spec.max_processes + BWRAP_OWN_PROCESSES)
        try:
            return self._run(command, spec, stop, uid, cgroup)
        finally:
            if cgroup is not None:
                cgroup.close()

    def _run(self, command: list[str], spec: SandboxSpec, stop: threading.Event | None, uid: int | None,
             cgroup: SandboxCgroup | None) -> SandboxResult:
        status_r, status_w = os.pipe()
        started = time.monotonic()
        argv = self.argv(command, spec, uid, status_w, whole_sandbox_memory=cgroup is not None)
        nice = sandbox_nice()
        if nice and os.path.exists(NICE):
            argv = [NICE, "-n", str(nice), *argv]
        try:
            proc = subprocess.Popen(
                cgroup.wrap(argv) if cgroup else argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(status_w,),
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
            )
        except OSError as exc:
            os.close(status_r)
            os.close(status_w)
            raise IsolationUnavailable(f"bwrap could not be started: {exc}") from exc
        os.close(status_w)
        assert proc.stdout is not None and proc.stderr is not None  # both are pipes
        out = BoundedReader(proc.stdout, STDOUT_LIMIT, "head")
        err = BoundedReader(proc.stderr, STDERR_LIMIT, "tail")
        timed_out = False
        try:
            stopped = _wait(proc, spec.wall_time_s, stop)
            if stopped is not None:
                timed_out = stopped == "timeout"
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        finally:
            with os.fdopen(status_r, "rb") as status:
                status_text = status.read().decode("utf-8", "replace")
        duration = int((time.monotonic() - started) * 1000)
        stdout, stderr = out.text(), err.text()
        if '"child-pid"' not in status_text:
            raise IsolationUnavailable(
                f"bwrap failed to start the sandbox (exit {proc.returncode}): {stderr.strip()[-300:]}")
        exit_code = proc.returncode
        for line in status_text.splitlines():  # the command's own exit code, as bwrap reports it
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and "exit-code" in doc and not timed_out:
                exit_code = int(doc["exit-code"])
        if cgroup is None:
            return SandboxResult(exit_code, stdout, stderr, timed_out, duration, stdout_dropped=out.dropped)
        return SandboxResult(exit_code, stdout, stderr, timed_out, duration,
                             peak_memory_mb=cgroup.peak_memory_bytes() >> 20,
                             memory_limit_hits=cgroup.memory_limit_hits(), stdout_dropped=out.dropped)
