"""Packs the integration tests cut from the built-in ones (shared by the test modules that need them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import REPO


def smoke_cut_to(pack: Path, seq_id: str = "smoke-currency") -> Path:
    """The smoke pack cut to one sequence, as a directory PACK named after it (not a built-in pack);
    smoke-currency has 3 sessions and its S3 needs the remembered code."""
    shutil.copytree(REPO / "fixtures" / "smoke", pack)
    manifest = json.loads((pack / "manifest.json").read_text())
    manifest["pack"] = pack.name
    manifest["sequences"] = [s for s in manifest["sequences"] if s["seq_id"] == seq_id]
    (pack / "manifest.json").write_text(json.dumps(manifest, indent=1))
    for hidden in (pack / "hidden").iterdir():
        if hidden.name != seq_id:
            shutil.rmtree(hidden)
    return pack
