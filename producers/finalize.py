"""Filling secret placeholders `{{SECRET:name:class}}` from a CSPRNG (`secrets`).

A name is scoped to its sequence (trap): every occurrence of `{{SECRET:name:class}}` in the
sequence's manifest entry and in `hidden/<seq_id>/` gets the same value, so events, oracle and
reference solution agree. The provenance file records the generator's hash and the format class
of each secret, never a value.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import secrets
import shutil
import string
from pathlib import Path
from typing import Any

from schemas.packs import SECRET, PackError

GENERATORS = {
    "hex8": lambda: secrets.token_hex(4),
    "hex12": lambda: secrets.token_hex(6),
    "hex16": lambda: secrets.token_hex(8),
    "token": lambda: secrets.token_urlsafe(12).replace("-", "x").replace("_", "y"),
    "word": lambda: "".join(secrets.choice(string.ascii_uppercase) for _ in range(8)),
    "int": lambda: str(1000 + secrets.randbelow(9000)),
}


def _generator_hash() -> str:
    source = inspect.getsource(inspect.getmodule(_generator_hash))  # this module is the generator
    return hashlib.sha256(source.encode()).hexdigest()


def _fill(text: str, values: dict[str, str], classes: dict[str, str], where: str) -> str:
    def sub(match: Any) -> str:
        name, cls = match.group(1), match.group(2)
        if cls not in GENERATORS:
            raise PackError(f"{where}: placeholder '{name}' has unknown class '{cls}' "
                            f"(known: {', '.join(sorted(GENERATORS))})")
        if classes.setdefault(name, cls) != cls:
            raise PackError(f"{where}: placeholder '{name}' used with classes {classes[name]} and {cls}")
        if name not in values:
            values[name] = GENERATORS[cls]()
        return values[name]

    return SECRET.sub(sub, text)


def finalize_pack(skeleton: Path, out: Path) -> dict[str, Any]:
    """Copy SKELETON to OUT with every placeholder filled; return the provenance record."""
    skeleton, out = Path(skeleton), Path(out)
    manifest = json.loads((skeleton / "manifest.json").read_text(encoding="utf-8"))
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(skeleton, out, ignore=shutil.ignore_patterns("__pycache__"))
    provenance: dict[str, Any] = {"generator": "python secrets (CSPRNG)", "generator_sha256": _generator_hash(),
                                  "skeleton": skeleton.name, "sequences": {}}
    for seq in manifest.get("sequences", []):
        seq_id = seq.get("seq_id", "?")
        values: dict[str, str] = {}
        classes: dict[str, str] = {}
        where = f"{skeleton / 'manifest.json'}: sequence {seq_id}"
        filled = json.loads(_fill(json.dumps(seq), values, classes, where))
        seq.clear()
        seq.update(filled)
        hidden = out / "hidden" / seq_id
        for path in sorted(hidden.rglob("*")) if hidden.exists() else []:
            if path.is_file():
                path.write_text(_fill(path.read_text(encoding="utf-8"), values, classes, f"{path}"),
                                encoding="utf-8")
        provenance["sequences"][seq_id] = {name: {"class": cls} for name, cls in sorted(classes.items())}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for path in out.rglob("*"):
        if path.is_file() and SECRET.search(path.read_text(encoding="utf-8", errors="ignore")):
            raise PackError(f"{path}: leftover secret placeholder after finalize "
                            "(placeholders belong to a sequence's manifest entry or hidden/<seq_id>/)")
    (out / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    return provenance
