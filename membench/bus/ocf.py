"""An append-only Avro object container file written from already-encoded datums.

Events are encoded once (when their hash is sealed); this writer frames those datums into OCF
blocks (count, size, datums, sync marker) without re-encoding, uncompressed so that a damaged
byte stays local to one event. Any Avro reader opens the file. Reopening an existing file appends
blocks after its last complete sync marker, so a crash mid-block never hides earlier blocks.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from fastavro.read import reader as avro_reader
from fastavro.schema import to_parsing_canonical_form

from membench.schemas.registry import SchemaVersion

_MAGIC = b"Obj\x01"


def _zigzag_long(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes(value: bytes) -> bytes:
    return _zigzag_long(len(value)) + value


class OcfAppender:
    def __init__(self, path: Path, schema: SchemaVersion, block_records: int = 1000):
        self.path = Path(path)
        self._schema = schema
        self._block: list[bytes] = []
        self._block_records = block_records
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > 0:
            self._sync = self._existing_sync_marker()
            self._file = open(self.path, "ab")
        else:
            self._sync = os.urandom(16)
            self._file = open(self.path, "wb")
            self._file.write(self._header())
            self._file.flush()
            os.fsync(self._file.fileno())

    def _header(self) -> bytes:
        meta = {
            "avro.schema": json.dumps(self._schema.schema_json, separators=(",", ":")).encode(),
            "avro.codec": b"null",
        }
        out = io.BytesIO()
        out.write(_MAGIC)
        out.write(_zigzag_long(len(meta)))
        for key, value in meta.items():
            out.write(_bytes(key.encode()))
            out.write(_bytes(value))
        out.write(_zigzag_long(0))
        out.write(self._sync)
        return out.getvalue()

    def _existing_sync_marker(self) -> bytes:
        with open(self.path, "rb") as handle:
            header = avro_reader(handle)._header
        stored = json.loads(header["meta"]["avro.schema"].decode())
        if to_parsing_canonical_form(stored) != self._schema.canonical:
            raise ValueError(f"{self.path}: written with another schema; refusing to append")
        sync = header["sync"]
        # A file cut mid-block (crash) is truncated back to its last complete sync marker.
        data = self.path.read_bytes()
        end = data.rfind(sync) + len(sync)
        if end < len(data):
            with open(self.path, "r+b") as handle:
                handle.truncate(end)
        return sync

    def append(self, datum: bytes) -> None:
        self._block.append(datum)
        if len(self._block) >= self._block_records:
            self.flush()

    def flush(self) -> None:
        if not self._block:
            return
        payload = b"".join(self._block)
        self._file.write(_zigzag_long(len(self._block)) + _zigzag_long(len(payload)) + payload + self._sync)
        self._file.flush()
        os.fsync(self._file.fileno())
        self._block = []

    def close(self) -> None:
        self.flush()
        self._file.close()
