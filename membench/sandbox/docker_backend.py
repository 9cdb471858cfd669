"""The Docker-API backend (docker-py), for Docker Engine or podman's Docker-compatible socket.

Endpoint: `DOCKER_HOST`, else `unix:///run/podman/podman.sock` (what deploy/podman/setup.sh
starts). Image: `MEMBENCH_DOCKER_IMAGE`, else `localhost/membench-python:latest` (python3 and
pytest; never pulled — a missing image is `IsolationUnavailable`).

One `run` is one container: network `none`; the workspace bind-mounted read-write at /workspace,
the caller's read-only and read-write binds, nothing else of the host; a read-only root
filesystem with a private size-limited tmpfs /tmp (HOME is /tmp/home); a clean environment; the
unprivileged user 65534 with every capability dropped and no-new-privileges; the memory cgroup
(`mem_limit`, no swap), the pids cgroup (`pids_limit`), one CPU (`nano_cpus`) and rlimits for CPU
time, file size, open files and core dumps; `wait` with the wall-clock limit, then `kill`; the
container is always removed, taking every process in it along.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from pathlib import Path

from membench.sandbox.base import (SANDBOX_HOME, SANDBOX_UID, BackendProbe, IsolationUnavailable, SandboxResult, SandboxSpec,
                          chown_tree, read_probe)
from membench.sandbox.oracle_runners import probe_script

DEFAULT_HOST = "unix:///run/podman/podman.sock"
DEFAULT_IMAGE = "localhost/membench-python:latest"
STDOUT_LIMIT = 4 << 20
STDERR_LIMIT = 1 << 20


def _limit(kind: int, wanted: int) -> int:
    _soft, hard = resource.getrlimit(kind)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _read_capped(stream, limit: int, keep: str) -> tuple[str, int]:
    """(the head or tail of at most `limit` bytes, how many bytes were read and dropped)."""
    data = bytearray()
    total = 0
    for chunk in stream:
        total += len(chunk)
        if keep == "head":
            if len(data) < limit:  # past the limit the rest is only counted
                data += chunk[:limit - len(data)]
            continue
        data += chunk
        if len(data) > 2 * limit:
            del data[: len(data) - limit]
    data = data[:limit] if keep == "head" else data[-limit:]
    return bytes(data).decode("utf-8", "replace"), total - len(data)


class _Stopped(Exception):
    """The caller set `stop`: the container is no longer needed."""


# How often `_wait` looks at a running container: from 20 ms, growing to 100 ms, so a short oracle is
# seen to finish within a few tens of milliseconds and a long one costs about ten inspections a second.
POLL_FIRST_S = 0.02
POLL_MAX_S = 0.1

# The API version each endpoint negotiated, kept for the life of the process: docker-py asks the
# server on every new client (`version="auto"`), and podman answers `/version` by starting about ten
# `dpkg-query` processes (0.3-0.5 s of CPU), once per sandbox run before this cache.
_API_VERSIONS: dict[str, str] = {}


def _wait(container, wall_time_s: float, stop: threading.Event | None) -> dict:
    """The container's exit status, {"StatusCode": n}, once it has stopped; raises `TimeoutError` at
    the wall-clock limit or `_Stopped` once the caller sets `stop`.

    This polls the container's state (an inspect) instead of calling the API's blocking `wait`:
    podman's Docker-compatible `wait` (4.3, Debian 12) keeps more than one core busy for as long as
    it waits, measured at 5.6 s of the service's CPU per 4-second container against 0.1 s for
    polling alone (docs/benchmarks.md, "Cuts at the source (stop 38)")."""
    deadline = time.monotonic() + wall_time_s
    pause = POLL_FIRST_S
    while True:
        state = container.client.api.inspect_container(container.id).get("State") or {}
        if not state.get("Running", True) and state.get("Status") != "created":  # exited, dead, stopped
            return {"StatusCode": int(state.get("ExitCode", -1))}
        if stop is not None and stop.is_set():
            raise _Stopped()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("wall-clock limit")
        time.sleep(min(pause, remaining))
        pause = min(pause * 1.5, POLL_MAX_S)


class DockerSandbox:
    name = "docker"

    def __init__(self, base_url: str | None = None, image: str | None = None):
        self.base_url = base_url or os.environ.get("DOCKER_HOST") or DEFAULT_HOST
        self.image = image or os.environ.get("MEMBENCH_DOCKER_IMAGE") or DEFAULT_IMAGE

    def _client(self):
        try:
            import docker
        except ImportError as exc:
            raise IsolationUnavailable("docker-py (the `docker` package) is not installed") from exc
        if self.base_url.startswith("unix://") and not os.path.exists(self.base_url[len("unix://"):]):
            raise IsolationUnavailable(f"no Docker API socket at {self.base_url} "
                                       "(start one with deploy/podman/setup.sh or set DOCKER_HOST)")
        try:
            client = docker.DockerClient(base_url=self.base_url, timeout=60,
                                         version=_API_VERSIONS.get(self.base_url, "auto"))
            client.ping()
            _API_VERSIONS.setdefault(self.base_url, client.api.api_version)
        except Exception as exc:
            raise IsolationUnavailable(f"the Docker API at {self.base_url} does not answer: {exc}") from exc
        return client

    def check(self) -> tuple[bool, str]:
        probe = self.probe()
        return probe.ok, probe.reason

    def probe(self) -> BackendProbe:
        import tempfile

        backend_version = ""
        try:
            client = self._client()
            version = client.version()
            engine = version.get("Components", [{}])[0].get("Name") or "Docker API"
            try:  # the image is part of the scoring environment: its interpreter and pytest run the oracles
                image_id = client.images.get(self.image).id
            except Exception:
                image_id = "absent"
            client.close()
            backend_version = f"{engine} {version.get('Version', '?')}; image {self.image} {image_id}"
            with tempfile.TemporaryDirectory(prefix="membench-probe-") as tmp:
                result = self.run(["python3", "-c", probe_script()],
                                  SandboxSpec(workspace=Path(tmp), wall_time_s=60, memory_mb=256, max_processes=16))
        except IsolationUnavailable as exc:
            return BackendProbe(False, str(exc), backend_version)
        versions = read_probe(result.stdout)
        if result.exit_code != 0 or result.stdout.strip().splitlines()[-1:] != ["ok"]:
            return BackendProbe(False, f"{self.image} cannot run python3 with what the oracle runner needs: "
                                       f"{result.stderr.strip()[-300:]}",
                                backend_version, versions.get("python", ""), versions.get("pytest", ""))
        return BackendProbe(True, f"ok ({engine} {version.get('Version', '?')} at {self.base_url}; image {self.image})",
                            backend_version, versions.get("python", ""), versions.get("pytest", ""))

    def run(self, command: list[str], spec: SandboxSpec, stop: threading.Event | None = None) -> SandboxResult:
        import docker
        from docker.types import Mount, Ulimit

        client = self._client()
        try:
            try:
                client.images.get(self.image)
            except docker.errors.ImageNotFound as exc:
                raise IsolationUnavailable(f"image {self.image} is not present (it is never pulled; "
                                           "build it with deploy/podman/setup.sh)") from exc
            if os.geteuid() == 0:  # the container's unprivileged user must be able to write its mounts
                for path in [spec.workspace, *spec.rw_mounts.values()]:
                    chown_tree(Path(path), SANDBOX_UID, SANDBOX_UID)
                user = f"{SANDBOX_UID}:{SANDBOX_UID}"
            else:
                user = f"{os.getuid()}:{os.getgid()}"
            mounts = [Mount(target="/workspace", source=str(Path(spec.workspace).resolve()), type="bind")]
            mounts += [Mount(target=dest, source=str(Path(host).resolve()), type="bind", read_only=True)
                       for dest, host in spec.ro_mounts.items()]
            mounts += [Mount(target=dest, source=str(Path(host).resolve()), type="bind")
                       for dest, host in spec.rw_mounts.items()]
            env = {"HOME": SANDBOX_HOME, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                   "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp", "USER": "sandbox", **spec.env}
            ulimits = [  # podman replaces all default ulimits when any is given: name every one it needs
                Ulimit(name="cpu", soft=_limit(resource.RLIMIT_CPU, spec.cpu_time_s),
                       hard=_limit(resource.RLIMIT_CPU, spec.cpu_time_s)),
                Ulimit(name="fsize", soft=_limit(resource.RLIMIT_FSIZE, spec.file_size_mb << 20),
                       hard=_limit(resource.RLIMIT_FSIZE, spec.file_size_mb << 20)),
                Ulimit(name="nofile", soft=_limit(resource.RLIMIT_NOFILE, spec.open_files),
                       hard=_limit(resource.RLIMIT_NOFILE, spec.open_files)),
                # a per-uid backstop only (uid 65534 is shared on the host); pids_limit is the real limit
                Ulimit(name="nproc", soft=_limit(resource.RLIMIT_NPROC, 4096),
                       hard=_limit(resource.RLIMIT_NPROC, 4096)),
                Ulimit(name="core", soft=0, hard=0),
            ]
            tmpfs = {"/tmp": f"rw,size={spec.tmp_mb}m,mode=1777"}
            if SANDBOX_HOME not in spec.rw_mounts and SANDBOX_HOME not in spec.ro_mounts:  # else the caller's HOME
                tmpfs[SANDBOX_HOME] = f"rw,size={spec.tmp_mb}m,mode=0777"
            try:
                container = client.containers.create(
                    self.image, command=list(command), working_dir="/workspace", environment=env, user=user,
                    hostname="membench-sandbox", network_mode="none", mounts=mounts, read_only=True,
                    tmpfs=tmpfs,
                    cap_drop=["ALL"], security_opt=["no-new-privileges"],
                    mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m",
                    pids_limit=spec.max_processes, nano_cpus=1_000_000_000, ulimits=ulimits,
                    labels={"membench.sandbox": "1"}, detach=True, stdin_open=False, tty=False,
                )
            except docker.errors.ImageNotFound as exc:
                raise IsolationUnavailable(f"image {self.image} is not present: {exc}") from exc
            except docker.errors.APIError as exc:
                raise IsolationUnavailable(f"the container could not be created: {exc}") from exc
            try:
                started = time.monotonic()
                try:
                    container.start()
                except docker.errors.APIError as exc:
                    raise IsolationUnavailable(f"the container could not be started: {exc}") from exc
                timed_out = False
                try:
                    status = _wait(container, spec.wall_time_s, stop)
                    exit_code = int(status.get("StatusCode", -1))
                except Exception as exc:  # the wall-clock limit, the caller's stop, or a lost connection
                    timed_out = not isinstance(exc, _Stopped)
                    try:
                        container.kill()
                    except docker.errors.APIError:
                        pass
                    exit_code = -9
                    try:
                        _wait(container, 30, None)
                    except Exception:
                        pass
                duration = int((time.monotonic() - started) * 1000)
                stdout, dropped = _read_capped(container.logs(stdout=True, stderr=False, stream=True, follow=False),
                                               STDOUT_LIMIT, "head")
                stderr, _ = _read_capped(container.logs(stdout=False, stderr=True, stream=True, follow=False),
                                         STDERR_LIMIT, "tail")
                return SandboxResult(exit_code, stdout, stderr, timed_out, duration, stdout_dropped=dropped)
            finally:
                try:
                    container.remove(force=True)
                except docker.errors.APIError:
                    pass
        finally:
            client.close()
