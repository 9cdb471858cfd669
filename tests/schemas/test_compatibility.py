"""Every schema version must read data written with the previous one (Avro schema resolution),
checked with the Avro project's own compatibility checker."""

import json

import avro.schema
import pytest
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from schemas import default_registry


def _compatible(reader: dict, writer: dict) -> bool:
    result = ReaderWriterCompatibilityChecker().get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer)))
    return result.compatibility is SchemaCompatibilityType.compatible


PAIRS = [
    (family, older, newer)
    for family in default_registry().families()
    for older, newer in zip(default_registry().versions(family), default_registry().versions(family)[1:])
]


@pytest.mark.parametrize("family,older,newer", PAIRS, ids=[f"{f}.v{o.version}->v{n.version}" for f, o, n in PAIRS])
def test_each_version_reads_its_predecessor(family, older, newer):
    assert _compatible(newer.schema_json, older.schema_json)


@pytest.mark.parametrize("family", default_registry().families())
def test_newest_version_reads_itself(family):
    latest = default_registry().latest(family).schema_json
    assert _compatible(latest, latest)


def test_checker_rejects_a_field_added_without_default():
    """The check can fail: a new envelope field without a default breaks old data."""
    latest = default_registry().latest("event").schema_json
    broken = json.loads(json.dumps(latest))
    broken["fields"].append({"name": "tenant", "type": "string"})
    assert not _compatible(broken, latest)
