"""Reading an events.avro log for replay at decode speed: the Avro container file's
blocks parsed here, each datum kept as the exact bytes it was written as.

Why not fastavro's file reader: replay needs each event's datum (its hash covers those bytes, so
hashing them avoids re-encoding the event), and `replay --jobs N` needs to pass over the events of
the runs another worker owns without decoding them. So:

- `blocks(path)` yields each block's records region after checking its sync marker; the log is
  uncompressed (`membench/bus/ocf.py`), so a block is its datums back to back.
- `decode_block` decodes every datum of a block with fastavro (the writer schema with its logical
  types removed, so `ts` stays the integer the `Event` holds) and cuts out its bytes.
- `compile_skipper(schema)` generates a function that walks a datum of that schema to its end
  without building any object (≈ 3× cheaper than decoding it); `run_of(datum)` reads the run id
  from the envelope's third field. A worker of `replay --jobs N` skips the datums of runs it does
  not own and decodes its own.

A block that does not decode to exactly its declared size, or whose sync marker differs from the
header's, raises `BlockError` naming its byte offset: nothing of it is used.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastavro import schemaless_reader
from fastavro.read import reader as avro_reader

from membench.schemas.codec import plain_parsed, read_long
from membench.schemas.registry import SchemaVersion
from membench.schemas.writers import writer_schema


class BlockError(ValueError):
    """A block that cannot be trusted (bad sync marker, truncated, undecodable)."""

    def __init__(self, offset: int, reason: str):
        super().__init__(reason)
        self.offset = offset


def run_of(datum: bytes, pos: int = 0) -> str:
    """The run id of an event datum starting at `pos` (envelope: event_id, run_set, run_id, …)."""
    for _ in range(2):
        n, pos = read_long(datum, pos)
        pos += n
    n, pos = read_long(datum, pos)
    return datum[pos:pos + n].decode()


def run_and_seq(datum: bytes, pos: int = 0) -> tuple[str, int]:
    """(run id, seq) of an event datum (envelope: event_id, run_set, run_id, unit_id, session_index, seq)."""
    run_id = run_of(datum, pos)
    for _ in range(4):
        n, pos = read_long(datum, pos)
        pos += n
    _, pos = read_long(datum, pos)  # session_index
    seq, _ = read_long(datum, pos)
    return run_id, seq


class LogFile:
    """An Avro container log: its writer schema, the decoder and skipper for it, its blocks."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as handle:
            try:
                header = avro_reader(handle)
            except Exception as exc:  # not an Avro container file at all
                raise BlockError(0, f"{self.path}: not a readable Avro log ({type(exc).__name__}: {exc})") from None
            self.header_end = handle.tell()
            self.sync = header._header["sync"]
            codec = header._header["meta"].get("avro.codec", b"null")
            self.schema: SchemaVersion = writer_schema(header.writer_schema)
        # membench writes uncompressed logs; a log re-packed with deflate (by any Avro tool) still reads
        if codec not in (b"null", b"", b"deflate"):
            raise BlockError(0, f"{self.path}: avro.codec {codec.decode(errors='replace')!r} is not supported "
                                "(null or deflate)")
        self._deflate = codec == b"deflate"
        self._decoder = plain_parsed(self.schema)
        self._skip: Callable[[bytes, int], int] | None = None

    @property
    def skip(self) -> Callable[[bytes, int], int]:
        if self._skip is None:
            self._skip = compile_skipper(self.schema.schema_json)
        return self._skip

    def blocks(self) -> Iterator[tuple[int, int, bytes]]:
        """(byte offset, record count, records region) of every block, in file order."""
        with open(self.path, "rb") as handle:
            handle.seek(self.header_end)
            while True:
                offset = handle.tell()
                head = handle.read(20)  # two varints at most 10 bytes each
                if not head:
                    return
                try:
                    count, pos = read_long(head, 0)
                    size, pos = read_long(head, pos)
                except IndexError:
                    raise BlockError(offset, "a block header cut short") from None
                if count < 0 or size < 0:
                    raise BlockError(offset, f"a block header with count {count}, size {size}")
                handle.seek(offset + pos)
                data = handle.read(size)
                marker = handle.read(16)
                if len(data) < size or marker != self.sync:
                    raise BlockError(offset, "the block's sync marker is not the file's (damaged or cut short)")
                if self._deflate:
                    try:
                        data = zlib.decompress(data, -15)
                    except zlib.error as exc:
                        raise BlockError(offset, f"deflate: {exc}") from None
                yield offset, count, data

    def decode_block(self, offset: int, count: int, data: bytes) -> list[tuple[dict[str, Any], bytes]]:
        """Every (record, datum) of a block; BlockError unless the datums fill it exactly."""
        buf = io.BytesIO(data)
        out = []
        start = 0
        try:
            for _ in range(count):
                record: Any = schemaless_reader(buf, self._decoder, None)  # an Event record
                end = buf.tell()
                out.append((record, data[start:end]))
                start = end
        except Exception as exc:  # fastavro raises many types on corrupt data
            raise BlockError(offset, f"{type(exc).__name__}: {exc}") from None
        if start != len(data):
            raise BlockError(offset, f"{len(data) - start} bytes after the block's {count} datums")
        return out

    def decode_one(self, data: bytes, start: int) -> dict[str, Any]:
        buf = io.BytesIO(data)
        buf.seek(start)
        return schemaless_reader(buf, self._decoder, None)  # type: ignore[return-value]  # an Event record

    def datum_bounds(self, offset: int, count: int, data: bytes) -> list[tuple[int, int]]:
        """(start, end) of every datum of a block, by the skipper; BlockError unless they fill it."""
        skip = self.skip
        out = []
        pos = 0
        try:
            for _ in range(count):
                end = skip(data, pos)
                if end > len(data) or end <= pos:
                    raise IndexError("datum past the block's end")
                out.append((pos, end))
                pos = end
        except (IndexError, KeyError, TypeError) as exc:
            raise BlockError(offset, f"{type(exc).__name__}: {exc}") from None
        if pos != len(data):
            raise BlockError(offset, f"{len(data) - pos} bytes after the block's {count} datums")
        return out


