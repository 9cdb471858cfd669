"""The compiled encoder must write exactly the bytes fastavro writes."""

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.codec import constant_fields_encoder, encode_datum, encode_datum_reference
from schemas.fastcodec import compile_encoder
from schemas.registry import default_registry
from tests.processors.test_verdicts import build_run

texts = st.text(max_size=40)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_every_event_kind_of_a_run_encodes_identically():
    schema = default_registry().latest("event")
    for event in build_run():
        record = event.to_record()
        assert encode_datum(schema, record) == encode_datum_reference(schema, record)


@settings(max_examples=200, deadline=None)
@given(text=texts, number=longs, flag=st.booleans(), maybe=st.one_of(st.none(), texts),
       items=st.lists(texts, max_size=5), mapping=st.dictionaries(texts, longs, max_size=4), x=st.floats(allow_nan=False))
def test_random_values_encode_identically(text, number, flag, maybe, items, mapping, x):
    schema = {"type": "record", "name": "R", "namespace": "t", "fields": [
        {"name": "s", "type": "string"}, {"name": "n", "type": "long"}, {"name": "b", "type": "boolean"},
        {"name": "o", "type": ["null", "string"]}, {"name": "a", "type": {"type": "array", "items": "string"}},
        {"name": "m", "type": {"type": "map", "values": "long"}}, {"name": "d", "type": "double"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["x", "y"]}},
        {"name": "u", "type": ["null", {"type": "record", "name": "Inner", "fields": [{"name": "v", "type": "long"}]},
                               {"type": "record", "name": "Other", "fields": [{"name": "w", "type": "string"}]}]},
        {"name": "dflt", "type": "long", "default": 7},
    ]}
    record = {"s": text, "n": number, "b": flag, "o": maybe, "a": items, "m": mapping, "d": x,
              "e": "y" if flag else "x", "u": ("t.Other", {"w": text}) if flag else ("t.Inner", {"v": number})}
    import io

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    assert compile_encoder(schema)(record) == buf.getvalue()


def test_constant_fields_encoder_writes_the_bytes_of_the_whole_record():
    schema = default_registry().latest("event")
    for event in build_run():
        record = event.to_record()
        constants = {name: record.pop(name) for name in ("run_set", "run_id", "unit_id", "producer")}
        encode = constant_fields_encoder(schema, constants)
        assert encode(record) == encode_datum(schema, {**record, **constants})


def test_constant_fields_must_be_fields_of_the_record():
    schema = default_registry().latest("event")
    with pytest.raises(ValueError, match="not fields of Event"):
        constant_fields_encoder(schema, {"run_id": "r", "runid": "typo"})

