"""The schema registry: every `.avsc` file shipped in `membench/schemas/avsc/`, keyed by fingerprint."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form

_FILE_NAME = re.compile(r"^(?P<family>[a-z_]+)\.v(?P<version>\d+)\.avsc$")

# CRC-64-AVRO (the Avro specification's "Schema Fingerprints"), little-endian in single-object
# encoding. fastavro computes the same value; this table keeps the hot path free of hex parsing.
_EMPTY = 0xC15D213AA4D7A795
_TABLE = []
for _i in range(256):
    _fp = _i
    for _ in range(8):
        _fp = (_fp >> 1) ^ (_EMPTY & -(_fp & 1))
    _TABLE.append(_fp)


def crc64_avro(data: bytes) -> int:
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


@dataclass(frozen=True)
class SchemaVersion:
    family: str  # "event", "derived", ...
    version: int
    schema_json: dict[str, Any]
    parsed: Any  # fastavro parsed schema
    canonical: str  # Parsing Canonical Form
    fingerprint: bytes  # 8 bytes, little-endian CRC-64-AVRO of the canonical form

    @property
    def fingerprint_hex(self) -> str:
        return self.fingerprint.hex()


def load_schema(schema_json: dict[str, Any], family: str = "adhoc", version: int = 0) -> SchemaVersion:
    canonical = to_parsing_canonical_form(schema_json)
    fingerprint = crc64_avro(canonical.encode("utf-8")).to_bytes(8, "little")
    parsed = fastavro.parse_schema(schema_json, named_schemas={})
    return SchemaVersion(family, version, schema_json, parsed, canonical, fingerprint)


class Registry:
    """All known schema versions; `latest(family)` is what producers write."""

    def __init__(self, versions: list[SchemaVersion]):
        self._by_fingerprint = {v.fingerprint: v for v in versions}
        self._by_family: dict[str, list[SchemaVersion]] = {}
        for v in sorted(versions, key=lambda v: (v.family, v.version)):
            self._by_family.setdefault(v.family, []).append(v)

    def families(self) -> list[str]:
        return sorted(self._by_family)

    def versions(self, family: str) -> list[SchemaVersion]:
        return list(self._by_family[family])

    def latest(self, family: str) -> SchemaVersion:
        return self._by_family[family][-1]

    def by_fingerprint(self, fingerprint: bytes) -> SchemaVersion | None:
        return self._by_fingerprint.get(fingerprint)

    def all(self) -> list[SchemaVersion]:
        return [v for family in self.families() for v in self._by_family[family]]


@functools.cache
def default_registry() -> Registry:
    versions = []
    for entry in sorted(resources.files("membench.schemas").joinpath("avsc").iterdir(), key=lambda e: e.name):
        match = _FILE_NAME.match(entry.name)
        if not match:
            continue
        schema_json = json.loads(entry.read_text(encoding="utf-8"))
        versions.append(load_schema(schema_json, match["family"], int(match["version"])))
    return Registry(versions)