# ------------------------------------------------------------------------------------- the skipper

# the generated code reads lengths and union indexes with membench.schemas.codec.read_long (as `_varint`)
_PRELUDE = '''
def _long(b, p):
    while b[p] & 0x80:
        p += 1
    return p + 1


def _str(b, p):
    n, p = _varint(b, p)
    if n < 0:
        raise IndexError("negative length")
    return p + n


def _null(b, p):
    return p


def _bool(b, p):
    return p + 1


def _f4(b, p):
    return p + 4


def _f8(b, p):
    return p + 8
'''

_PRIMITIVE = {"null": "_null", "boolean": "_bool", "int": "_long", "long": "_long", "float": "_f4",
              "double": "_f8", "bytes": "_str", "string": "_str"}
# one-byte fast paths inlined in a record's body: a string/bytes shorter than 64 bytes, a small int
_INLINE = {"_str": "    x = b[p]\n    p = p + 1 + (x >> 1) if x < 0x80 else _str(b, p)",
           "_long": "    p = p + 1 if b[p] < 0x80 else _long(b, p)"}


def compile_skipper(schema_json: dict[str, Any]) -> Callable[[bytes, int], int]:
    """skip(buf, pos) -> the position after the datum of `schema_json` that starts at pos.

    Generated Python (one function per record, union and array/map), so walking a datum calls no
    generic interpreter of the schema. Malformed data raises IndexError (past the end) or yields a
    position the caller checks against the block's size."""
    defs: list[str] = []
    tables: list[str] = []
    named: dict[str, str] = {}  # full name -> generated function
    counter = [0]

    def fresh(prefix: str) -> str:
        counter[0] += 1
        return f"_{prefix}{counter[0]}"

    def full_name(name: str, ns: str | None) -> str:
        return name if "." in name or not ns else f"{ns}.{name}"

    def skipper(node: Any, ns: str | None) -> str:
        if isinstance(node, str):
            if node in _PRIMITIVE:
                return _PRIMITIVE[node]
            key = full_name(node, ns)
            return named[key] if key in named else named[node]
        if isinstance(node, list):
            name, table = fresh("u"), fresh("B")
            branches = [skipper(b, ns) for b in node]
            tables.append(f"{table} = ({', '.join(branches)},)")
            defs.append(f"def {name}(b, p):\n    i, p = _varint(b, p)\n    return {table}[i](b, p)")
            return name
        kind = node["type"]
        if kind in ("record", "error", "enum", "fixed"):
            node_ns = node.get("namespace", ns) if "." not in node["name"] else node["name"].rsplit(".", 1)[0]
            key = full_name(node["name"], ns if "namespace" not in node else node["namespace"])
            if kind == "enum":
                named[key] = named.setdefault(node["name"], "_long")
                return "_long"
            name = fresh("r")
            named[key] = name
            named.setdefault(node["name"], name)
            if kind == "fixed":
                defs.append(f"def {name}(b, p):\n    return p + {int(node['size'])}")
                return name
            body = []
            for field in node["fields"]:
                inner = skipper(field["type"], node_ns)
                body.append(_INLINE.get(inner, f"    p = {inner}(b, p)"))
            defs.append(f"def {name}(b, p):\n" + "\n".join(body or ["    pass"]) + "\n    return p")
            return name
        if kind in ("array", "map"):
            inner = skipper(node["items"] if kind == "array" else node["values"], ns)
            name = fresh("a")
            key_skip = "            p = _str(b, p)\n" if kind == "map" else ""
            defs.append(f"def {name}(b, p):\n    while True:\n        n, p = _varint(b, p)\n        if n == 0:\n"
                        f"            return p\n        if n < 0:\n            s, p = _varint(b, p)\n"
                        f"            p += s\n            continue\n        for _ in range(n):\n{key_skip}"
                        f"            p = {inner}(b, p)")
            return name
        return skipper(kind, ns)  # {"type": "string", "logicalType": ...} and the like

    top = skipper(schema_json, schema_json.get("namespace"))
    source = _PRELUDE + "\n\n" + "\n\n\n".join(defs) + "\n\n" + "\n".join(tables) + f"\nSKIP = {top}\n"
    env: dict[str, Any] = {"_varint": read_long}
    exec(compile(source, f"<avro skipper {schema_json.get('name')}>", "exec"), env)  # noqa: S102 - our own schema
    return env["SKIP"]
