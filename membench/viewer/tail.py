"""Reading a run set's Avro container log incrementally while a run appends to it.

`membench run` appends whole blocks (count, size, datums, sync marker) to `events.avro`
(membench/bus/ocf.py) and fsyncs each one; a reader can therefore meet, at the end of the file, a
block whose bytes are not all there yet. `LogTail.poll` decodes every complete block after the last
one it returned and stops before an incomplete one, remembering the byte offset where that block
starts: the next poll begins there. It never writes the file and takes no lock.

A block is complete when its header, its `size` bytes of data and the 16-byte sync marker are all in
the file. A complete block whose sync marker is wrong, or whose data does not decode, is damage, not
a write in progress: the tail stops there and says where (`error`). A file that shrank below the
offset, or was replaced (another inode), is read again from its start (`poll` reports `reset`).
"""

from __future__ import annotations

import io
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader

from membench.schemas.events import Event
from membench.schemas.registry import SchemaVersion
from membench.schemas.writers import writer_schema

_MAGIC = b"Obj\x01"
_SYNC = 16
_MAX_BLOCK_HEADER = 20  # two zig-zag longs


class _Short(Exception):
    """Not enough bytes yet."""


class _Damaged(Exception):
    """Complete but wrong: the tail stops here."""


def _read_long(buf: bytes, at: int) -> tuple[int, int]:
    """(value, next offset) of the zig-zag varint at `at`; _Short when the buffer ends inside it."""
    shift = result = 0
    while True:
        if at >= len(buf):
            raise _Short()
        byte = buf[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def _read_bytes(buf: bytes, at: int) -> tuple[bytes, int]:
    size, at = _read_long(buf, at)
    if size < 0:
        raise ValueError("negative length")
    if at + size > len(buf):
        raise _Short()
    return buf[at:at + size], at + size


@dataclass
class Block:
    offset: int  # byte offset of the block in the file (a TopicLog: the batch's index)
    events: list[Event]
    schemas: list[SchemaVersion] | None = None  # each event's writer schema; None: the header's


@dataclass
class Poll:
    reset: bool = False  # the file was replaced or cut: everything returned before is void
    blocks: list[Block] = field(default_factory=list)


class LogTail:
    """Incremental reader of one Avro object container file (null or deflate codec)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._clear()

    def _clear(self) -> None:
        self.schema: SchemaVersion | None = None  # the writer schema named in the header
        self._parsed: Any = None  # fastavro's parsed form of the schema
        self._codec = "null"
        self._sync = b""
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file being read
        self.offset = 0  # where the next unread block starts (0: the header is not read yet)
        self.size = 0  # the file's size at the last poll
        self.mtime = 0.0  # the file's modification time at the last poll (seconds since the epoch)
        self.blocks = 0
        self.events = 0
        self.error: str | None = None

    @property
    def pending_bytes(self) -> int:
        """Bytes after the last complete block: a block being written (or a crash's leftover)."""
        return max(0, self.size - self.offset) if self.offset else self.size

    def poll(self) -> Poll:
        out = Poll()
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if self._identity is not None:
                self._clear()
                out.reset = True
            return out
        identity = (stat.st_dev, stat.st_ino)
        if self._identity is not None and (identity != self._identity or stat.st_size < self.offset):
            self._clear()
            out.reset = True
        self._identity = identity
        self.size, self.mtime = stat.st_size, stat.st_mtime
        if self.error is not None:
            return out
        with open(self.path, "rb") as handle:
            if not self.offset and not self._read_header(handle):
                return out
            while True:
                block = self._next_block(handle)
                if block is None:
                    break
                out.blocks.append(block)
        return out

    def _read_header(self, handle) -> bool:
        data = handle.read(min(self.size, 1 << 20))
        try:
            if len(data) < len(_MAGIC):
                raise _Short()
            if data[:4] != _MAGIC:
                self.error = "not an Avro object container file"
                return False
            at, meta = 4, {}
            while True:
                count, at = _read_long(data, at)
                if count == 0:
                    break
                if count < 0:
                    _, at = _read_long(data, at)
                    count = -count
                for _ in range(count):
                    key, at = _read_bytes(data, at)
                    value, at = _read_bytes(data, at)
                    meta[key.decode()] = value
            if at + _SYNC > len(data):
                raise _Short()
            sync = data[at:at + _SYNC]
        except _Short:
            if self.size >= 1 << 20:
                self.error = "the header is larger than 1 MiB"
            return False  # the header is still being written
        except ValueError as exc:
            self.error = f"unreadable header ({exc})"
            return False
        codec = meta.get("avro.codec", b"null").decode()
        if codec not in ("null", "deflate"):
            self.error = f"codec {codec!r} is not supported by the viewer (null, deflate)"
            return False
        try:
            schema_json = json.loads(meta["avro.schema"].decode())
            self.schema = writer_schema(schema_json)
            self._parsed = parse_schema(schema_json)
        except Exception as exc:  # noqa: BLE001 - any malformed schema is the same problem
            self.error = f"unreadable writer schema ({type(exc).__name__}: {exc})"
            return False
        self._codec, self._sync, self.offset = codec, sync, at + _SYNC
        return True

    def _next_block(self, handle) -> Block | None:
        try:
            block, end = self._block_at(handle, self.offset, self.size)
        except _Short:
            return None  # a block still being written: wait for the rest
        except _Damaged as exc:
            self.error = str(exc)
            return None
        self.offset = end
        self.blocks += 1
        self.events += len(block.events)
        return block

    def _block_at(self, handle, start: int, size_limit: int) -> tuple[Block, int]:
        """The block at `start` and the offset after it; _Short when it is not all in the first
        `size_limit` bytes of the file, _Damaged when it is there but wrong."""
        if start >= size_limit:
            raise _Short()
        handle.seek(start)
        head = handle.read(_MAX_BLOCK_HEADER)
        try:
            count, at = _read_long(head, 0)
            size, at = _read_long(head, at)
        except ValueError as exc:
            raise _Damaged(f"damaged block header at byte {start} ({exc})") from None
        if count < 0 or size < 0:
            raise _Damaged(f"damaged block header at byte {start} (negative count or size)")
        end = start + at + size + _SYNC
        if end > size_limit:
            raise _Short()
        handle.seek(start + at)
        data = handle.read(size)
        sync = handle.read(_SYNC)
        if len(data) < size or len(sync) < _SYNC:
            raise _Short()  # the file was cut under us; the next poll sees its new size
        if sync != self._sync:
            raise _Damaged(f"damaged block at byte {start} (sync marker does not match)")
        try:
            if self._codec == "deflate":
                data = zlib.decompress(data, -15)
            stream = io.BytesIO(data)
            events = [Event.from_record(schemaless_reader(stream, self._parsed, None))  # type: ignore[arg-type]
                      for _ in range(count)]  # (fastavro's reader returns any Avro value; these are Event records)
        except Exception as exc:  # noqa: BLE001 - whatever fastavro raises, the block is damaged
            raise _Damaged(f"undecodable block at byte {start} ({type(exc).__name__}: {exc})") from None
        return Block(start, events), end

    def read_block(self, offset: int) -> list[Event]:
        """The events of a block an earlier `poll` returned (at byte `offset`), read again; empty when
        the file no longer holds it whole and intact."""
        if self._parsed is None:
            return []
        try:
            with open(self.path, "rb") as handle:
                block, _ = self._block_at(handle, offset, os.fstat(handle.fileno()).st_size)
        except (OSError, _Short, _Damaged):
            return []
        return block.events
