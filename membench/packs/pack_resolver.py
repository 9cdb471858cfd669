"""Resolving a PACK argument (a built-in name or a directory) to a loaded, finalized pack."""

from __future__ import annotations

import json
from pathlib import Path

from membench.packs.finalize import TargetExistsError, finalize_pack
from membench.formats.pack_format import Pack, PackError, has_placeholders, load_pack, pack_digest
from membench.formats.fields import did_you_mean

BUILTIN_DIR = Path(__file__).resolve().parents[2] / "fixtures"


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
    raise PackError(f"unknown pack '{spec}': not a directory and not a built-in pack"
                    f"{did_you_mean(spec, builtin_packs())} (built-in: {known})")


def open_pack(spec: str, home: Path) -> Pack:
    """Load a pack; a skeleton with secret placeholders is finalized once into MEMBENCH_HOME/packs/
    (keyed by the skeleton's digest) so that every run of it sees the same secrets."""
    root = resolve_pack_dir(spec)
    load_pack(root, check_hidden=True)  # reject a malformed skeleton before anything is written
    if not has_placeholders(root):
        refuse_finalized_copy(root, home)
        return load_pack(root)
    return load_pack(finalized_copy(root, home))


def finalized_skeleton_name(root: Path) -> str | None:
    """The skeleton's name when ROOT is a finalized copy (its provenance.json is finalize's record),
    else None."""
    try:
        record = json.loads((Path(root) / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(record, dict) and "generator_sha256" in record and isinstance(record.get("sequences"), dict):
        return str(record.get("skeleton") or "?")
    return None


def refuse_finalized_copy(root: Path, home: Path) -> None:
    """A finalized copy given as PACK is refused (PackError, a usage error) unless it is the very copy
    MEMBENCH_HOME/packs holds for its skeleton: run from anywhere else, its runs carry a digest no
    finalized copy in MEMBENCH_HOME matches and a report cannot tell its secret values from its
    text, so the canary proof is lost (`no_secrets`) without a word. The fix is to run the skeleton:
    membench finalizes it once into MEMBENCH_HOME/packs and every run and report finds it there."""
    skeleton = finalized_skeleton_name(root)
    if skeleton is None:
        return
    packs = (Path(home) / "packs").resolve()
    if Path(root).resolve().parent == packs:
        return  # the cached copy itself: reports find it by digest in MEMBENCH_HOME/packs
    raise PackError(f"{root}: is a finalized copy of the skeleton '{skeleton}' (its provenance.json is finalize's "
                    "record); running it would lose the canary proof (the report could not recover its secrets). "
                    f"Run the skeleton instead: membench run <path of {skeleton}> — membench finalizes it once into "
                    "MEMBENCH_HOME/packs and every run and report of it uses that copy")


def finalized_copy(root: Path, home: Path) -> Path:
    """The skeleton's finalized copy, MEMBENCH_HOME/packs/<name>-<digest12>, made once and reused by
    every later run and validation of the same skeleton.

    Made atomically (`membench.packs.finalize.staged_directory`): staged next to the target and renamed
    at the end, the staging directory removed on any error, so the cache never holds a partial
    copy. When another process finalized the same skeleton first, its copy is kept (its secrets may
    already be in use); a target without provenance.json is debris of an interrupted older version
    and is replaced."""
    target = home / "packs" / f"{root.name}-{pack_digest(root)[:12]}"
    if (target / "provenance.json").exists():
        return target
    debris = target.exists() or target.is_symlink()
    try:
        finalize_pack(root, target, replace=debris)
    except TargetExistsError:  # another process finalized it first
        if not (target / "provenance.json").exists():
            raise PackError(f"{target}: exists but is not a finalized pack (no provenance.json)") from None
    return target
