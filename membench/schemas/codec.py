"""Avro single-object encoding (Avro spec, "Single-object encoding").

A message is `C3 01` + the writer schema's 8-byte little-endian CRC-64-AVRO fingerprint + the
Avro binary datum, so every message names its schema without a registry server. Decoding looks
the fingerprint up in the shipped registry and resolves the datum to the newest version of its
family (Avro schema resolution), so old messages stay readable.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from membench.schemas.fastcodec import ConstantFieldsEncoder, compile_encoder
from membench.schemas.registry import Registry, SchemaVersion, default_registry

MAGIC = b"\xc3\x01"
HEADER_SIZE = 10


class DecodeError(ValueError):
    """A message that is not a single-object Avro datum of a known schema."""


_ENCODERS: dict[bytes, Any] = {}


def encode_datum(schema: SchemaVersion, record: dict[str, Any]) -> bytes:
    """Avro binary datum, by the schema's compiled encoder (byte-identical to fastavro's)."""
    encoder = _ENCODERS.get(schema.fingerprint)
    if encoder is None:
        encoder = _ENCODERS[schema.fingerprint] = compile_encoder(schema.schema_json)
    try:
        return encoder(record)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"record does not match schema {schema.family}.v{schema.version}: "
                         f"{type(exc).__name__}: {exc}") from exc


_CONSTANT_ENCODERS: dict[tuple[bytes, tuple[str, ...]], ConstantFieldsEncoder] = {}


def constant_fields_encoder(schema: SchemaVersion, values: dict[str, Any]) -> Callable[[dict[str, Any]], bytes]:
    """An encoder for records of `schema` whose fields named in `values` always hold those values:
    they are encoded once here, and the returned f(record) neither reads nor re-encodes them.
    Its output is the bytes `encode_datum` writes for the record with `values` merged in."""
    key = (schema.fingerprint, tuple(sorted(values)))
    compiled = _CONSTANT_ENCODERS.get(key)
    if compiled is None:
        compiled = _CONSTANT_ENCODERS[key] = ConstantFieldsEncoder(schema.schema_json, key[1])
    bound = compiled.bind(values)

    def encode(record: dict[str, Any]) -> bytes:
        try:
            return bound(record)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"record does not match schema {schema.family}.v{schema.version}: "
                             f"{type(exc).__name__}: {exc}") from exc

    return encode


def encode_datum_reference(schema: SchemaVersion, record: dict[str, Any]) -> bytes:
    """The same datum by fastavro (the reference the compiled encoder is tested against)."""
    buf = io.BytesIO()
    schemaless_writer(buf, schema.parsed, record)
    return buf.getvalue()


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """The Avro int or long (zig-zag varint) at `pos` of `buf`: (value, next position). Shared by the
    readers that walk datums without decoding them (the sink's raw stage, replay's log scan)."""
    b = buf[pos]
    pos += 1
    n, shift = b & 0x7F, 7
    while b & 0x80:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def _read_whole(datum: bytes, writer_parsed: Any, reader_parsed: Any = None) -> dict[str, Any]:
    """One record that must fill `datum` exactly."""
    buf = io.BytesIO(datum)
    record: Any = schemaless_reader(buf, writer_parsed, reader_parsed)  # a record: its schemas are records
    if buf.tell() != len(datum):
        raise DecodeError(f"{len(datum) - buf.tell()} trailing bytes after the datum")
    return record


def decode_datum(writer: SchemaVersion, datum: bytes, reader: SchemaVersion | None = None) -> dict[str, Any]:
    if reader is None or reader.fingerprint == writer.fingerprint:
        return _read_whole(datum, writer.parsed)
    return _read_whole(datum, writer.parsed, reader.parsed)


def _without_logical_types(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [_without_logical_types(v) for v in node]
    return node


_PLAIN: dict[bytes, Any] = {}


def plain_parsed(schema: SchemaVersion) -> Any:
    """The schema parsed without its logical types, so `ts` (timestamp-micros, the only one) decodes
    to the integer an `Event` holds instead of a datetime that `Event.from_record` turns back into
    that integer. The same datum, the same `Event`; fastavro's conversion skipped."""
    parsed = _PLAIN.get(schema.fingerprint)
    if parsed is None:
        parsed = _PLAIN[schema.fingerprint] = parse_schema(_without_logical_types(schema.schema_json),
                                                           named_schemas={})
    return parsed


def datum_decoder(schema: SchemaVersion) -> Callable[[bytes], dict[str, Any]]:
    """decode(datum) -> the record as written (no logical types: `ts` an integer), refusing trailing bytes."""
    parsed = plain_parsed(schema)
    return lambda datum: _read_whole(datum, parsed)


def frame(schema: SchemaVersion, datum: bytes) -> bytes:
    return MAGIC + schema.fingerprint + datum


def encode(schema: SchemaVersion, record: dict[str, Any]) -> bytes:
    return frame(schema, encode_datum(schema, record))


def unframe(message: bytes, registry: Registry | None = None) -> tuple[SchemaVersion, bytes]:
    registry = registry or default_registry()
    if len(message) < HEADER_SIZE or message[:2] != MAGIC:
        raise DecodeError("not Avro single-object encoding (missing C3 01 marker)")
    writer = registry.by_fingerprint(bytes(message[2:HEADER_SIZE]))
    if writer is None:
        raise DecodeError(f"unknown schema fingerprint {bytes(message[2:HEADER_SIZE]).hex()}")
    return writer, bytes(message[HEADER_SIZE:])


def decode(message: bytes, registry: Registry | None = None, plain: bool = False) -> tuple[SchemaVersion, dict[str, Any]]:
    """Decode a framed message to (writer schema, record resolved to its family's newest version).
    `plain`: a datum written with the newest version is read without logical types (`plain_parsed`:
    what `Event.from_record` needs, ≈ 4 µs an event cheaper); an older one is resolved as always."""
    registry = registry or default_registry()
    writer, datum = unframe(message, registry)
    try:
        newest = registry.latest(writer.family)
        if plain and newest.fingerprint == writer.fingerprint:
            record = _read_whole(datum, plain_parsed(writer))
        else:
            record = decode_datum(writer, datum, newest)
    except DecodeError:
        raise
    except Exception as exc:  # fastavro raises many types on corrupt data
        raise DecodeError(f"datum does not match schema {writer.family}.v{writer.version}: {exc}") from exc
    return writer, record
