"""Workspaces as file trees: snapshot, diff against a start tree, classify, apply to a fresh copy.

Scoring sees only the production part of an agent's change (docs/design.md §6): edits to tests,
`conftest.py`, `pytest.ini`, `sitecustomize.py` and `*.pth` are stripped and recorded; edits
under `.git` reject the patch.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_STRIP_NAMES = {"conftest.py", "pytest.ini", "sitecustomize.py", "usercustomize.py", "tox.ini", "setup.cfg"}


def _tree_files(root: Path) -> Iterator[tuple[str, Path]]:
    """(posix relative path, path) of every regular file and symlink under root, in sorted order,
    without interpreter caches (the same tree to snapshot() and diff_workspace())."""
    root = Path(root)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in rel.split("/") or rel.endswith(".pyc") or ".pytest_cache" in rel:
            continue
        if path.is_symlink() or path.is_file():
            yield rel, path


def _content(path: Path) -> bytes:
    """A file's bytes; a symlink counts as its target's text."""
    return b"symlink:" + str(path.readlink()).encode() if path.is_symlink() else path.read_bytes()


def snapshot(root: Path) -> dict[str, bytes]:
    """path (posix, relative) -> content, for every regular file; symlinks count as their target text."""
    return {rel: _content(path) for rel, path in _tree_files(root)}


def tree_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return digest.hexdigest()


def is_test_path(rel: str) -> bool:
    p = PurePosixPath(rel)
    return (
        p.name in _STRIP_NAMES
        or p.suffix == ".pth"
        or any(part in ("tests", "test") for part in p.parts[:-1])
        or p.name.startswith("test_")
        or p.name.endswith("_test.py")
    )


def is_git_path(rel: str) -> bool:
    return rel == ".git" or rel.startswith(".git/")


@dataclass
class TreeDiff:
    changed: dict[str, bytes | None] = field(default_factory=dict)  # path -> new content (None: deleted)
    production: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)  # stripped
    git: list[str] = field(default_factory=list)  # rejected
    added_lines: int = 0
    removed_lines: int = 0
    sha256: str = ""

    @property
    def files(self) -> list[str]:
        return sorted(self.changed)


def diff_trees(before: dict[str, bytes], after: dict[str, bytes]) -> TreeDiff:
    return _diff_changes(before, {rel: after.get(rel) for rel in set(before) | set(after)
                                  if before.get(rel) != after.get(rel)})


def _diff_changes(before: dict[str, bytes], changes: dict[str, bytes | None]) -> TreeDiff:
    """The TreeDiff of `changes` (path -> new content, None: deleted) against `before`."""
    out = TreeDiff()
    digest = hashlib.sha256()
    for rel in sorted(changes):
        old, new = before.get(rel), changes[rel]
        out.changed[rel] = new
        if is_git_path(rel):
            out.git.append(rel)
            continue
        if is_test_path(rel):
            out.tests.append(rel)
            continue
        out.production.append(rel)
        old_lines = (old or b"").decode("utf-8", "replace").splitlines()
        new_lines = (new or b"").decode("utf-8", "replace").splitlines()
        for line in difflib.unified_diff(old_lines, new_lines, lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                out.added_lines += 1
            elif line.startswith("-") and not line.startswith("---"):
                out.removed_lines += 1
        digest.update(rel.encode() + b"\0" + hashlib.sha256(new or b"\0deleted").digest())
    out.sha256 = digest.hexdigest()
    return out


class WorkspaceTooLarge(Exception):
    """The agent's workspace holds more than the harness will read."""


def workspace_limit_bytes() -> int:
    """The most an agent's workspace may hold (`MEMBENCH_WORKSPACE_MB`, default 512 MiB)."""
    return int(os.environ.get("MEMBENCH_WORKSPACE_MB", "512")) << 20


def diff_workspace(before: dict[str, bytes], root: Path, limit_bytes: int | None = None) -> TreeDiff:
    """diff_trees(before, snapshot(root)) without holding the workspace in memory: sizes are checked
    first (from lstat, nothing read; over `limit_bytes` raises WorkspaceTooLarge), then files are
    read one at a time and only changed ones are kept."""
    limit = workspace_limit_bytes() if limit_bytes is None else limit_bytes
    paths: list[tuple[str, Path]] = []
    total = 0
    for rel, path in _tree_files(root):
        total += path.lstat().st_size
        paths.append((rel, path))
        if total > limit:
            raise WorkspaceTooLarge(f"the workspace holds more than {limit >> 20} MiB (limit MEMBENCH_WORKSPACE_MB)")
    changes: dict[str, bytes | None] = {}
    seen = set()
    for rel, path in paths:
        seen.add(rel)
        content = _content(path)
        if before.get(rel) != content:
            changes[rel] = content
    for rel in set(before) - seen:
        changes[rel] = None
    return _diff_changes(before, changes)


@contextlib.contextmanager
def capped_directory(path: Path, size_mb: int | None = None) -> Iterator[Path]:
    """A directory whose contents cannot outgrow `size_mb` (default: the workspace limit): a tmpfs of
    that size mounted there when membench runs as root and may mount; otherwise a plain directory,
    and the limit is enforced when the harness reads it (diff_workspace). Yields the path."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    size = size_mb if size_mb is not None else workspace_limit_bytes() >> 20
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m,mode=0755", "membench-ws", str(path)],
                                 capture_output=True).returncode == 0
    try:
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def write_files(files: dict[str, bytes], dest: Path) -> None:
    """Write `files` into the existing directory `dest` (which may be a mount point)."""
    for rel, content in files.items():
        target = Path(dest) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def write_tree(files: dict[str, bytes], dest: Path) -> None:
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for rel, content in files.items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def apply_production(base: dict[str, bytes], diff: TreeDiff) -> dict[str, bytes]:
    out = dict(base)
    for rel in diff.production:
        content = diff.changed[rel]
        if content is None:
            out.pop(rel, None)
        else:
            out[rel] = content
    return out


def render_patch(before: dict[str, bytes], diff: TreeDiff, paths: list[str]) -> str:
    """`paths` of a change as one unified diff (`git diff` style headers, 3 lines of context), for
    the log: what was scored is readable there. A file that is not UTF-8 text is named with the
    SHA-256 of both sides instead of its bytes."""
    out: list[str] = []
    for rel in sorted(paths):
        old, new = before.get(rel), diff.changed.get(rel)
        try:
            old_text = (old or b"").decode("utf-8")
            new_text = (new or b"").decode("utf-8")
        except UnicodeDecodeError:
            digests = [hashlib.sha256(side).hexdigest() if side is not None else "none" for side in (old, new)]
            out.append(f"Binary files a/{rel} ({digests[0]}) and b/{rel} ({digests[1]}) differ\n")
            continue
        lines = difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                     fromfile="/dev/null" if old is None else f"a/{rel}",
                                     tofile="/dev/null" if new is None else f"b/{rel}")
        out.extend(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return "".join(out)
