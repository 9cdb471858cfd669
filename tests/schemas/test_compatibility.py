"""Every schema version must read data written with any older one (Avro schema resolution),
checked with the Avro project's own compatibility checker and with real datums through fastavro.

The versions come from the `.avsc` files themselves (`<family>.v<N>.avsc`), not from a list here,
so a new version is checked as soon as its file exists."""

from __future__ import annotations

import copy
import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import avro.schema
import fastavro
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType
from fastavro.read import SchemaResolutionError
from fastavro.schema import expand_schema

from membench.schemas import default_registry

AVSC = Path(__file__).resolve().parents[2] / "membench" / "schemas" / "avsc"
FILE_NAME = re.compile(r"^(?P<family>[a-z_]+)\.v(?P<version>\d+)\.avsc$")


def _versions() -> dict[str, dict[int, dict]]:
    """{family: {version: schema JSON}} for every .avsc file."""
    out: dict[str, dict[int, dict]] = {}
    for path in sorted(AVSC.glob("*.avsc")):
        match = FILE_NAME.match(path.name)
        assert match, f"{path.name} does not follow <family>.v<N>.avsc"
        out.setdefault(match["family"], {})[int(match["version"])] = json.loads(path.read_text(encoding="utf-8"))
    return out


VERSIONS = _versions()
PAIRS = [(family, old, new) for family, by in VERSIONS.items() for old in by for new in by if old < new]
IDS = [f"{family}.v{old}->v{new}" for family, old, new in PAIRS]


def _compatible(reader: dict, writer: dict) -> bool:
    result = ReaderWriterCompatibilityChecker().get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer)))
    return result.compatibility is SchemaCompatibilityType.compatible


def test_versions_are_discovered_and_contiguous():
    # an empty or gappy discovery would silently shrink PAIRS (an empty parametrize only skips)
    assert {"event", "derived"} <= set(VERSIONS) and PAIRS, VERSIONS.keys()
    for family, by in VERSIONS.items():
        assert sorted(by) == list(range(1, len(by) + 1)), (family, sorted(by))
        assert [v.version for v in default_registry().versions(family)] == sorted(by), family


@pytest.mark.parametrize("family,old,new", PAIRS, ids=IDS)
def test_each_version_reads_older_versions(family, old, new):
    assert _compatible(VERSIONS[family][new], VERSIONS[family][old])


# ---------------------------------------------------------------------------- real datums
_PRIMITIVE = {"null": None, "boolean": True, "int": 7, "long": 1 << 40, "float": 0.5, "double": 0.25,
              "string": "s", "bytes": b"b"}


def _sample(node):
    """A valid value for an expanded schema node (a union takes its first non-null branch, a
    record branch in tuple notation so fastavro writes exactly that branch)."""
    if isinstance(node, str):
        return _PRIMITIVE[node]
    if isinstance(node, list):
        branch = next(b for b in node if b != "null")
        return (branch["name"], _sample(branch)) if isinstance(branch, dict) and branch["type"] == "record" \
            else _sample(branch)
    kind = node["type"]
    if node.get("logicalType") == "timestamp-micros":
        return datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
    if kind == "record":
        return {f["name"]: _sample(f["type"]) for f in node["fields"]}
    if kind == "enum":
        return node["symbols"][-1]
    if kind == "array":
        return [_sample(node["items"])]
    if kind == "map":
        return {"k": _sample(node["values"])}
    if kind == "fixed":
        return b"\0" * node["size"]
    return _sample(kind)


def _datums(schema: dict) -> list:
    """One record per branch of each union of records (the event payloads): every type gets written."""
    expanded = expand_schema(schema)
    base = _sample(expanded)
    out = [base]
    for f in expanded["fields"]:
        if isinstance(f["type"], list):
            for branch in f["type"]:
                if isinstance(branch, dict) and branch["type"] == "record":
                    out.append({**base, f["name"]: (branch["name"], _sample(branch))})
    return out


def _contains(read, written) -> bool:
    """Everything written came back (the reader may add fields, filled from their defaults)."""
    if isinstance(written, tuple):
        return isinstance(read, tuple) and read[0] == written[0] and _contains(read[1], written[1])
    if isinstance(written, dict):
        return isinstance(read, dict) and all(k in read and _contains(read[k], v) for k, v in written.items())
    if isinstance(written, list):
        return isinstance(read, list) and len(read) == len(written) and all(map(_contains, read, written))
    return read == written


def _roundtrip(writer: dict, reader: dict, datum) -> object:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(writer, named_schemas={}), datum)
    buf.seek(0)
    return fastavro.schemaless_reader(buf, fastavro.parse_schema(writer, named_schemas={}),
                                      fastavro.parse_schema(reader, named_schemas={}), return_record_name=True)


@pytest.mark.parametrize("family,old,new", PAIRS, ids=IDS)
def test_datums_written_with_an_older_version_read_with_the_newer(family, old, new):
    writer, reader = VERSIONS[family][old], VERSIONS[family][new]
    datums = _datums(writer)
    assert len(datums) > 2, "no union of records found to vary"
    for datum in datums:
        read = _roundtrip(writer, reader, datum)
        assert _contains(read, datum), (datum, read)


# ---------------------------------------------------------------------------- negative controls
def _field_without_default(schema: dict) -> dict:
    broken = copy.deepcopy(schema)
    broken["fields"].append({"name": "tenant", "type": "string"})
    return broken


def _retyped_field(schema: dict) -> dict:
    broken = copy.deepcopy(schema)
    field = next(f for f in broken["fields"] if f["type"] == "string")
    field["type"] = "int"
    return broken


@pytest.mark.parametrize("family", sorted(VERSIONS))
@pytest.mark.parametrize("breakage", [_field_without_default, _retyped_field])
def test_an_incompatible_change_is_rejected(family, breakage):
    """The checks can fail: a field added without a default, or a string field turned int, cannot
    read old data — the checker says so and resolving a real datum raises."""
    latest = VERSIONS[family][max(VERSIONS[family])]
    broken = breakage(latest)
    assert _compatible(latest, latest)  # the checker is not simply saying "no"
    assert not _compatible(broken, latest)
    with pytest.raises(SchemaResolutionError):
        _roundtrip(latest, broken, _datums(latest)[0])
