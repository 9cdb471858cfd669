#!/usr/bin/env python3
"""Try, one by one, the docker-py options a sandbox backend may use against
podman's Docker-compatible socket, and print PASS/FAIL for each.

    .venv/bin/python deploy/podman/probe_docker_api.py [--json]

Needs the `docker` package (docker-py) and deploy/podman/setup.sh to have run.
DOCKER_HOST defaults to unix:///run/podman/podman.sock. Exit status 1 when a
core option (network none, binds, mem_limit, pids_limit) fails.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import traceback

import docker
from docker.types import Mount

IMAGE = os.environ.get("MEMBENCH_IMAGE", "localhost/membench-python:latest")
BASE_URL = os.environ.get("DOCKER_HOST", "unix:///run/podman/podman.sock")
CORE = {"network_mode_none", "bind_rw_ro", "mem_limit", "pids_limit"}


def main() -> int:
    client = docker.DockerClient(base_url=BASE_URL, timeout=120)
    work = tempfile.mkdtemp(prefix="membench-probe-")
    rw = os.path.join(work, "rw")
    ro = os.path.join(work, "ro")
    os.makedirs(rw)
    os.makedirs(ro)
    os.chmod(rw, 0o777)
    with open(os.path.join(ro, "input.txt"), "w") as fh:
        fh.write("hello from the host\n")
    results: dict[str, tuple[bool, str]] = {}

    def run(*cmd: str, **kw) -> str:
        kw.setdefault("remove", True)
        kw.setdefault("network_mode", "none")
        out = client.containers.run(IMAGE, list(cmd), **kw)
        return out.decode() if isinstance(out, bytes) else str(out)

    def check(name: str):
        def deco(fn):
            try:
                detail = fn()
                results[name] = (True, str(detail or "").strip()[:200])
            except Exception as exc:  # noqa: BLE001 - report every failure
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                results[name] = (False, last[:400])
            return fn

        return deco

    @check("ping_version")
    def _():
        v = client.version()
        return f"{v.get('Version')} api {v.get('ApiVersion')} ({v.get('Components', [{}])[0].get('Name')})"

    @check("network_mode_none")
    def _():
        out = run("python3", "-c",
                  "import socket; print(sorted(n for _, n in socket.if_nameindex()))")
        assert out.strip() == "['lo']", out
        return out

    @check("network_disabled")
    def _():
        return run("python3", "-c", "print('ok')", network_mode=None, network_disabled=True)

    @check("bind_rw_ro")
    def _():
        out = run(
            "python3", "-c",
            "import os\n"
            "print(open('/in/input.txt').read().strip())\n"
            "open('/out/result.txt','w').write('written in the container\\n')\n"
            "try:\n open('/in/x','w'); print('ro-writable')\n"
            "except OSError as e: print('ro-denied', e.errno)\n",
            volumes={ro: {"bind": "/in", "mode": "ro"}, rw: {"bind": "/out", "mode": "rw"}},
        )
        assert "hello from the host" in out and "ro-denied" in out, out
        assert open(os.path.join(rw, "result.txt")).read() == "written in the container\n"
        return out.replace("\n", " | ")

    @check("mounts_type_bind")
    def _():
        return run(
            "python3", "-c", "print(open('/in/input.txt').read().strip())",
            mounts=[Mount(target="/in", source=ro, type="bind", read_only=True)],
        )

    @check("mem_limit")
    def _():
        out = run("cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes", mem_limit="256m")
        assert out.strip() == str(256 * 1024 * 1024), out
        return out

    @check("mem_limit_enforced_oom")
    def _():
        c = client.containers.run(
            IMAGE, ["python3", "-c", "b = bytearray(512 * 1024 * 1024); print('survived')"],
            detach=True, network_mode="none", mem_limit="128m", memswap_limit="128m",
        )
        try:
            status = c.wait(timeout=60)
            c.reload()
            oom = c.attrs["State"].get("OOMKilled")
            assert status["StatusCode"] != 0, status
            return f"exit {status['StatusCode']} OOMKilled={oom}"
        finally:
            c.remove(force=True)

    @check("pids_limit")
    def _():
        out = run(
            "python3", "-c",
            "import subprocess\n"
            "ps = []\n"
            "try:\n"
            "    for i in range(64): ps.append(subprocess.Popen(['sleep', '5']))\n"
            "    print('spawned', len(ps))\n"
            "except OSError as e: print('limited at', len(ps), e.errno)\n"
            "for p in ps: p.kill()\n",
            pids_limit=16,
        )
        assert "limited at" in out, out
        return out

    @check("user_nobody")
    def _():
        out = run("python3", "-c", "import os; print(os.getuid(), os.getgid())", user="65534:65534")
        assert out.strip() == "65534 65534", out
        return out

    @check("read_only_rootfs_and_tmpfs")
    def _():
        out = run(
            "python3", "-c",
            "open('/tmp/x','w').write('1')\n"
            "try:\n open('/etc/x','w'); print('rootfs-writable')\n"
            "except OSError as e: print('rootfs-ro', e.errno)\n",
            read_only=True, tmpfs={"/tmp": "rw,size=64m"},
        )
        assert "rootfs-ro" in out, out
        return out

    @check("working_dir_environment")
    def _():
        out = run("python3", "-c", "import os; print(os.getcwd(), os.environ['MB_X'])",
                  working_dir="/tmp", environment={"MB_X": "42"})
        assert out.split() == ["/tmp", "42"], out
        return out

    @check("nano_cpus")
    def _():
        return run("python3", "-c", "print('ok')", nano_cpus=500_000_000)

    @check("cpu_period_quota")
    def _():
        return run("python3", "-c", "print('ok')", cpu_period=100000, cpu_quota=50000)

    @check("cap_drop_no_new_privileges")
    def _():
        return run("python3", "-c", "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])",
                   cap_drop=["ALL"], security_opt=["no-new-privileges"])

    # Passing `ulimits` replaces containers.conf's default_ulimits, and podman
    # then asks for its own (too high) nproc: give nofile AND nproc together.
    @check("ulimits_nofile_only")
    def _():
        return run("python3", "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))",
                   ulimits=[docker.types.Ulimit(name="nofile", soft=1024, hard=1024)])

    @check("ulimits_nofile_and_nproc")
    def _():
        return run("python3", "-c",
                   "import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE), r.getrlimit(r.RLIMIT_NPROC))",
                   ulimits=[docker.types.Ulimit(name="nofile", soft=1024, hard=1024),
                            docker.types.Ulimit(name="nproc", soft=1024, hard=1024)])

    @check("stdout_stderr_separate_detach_wait_logs")
    def _():
        c = client.containers.run(
            IMAGE, ["python3", "-c", "import sys; print('to-out'); print('to-err', file=sys.stderr); sys.exit(3)"],
            detach=True, network_mode="none",
        )
        try:
            status = c.wait(timeout=60)
            out = c.logs(stdout=True, stderr=False).decode()
            err = c.logs(stdout=False, stderr=True).decode()
            assert status["StatusCode"] == 3, status
            assert out.strip() == "to-out" and err.strip() == "to-err", (out, err)
            return f"exit {status['StatusCode']} out={out.strip()!r} err={err.strip()!r}"
        finally:
            c.remove(force=True)

    @check("run_nonzero_raises_ContainerError")
    def _():
        try:
            run("python3", "-c", "import sys; sys.exit(5)")
        except docker.errors.ContainerError as exc:
            assert exc.exit_status == 5
            return "ContainerError exit 5"
        raise AssertionError("no ContainerError")

    @check("wait_timeout_then_kill")
    def _():
        c = client.containers.run(IMAGE, ["sleep", "60"], detach=True, network_mode="none")
        try:
            t0 = time.monotonic()
            try:
                c.wait(timeout=2)
                raise AssertionError("wait returned before timeout")
            except Exception as exc:  # requests ReadTimeout / ConnectionError
                kind = type(exc).__name__
            c.kill()
            status = c.wait(timeout=30)
            return f"wait timed out ({kind}) after {time.monotonic() - t0:.1f}s, killed: exit {status['StatusCode']}"
        finally:
            c.remove(force=True)

    @check("put_get_archive_exec_run")
    def _():
        c = client.containers.create(IMAGE, ["sleep", "60"], network_mode="none")
        try:
            c.start()
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                data = b"print('from archive')\n"
                info = tarfile.TarInfo("job.py")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            assert c.put_archive("/tmp", buf.getvalue())
            code, out = c.exec_run(["python3", "/tmp/job.py"])
            assert code == 0 and out.decode().strip() == "from archive", (code, out)
            stream, _ = c.get_archive("/tmp/job.py")
            got = b"".join(stream)
            assert b"from archive" in got
            return "put_archive + exec_run + get_archive ok"
        finally:
            c.remove(force=True)

    @check("auto_remove")
    def _():
        c = client.containers.run(IMAGE, ["true"], detach=True, network_mode="none", auto_remove=True)
        c.wait(timeout=30)
        for _ in range(20):
            try:
                client.containers.get(c.id)
            except docker.errors.NotFound:
                return "removed"
            time.sleep(0.25)
        raise AssertionError("container still present")

    @check("image_pull_refused_offline")
    def _():
        try:
            client.images.pull("docker.io/library/alpine", tag="latest")
        except docker.errors.APIError as exc:
            return f"refused as expected: {str(exc)[:120]}"
        return "pulled?!"

    shutil.rmtree(work, ignore_errors=True)
    if "--json" in sys.argv:
        print(json.dumps({k: {"ok": ok, "detail": d} for k, (ok, d) in results.items()}, indent=2))
    else:
        for name, (ok, detail) in results.items():
            print(f"{'PASS' if ok else 'FAIL'}  {name:42s} {detail}")
    return 1 if any(not results.get(n, (False, ""))[0] for n in CORE) else 0


if __name__ == "__main__":
    sys.exit(main())
