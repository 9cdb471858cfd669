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
    """A file's bytes; a symlink counts as its target's text (its raw bytes: a target that is not
    UTF-8 must not crash the harness)."""
    return b"symlink:" + os.fsencode(path.readlink()) if path.is_symlink() else path.read_bytes()


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


# A file side larger than this is not line-diffed: the diff names it by digest and size, and its
# lines count as replaced whole (the line diff's time and memory grow with the file).
RENDER_FILE_LIMIT = 1 << 20
# The most of a rendered diff that is stored (inline or as a blob): a hostile patch must not turn
# into a blob the size of the workspace. The cut is recorded in the text and by the runner.
DIFF_STORE_LIMIT = 4 << 20


def _line_count(content: bytes | None) -> int:
    if not content:
        return 0
    return content.count(b"\n") + (0 if content.endswith(b"\n") else 1)


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
        if max(len(old or b""), len(new or b"")) > RENDER_FILE_LIMIT:
            # no line diff of a huge file (its cost grows with the file): counted as replaced whole
            out.added_lines += _line_count(new)
            out.removed_lines += _line_count(old)
        else:
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


class PatchTooLarge(Exception):
    """The agent's change holds more new bytes than the harness will read (MEMBENCH_PATCH_MB)."""


class UnencodableWorkspacePath(Exception):
    """A path in the agent's workspace is not valid UTF-8: it cannot be recorded, named in a diff or
    compared with the start tree, so the session is failed, never excluded (docs/design.md §6)."""


def workspace_limit_bytes() -> int:
    """The most an agent's workspace may hold (`MEMBENCH_WORKSPACE_MB`, default 512 MiB)."""
    return int(os.environ.get("MEMBENCH_WORKSPACE_MB", "512")) << 20


def patch_limit_bytes() -> int:
    """The most new content the harness reads from a workspace (`MEMBENCH_PATCH_MB`, default 64 MiB):
    changed files are held in memory to be applied to the fresh checkout, so this, not the
    workspace's size, bounds the harness's memory for one session."""
    return int(os.environ.get("MEMBENCH_PATCH_MB", "64")) << 20


CHUNK = 1 << 20  # files are compared with the start tree this many bytes at a time


def _utf8_name(rel: str) -> str:
    """`rel` when it is valid UTF-8; else UnencodableWorkspacePath naming its bytes (escaped)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        shown = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UnencodableWorkspacePath(f"a workspace path is not valid UTF-8: {shown!r}") from None
    return rel


def _same_content(path: Path, old: bytes) -> bool:
    """Whether the regular file at `path` holds exactly `old`, read CHUNK bytes at a time (a file of
    another size is never read)."""
    if path.lstat().st_size != len(old):
        return False
    view = memoryview(old)
    with path.open("rb") as handle:
        at = 0
        while chunk := handle.read(CHUNK):
            if view[at:at + len(chunk)] != chunk:
                return False
            at += len(chunk)
    return at == len(old)


def diff_workspace(before: dict[str, bytes], root: Path, limit_bytes: int | None = None,
                   patch_bytes: int | None = None) -> TreeDiff:
    """diff_trees(before, snapshot(root)) without holding the workspace in memory: names and sizes
    are checked first (from lstat, nothing read: a name that is not UTF-8 raises
    UnencodableWorkspacePath, a tree over `limit_bytes` WorkspaceTooLarge), then each file is
    compared with its start content chunk by chunk and only changed ones are read whole — at most
    `patch_bytes` of them (MEMBENCH_PATCH_MB; more raises PatchTooLarge before reading them)."""
    limit = workspace_limit_bytes() if limit_bytes is None else limit_bytes
    patch_limit = patch_limit_bytes() if patch_bytes is None else patch_bytes
    paths: list[tuple[str, Path]] = []
    total = 0
    for rel, path in _tree_files(root):
        total += path.lstat().st_size
        paths.append((_utf8_name(rel), path))
        if total > limit:
            raise WorkspaceTooLarge(f"the workspace holds more than {limit >> 20} MiB (limit MEMBENCH_WORKSPACE_MB)")
    changes: dict[str, bytes | None] = {}
    seen = set()
    held = 0
    for rel, path in paths:
        seen.add(rel)
        old = before.get(rel)
        if path.is_symlink():
            content = _content(path)
            if old != content:
                changes[rel] = content
            continue
        if old is not None and _same_content(path, old):
            continue
        held += path.lstat().st_size
        if held > patch_limit:
            raise PatchTooLarge(f"the change holds more than {patch_limit >> 20} MiB of new content "
                                "(limit MEMBENCH_PATCH_MB)")
        changes[rel] = path.read_bytes()
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


@dataclass(frozen=True)
class RenderedPatch:
    """A rendered diff as stored: `text` is at most DIFF_STORE_LIMIT bytes of UTF-8 (plus the
    truncation line); `full_bytes` is the size the whole diff had (counted, never held)."""

    text: str
    truncated: bool
    full_bytes: int


def render_patch(before: dict[str, bytes], diff: TreeDiff, paths: list[str]) -> str:
    """`paths` of a change as one unified diff (`git diff` style headers, 3 lines of context), for
    the log: what was scored is readable there. A file that is not UTF-8 text, or larger than
    RENDER_FILE_LIMIT, is named with the SHA-256 and size of both sides instead of its bytes. At
    most DIFF_STORE_LIMIT bytes are kept (render_patch_bounded says whether it was cut)."""
    return render_patch_bounded(before, diff, paths).text


TRUNCATION_MARK = "\\ membench: diff truncated after {kept} of {full} bytes (the change's digest is diff_sha256)\n"


def render_patch_bounded(before: dict[str, bytes], diff: TreeDiff, paths: list[str],
                         limit: int = DIFF_STORE_LIMIT) -> RenderedPatch:
    """render_patch with its cut: rendering goes on file by file and stops keeping text once
    `limit` bytes are kept, so memory stays within a file's rendering plus `limit`; the size of the
    whole diff is still counted. A cut diff ends with a `\\ membench: diff truncated …` line."""
    kept: list[str] = []
    size = full = 0
    for rel in sorted(paths):
        for piece in _file_patch(rel, before.get(rel), diff.changed.get(rel)):
            n = len(piece.encode("utf-8"))
            full += n
            if size + n <= limit and size == full - n:
                kept.append(piece)
                size += n
    text = "".join(kept)
    if full > size:
        text += TRUNCATION_MARK.format(kept=size, full=full)
    return RenderedPatch(text, full > size, full)


def _file_patch(rel: str, old: bytes | None, new: bytes | None) -> Iterator[str]:
    """The unified diff of one file, line by line."""
    large = max(len(old or b""), len(new or b"")) > RENDER_FILE_LIMIT
    try:
        if large:
            raise UnicodeDecodeError("utf-8", b"", 0, 1, "larger than RENDER_FILE_LIMIT")
        old_text = (old or b"").decode("utf-8")
        new_text = (new or b"").decode("utf-8")
    except UnicodeDecodeError:
        sides = ["none" if side is None
                 else hashlib.sha256(side).hexdigest() + (f", {len(side)} bytes" if large else "")
                 for side in (old, new)]
        yield f"{'Large' if large else 'Binary'} files a/{rel} ({sides[0]}) and b/{rel} ({sides[1]}) differ\n"
        return
    lines = difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                 fromfile="/dev/null" if old is None else f"a/{rel}",
                                 tofile="/dev/null" if new is None else f"b/{rel}")
    for line in lines:
        yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
