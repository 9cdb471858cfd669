"""`membench/schemas/payloads.py` is the newest event schema's payload records as TypedDicts (docs/design.md §3,
"Typed payloads"): it is regenerated here and compared, and checked against every shipped version,
so a schema change without regenerating, or a hand edit, fails."""

from __future__ import annotations

import typing

from membench.schemas import default_registry, payloads
from membench.schemas.events import RAW_KINDS
from membench.schemas.payload_types import TARGET, render

EVENT_VERSIONS = default_registry().versions("event")


def _records(schema) -> dict[str, dict]:
    """Every named record of a schema JSON, nested ones too, by name."""
    out: dict[str, dict] = {}

    def walk(node) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch)
        elif isinstance(node, dict):
            if node.get("type") == "record":
                out[node["name"]] = node
                for f in node["fields"]:
                    walk(f["type"])
            elif node.get("type") == "array":
                walk(node["items"])
            elif node.get("type") == "map":
                walk(node["values"])

    walk(next(f for f in schema["fields"] if f["name"] == "payload")["type"])
    return out


def test_the_module_is_what_the_newest_schema_generates():
    assert TARGET.read_text(encoding="utf-8") == render(), (
        "membench/schemas/payloads.py is stale or edited by hand: run `python -m membench.schemas.payload_types`")
    assert payloads.SCHEMA_VERSION == EVENT_VERSIONS[-1].version


def test_each_typeddict_has_the_newest_records_fields_in_order_and_its_defaults():
    newest = _records(EVENT_VERSIONS[-1].schema_json)
    for name, record in newest.items():
        td = getattr(payloads, name)
        assert typing.is_typeddict(td)
        assert list(td.__annotations__) == [f["name"] for f in record["fields"]], name
        defaults = {f["name"]: f["default"] for f in record["fields"] if "default" in f}
        assert payloads.DEFAULTS.get(name, {}) == defaults, name
        assert td.__optional_keys__ == frozenset(defaults), name  # NotRequired exactly where a default is
        assert td.__required_keys__ == frozenset(td.__annotations__) - frozenset(defaults), name


def test_every_kind_has_its_payload_type():
    union = next(f for f in EVENT_VERSIONS[-1].schema_json["fields"] if f["name"] == "payload")["type"]
    assert list(payloads.PAYLOADS) == [b["name"] if isinstance(b, dict) else b.rsplit(".", 1)[-1] for b in union]
    assert set(RAW_KINDS) <= set(payloads.PAYLOADS)
    assert all(payloads.PAYLOADS[k] is getattr(payloads, k) for k in payloads.PAYLOADS)


def test_every_shipped_version_reads_as_the_declared_types():
    """A field of an older version is declared; a field added later has a default, so an old log
    decodes to a payload with every declared key (what lets processors index the required ones)."""
    for version in EVENT_VERSIONS:
        for name, record in _records(version.schema_json).items():
            declared = getattr(payloads, name).__annotations__
            fields = {f["name"] for f in record["fields"]}
            assert fields <= set(declared), (version.version, name, fields - set(declared))
            for missing in set(declared) - fields:
                assert missing in payloads.DEFAULTS.get(name, {}), (version.version, name, missing)


def test_a_decoded_event_carries_every_declared_field():
    from membench.schemas.codec import decode, encode
    from membench.schemas.events import Event, bounded_text

    latest = default_registry().latest("event")
    turn = Event("e", "rs", "r", "u", 0, 0, 0, "test", "Turn", "agent", "0" * 64,
                 {"role": "agent", "text": bounded_text("x")})  # the defaulted fields omitted, as a producer may
    _, record = decode(encode(latest, turn.to_record()), plain=True)
    payload = Event.from_record(record).payload
    assert set(payload) == set(payloads.Turn.__annotations__)
    assert {k: payload[k] for k in payloads.DEFAULTS["Turn"]} == payloads.DEFAULTS["Turn"]
