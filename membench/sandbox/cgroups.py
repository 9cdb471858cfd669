"""Limits for a sandbox as a whole: a memory and a pids cgroup per `run` (cgroup v1 controllers).

Per-process rlimits alone do not bound a sandbox: six processes under a 4 GiB RLIMIT_AS held
9 GiB together. When membench runs as root on a host whose cgroup v1 `memory` and `pids`
controllers are mounted writable (`/sys/fs/cgroup/memory`, `/sys/fs/cgroup/pids`), each sandbox
gets its own pair under `membench/`: `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`,
so swap cannot extend it) = `SandboxSpec.memory_mb`, `pids.max` = `max_processes`, for the
sandbox and everything it starts. The command joins both before bwrap starts (a shell writes its
own pid to `cgroup.procs`, then execs), so no process of the sandbox is ever outside them. The
groups of an owner that died without closing them are cleared by the next sandbox (`reap_orphans`).

Fallback, stated: without them (not root, cgroup v2 without delegation, controllers missing), the
per-process rlimits stay the only limits (`RLIMIT_AS` per process, `RLIMIT_NPROC` of the
sandbox's own uid), so a sandbox may hold up to max_processes × memory_mb. `membench doctor`
and `limits_mode()` say which applies. The Docker backend always has a container cgroup.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(os.environ.get("MEMBENCH_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "membench"
# sb-<PID namespace>-<owner pid>-<random>: the owner is the membench process that created the group
_NAME = re.compile(r"^sb-(\d+)-(\d+)-[0-9a-f]+$")


def _pid_namespace() -> str:
    """This process's PID namespace (the inode of /proc/self/ns/pid): an owner pid in a group's name
    means something only there."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process: alive
        return True
    return True


def reap_orphans() -> list[str]:
    """Kill what is left in the sandbox groups whose owner is gone, and remove the groups; returns
    their names. A runner killed with SIGKILL closes none of its sandboxes, and bwrap's sandbox
    init, caught before `--die-with-parent` took hold, waits forever for a parent that is gone
    (seen after a runner's kill -9: blocked in an eventfd read, deaf to SIGTERM as a namespace's
    init). `SandboxCgroup.create` calls this, so the next sandbox on the host clears them.
    Only groups of this PID namespace are judged, and an owner pid that a live process reuses keeps
    its group until that process ends: a live sandbox is never touched."""
    namespace, reaped = _pid_namespace(), list[str]()
    try:
        names = sorted(entry.name for entry in os.scandir(ROOT / "memory" / PARENT) if entry.is_dir())
    except OSError:
        return reaped
    for name in names:
        match = _NAME.match(name)
        if match is None or match.group(1) != namespace or _alive(int(match.group(2))):
            continue
        SandboxCgroup.named(name).close()
        reaped.append(name)
    return reaped


def limits_mode() -> tuple[bool, str]:
    """(whole-sandbox limits available?, how the sandbox is limited)."""
    if os.geteuid() != 0:
        return False, "per-process rlimits (cgroups need root)"
    for controller in ("memory", "pids"):
        base = ROOT / controller
        if not (base / "cgroup.procs").exists():
            return False, f"per-process rlimits (no cgroup v1 {controller} controller at {base})"
        if not os.access(base, os.W_OK):
            return False, f"per-process rlimits ({base} is not writable)"
    return True, "cgroup v1 memory + pids per sandbox"


@dataclass
class SandboxCgroup:
    """One sandbox's memory and pids cgroups."""

    name: str
    memory: Path
    pids: Path

    @classmethod
    def named(cls, name: str) -> "SandboxCgroup":
        """The pair of groups called `name` (whether they exist or not)."""
        return cls(name, ROOT / "memory" / PARENT / name, ROOT / "pids" / PARENT / name)

    @classmethod
    def create(cls, memory_mb: int, max_processes: int) -> "SandboxCgroup | None":
        """The cgroups of a new sandbox, or None when whole-sandbox limits are unavailable here."""
        ok, _ = limits_mode()
        if not ok:
            return None
        reap_orphans()
        group = cls.named(f"sb-{_pid_namespace()}-{os.getpid()}-{secrets.token_hex(6)}")
        memory, pids = group.memory, group.pids
        try:
            memory.mkdir(parents=True)
            pids.mkdir(parents=True)
            limit = str(memory_mb << 20)
            (memory / "memory.limit_in_bytes").write_text(limit)
            if (memory / "memory.memsw.limit_in_bytes").exists():  # swap accounting on: no escape into swap
                (memory / "memory.memsw.limit_in_bytes").write_text(limit)
            (pids / "pids.max").write_text(str(max_processes))
        except OSError:
            group.close()
            return None
        return group

    def wrap(self, argv: list[str]) -> list[str]:
        """argv that first moves itself into both cgroups, then execs the real command."""
        script = 'echo $$ > "$1" && echo $$ > "$2" && shift 2 && exec "$@"'
        return ["/bin/sh", "-c", script, "membench-cgroup", str(self.memory / "cgroup.procs"),
                str(self.pids / "cgroup.procs"), *argv]

    def _read(self, path: Path) -> int:
        try:
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def peak_memory_bytes(self) -> int:
        return self._read(self.memory / "memory.max_usage_in_bytes")

    def memory_limit_hits(self) -> int:
        """How often the sandbox hit its memory limit: charges refused (`memory.failcnt`) or, where the
        kernel reports it, processes the OOM killer ended (`oom_kill` of `memory.oom_control`)."""
        oom_kills = 0
        try:
            for line in (self.memory / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill "):
                    oom_kills = int(line.split()[1])
        except (OSError, ValueError):
            pass
        return max(self._read(self.memory / "memory.failcnt"), oom_kills)

    def pids_limit_hits(self) -> int:
        try:
            return int((self.pids / "pids.events").read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            return 0

    def close(self) -> None:
        """Kill whatever is left in the sandbox's cgroups and remove them."""
        for group in (self.memory, self.pids):
            for _ in range(50):
                try:
                    pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    break
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.02)
            try:
                group.rmdir()
            except OSError:
                pass
