"""Helpers shared by the hygiene tests: small packs derived from the built-in ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
FIXTURES = REPO / "fixtures"


def subset_pack(src: Path, dest: Path, seq_ids: list[str], name: str | None = None) -> Path:
    """Copy pack SRC to DEST keeping only SEQ_IDS (and their hidden material)."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "provenance.json"))
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["sequences"] = [s for s in manifest["sequences"] if s["seq_id"] in seq_ids]
    if name:
        manifest["pack"] = name
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    for hidden in (dest / "hidden").iterdir():
        if hidden.name not in seq_ids:
            shutil.rmtree(hidden)
    return dest


def edit_manifest(root: Path, edit) -> None:
    manifest = json.loads((root / "manifest.json").read_text())
    edit(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
