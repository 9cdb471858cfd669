"""The content-addressed store beside a run set's log (`runs/<run set>/blobs/<sha256>`): large
diffs and recorded model calls. A blob is written once, atomically, under its own SHA-256;
`membench replay --verify` checks that each one still hashes to its name."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path


def put_blob(blob_dir: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    target = Path(blob_dir) / digest
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".{digest}.{uuid.uuid4().hex}")
        staging.write_bytes(data)
        staging.replace(target)
    return digest


def get_blob(blob_dir: Path, digest: str) -> bytes | None:
    """The blob's bytes when it exists and still hashes to `digest`, else None."""
    try:
        data = (Path(blob_dir) / digest).read_bytes()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == digest else None
