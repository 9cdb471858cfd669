"""Resolving a PACK argument (a built-in name or a directory) to a loaded, finalized pack."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from producers.finalize import finalize_pack
from schemas.pack_format import Pack, PackError, has_placeholders, load_pack, pack_digest

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "fixtures"


def builtin_packs() -> list[str]:
    if not BUILTIN_DIR.is_dir():
        return []
    return sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / "manifest.json").exists())


def resolve_pack_dir(spec: str) -> Path:
    path = Path(spec)
    if path.is_dir():
        return path.resolve()
    if (BUILTIN_DIR / spec / "manifest.json").exists():
        return BUILTIN_DIR / spec
    known = ", ".join(builtin_packs()) or "none"
    raise PackError(f"unknown pack '{spec}': not a directory and not a built-in pack (built-in: {known})")


def open_pack(spec: str, home: Path) -> Pack:
    """Load a pack; a skeleton with secret placeholders is finalized once into MEMBENCH_HOME/packs/
    (keyed by the skeleton's digest) so that every run of it sees the same secrets."""
    root = resolve_pack_dir(spec)
    load_pack(root, check_hidden=True)  # reject a malformed skeleton before anything is written
    if not has_placeholders(root):
        return load_pack(root)
    return load_pack(finalized_copy(root, home))


def finalized_copy(root: Path, home: Path) -> Path:
    """The skeleton's finalized copy, MEMBENCH_HOME/packs/<name>-<digest12>, made once (atomically:
    staged, then renamed) and reused by every later run and validation of the same skeleton."""
    target = home / "packs" / f"{root.name}-{pack_digest(root)[:12]}"
    if not (target / "provenance.json").exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=target.parent))
        finalize_pack(root, staging / "pack")
        try:
            os.rename(staging / "pack", target)
        except OSError:  # another process finalized it first
            pass
    return target
