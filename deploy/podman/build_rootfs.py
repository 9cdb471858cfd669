#!/usr/bin/env python3
"""Build a minimal root filesystem tarball from the host's own Debian packages.

No registry is reachable from this machine, so the sandbox image cannot be
pulled or built from a base image. Instead this script takes a set of Debian
packages installed on the host (by default python3, python3-pytest and a small
shell toolset), computes their Depends/Pre-Depends closure among the installed
packages, and writes every file that dpkg says those packages own into a tar,
plus the merged-/usr top-level links, a minimal /etc/passwd and /etc/group and
the /etc/alternatives links they need. ``podman import`` turns the tar into an
image (see setup.sh).

Usage: build_rootfs.py OUT.tar [PACKAGE ...]
       build_rootfs.py --hash-only [PACKAGE ...]
Prints the content hash of the package set (name=version lines and this
script) on stdout, so the caller can tell whether an existing image is stale.

Run it with the host's Debian python3 (/usr/bin/python3); it needs only the
standard library and dpkg-query.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile

DEFAULT_PACKAGES = [
    "python3",
    "python3-pytest",
    "bash",
    "dash",
    "coreutils",
    "grep",
    "sed",
    "findutils",
    "diffutils",
    "tar",
    "gzip",
    "base-files",
]

# Top-level directories created empty in the image.
EMPTY_DIRS = {
    "tmp": 0o1777,
    "var/tmp": 0o1777,
    "proc": 0o555,
    "sys": 0o555,
    "dev": 0o755,
    "run": 0o755,
    "root": 0o700,
    "home": 0o755,
    "work": 0o777,
}

PASSWD = """root:x:0:0:root:/root:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
sandbox:x:1000:1000:sandbox:/tmp:/bin/bash
"""
GROUP = """root:x:0:
nogroup:x:65534:
sandbox:x:1000:
"""
NSSWITCH = """passwd: files
group: files
hosts: files
"""


def installed_packages() -> dict[str, dict[str, str]]:
    fmt = "${Package}\t${Version}\t${Status}\t${Depends}\t${Pre-Depends}\t${Provides}\n"
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", fmt], check=True, capture_output=True, text=True
    ).stdout
    pkgs: dict[str, dict[str, str]] = {}
    for line in out.splitlines():
        name, version, status, deps, predeps, provides = (line.split("\t") + [""] * 6)[:6]
        if not status.endswith(" installed"):
            continue
        pkgs[name] = {"version": version, "deps": ", ".join(d for d in (deps, predeps) if d),
                      "provides": provides}
    return pkgs


def _dep_name(atom: str) -> str:
    # "libc6 (>= 2.34)" / "python3:any" / "awk" -> bare package name
    return re.split(r"[\s(:]", atom.strip(), maxsplit=1)[0]


def closure(roots: list[str], pkgs: dict[str, dict[str, str]]) -> list[str]:
    providers: dict[str, list[str]] = {}
    for name, info in pkgs.items():
        for atom in filter(None, (a.strip() for a in info["provides"].split(","))):
            providers.setdefault(_dep_name(atom), []).append(name)

    def resolve(name: str) -> str | None:
        if name in pkgs:
            return name
        cands = providers.get(name) or []
        return sorted(cands)[0] if cands else None

    missing = [r for r in roots if resolve(r) is None]
    if missing:
        sys.exit(f"build_rootfs: host packages not installed: {' '.join(missing)}")
    seen: set[str] = set()
    todo = [resolve(r) for r in roots]
    while todo:
        name = todo.pop()
        if name is None or name in seen:
            continue
        seen.add(name)
        for clause in filter(None, (c.strip() for c in pkgs[name]["deps"].split(","))):
            # "a | b": take the first alternative that is installed
            for alt in clause.split("|"):
                got = resolve(_dep_name(alt))
                if got is not None:
                    todo.append(got)
                    break
    return sorted(seen)


def canonical(path: str) -> str:
    """Resolve symlinked parent directories (merged /usr), keep the last component."""
    parent, base = os.path.split(path)
    return os.path.join(os.path.realpath(parent), base)


def owned_paths(packages: list[str]) -> set[str]:
    out = subprocess.run(
        ["dpkg-query", "-L", *packages], check=True, capture_output=True, text=True
    ).stdout
    paths: set[str] = set()
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("/") or line in ("/", "/."):
            continue
        p = canonical(line)
        if os.path.lexists(p):
            paths.add(p)
    # every parent directory too
    for p in list(paths):
        d = os.path.dirname(p)
        while d not in ("/", ""):
            paths.add(d)
            d = os.path.dirname(d)
    return paths


def alternatives(paths: set[str]) -> set[str]:
    """/etc/alternatives links whose targets are in the image."""
    out: set[str] = set()
    alt = "/etc/alternatives"
    if not os.path.isdir(alt):
        return out
    for name in os.listdir(alt):
        link = os.path.join(alt, name)
        if os.path.islink(link) and canonical(os.readlink(link)) in paths:
            out.add(link)
    return out


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def content_hash(names: list[str], pkgs: dict[str, dict[str, str]]) -> str:
    digest = hashlib.sha256()
    for n in names:
        digest.update(f"{n}={pkgs[n]['version']}\n".encode())
    with open(__file__, "rb") as fh:
        digest.update(fh.read())
    return digest.hexdigest()


def build(out_path: str, roots: list[str]) -> str:
    pkgs = installed_packages()
    names = closure(roots, pkgs)
    paths = owned_paths(names)
    alt = alternatives(paths)
    paths |= alt | {"/etc/alternatives"}
    generated = {"etc/passwd", "etc/group", "etc/nsswitch.conf", "etc/hostname", "etc/hosts",
                 "etc/resolv.conf"}

    tmp = out_path + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        # merged-/usr top-level links as on the host (bin -> usr/bin, ...)
        for top in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            host = "/" + top
            if os.path.islink(host):
                info = tarfile.TarInfo(top)
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(host), 0o777
                tar.addfile(info)
                paths.discard(host)
        for name, mode in EMPTY_DIRS.items():
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)
        for p in sorted(paths):
            arc = p.lstrip("/")
            if arc in generated or arc in EMPTY_DIRS:
                continue
            info = tar.gettarinfo(p, arcname=arc)
            if info is None:  # sockets and the like
                continue
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isreg():
                with open(p, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
        _add_text(tar, "etc/passwd", PASSWD)
        _add_text(tar, "etc/group", GROUP)
        _add_text(tar, "etc/nsswitch.conf", NSSWITCH)
        _add_text(tar, "etc/hostname", "sandbox\n")
        _add_text(tar, "etc/hosts", "127.0.0.1 localhost sandbox\n::1 localhost\n")
        _add_text(tar, "etc/resolv.conf", "")
    os.replace(tmp, out_path)
    print(
        f"build_rootfs: {len(names)} packages, {len(paths)} paths -> {out_path} "
        f"({os.path.getsize(out_path) // (1 << 20)} MiB)",
        file=sys.stderr,
    )
    return content_hash(names, pkgs)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    roots = argv[2:] or DEFAULT_PACKAGES
    if argv[1] == "--hash-only":
        pkgs = installed_packages()
        print(content_hash(closure(roots, pkgs), pkgs))
        return 0
    print(build(argv[1], roots))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
