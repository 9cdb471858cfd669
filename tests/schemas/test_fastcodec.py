"""The compiled encoder must write exactly the bytes fastavro writes."""

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from membench.schemas.codec import constant_fields_encoder, encode_datum, encode_datum_reference
from membench.schemas.fastcodec import compile_encoder
from membench.schemas.registry import default_registry
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



def test_a_misspelt_payload_key_is_refused_with_the_kind_and_the_key():
    from membench.bus.emitter import RunEmitter

    published = []
    emitter = RunEmitter("rs", "run", "unit", lambda event, datum: published.append(datum))
    payload = {"call_id": "c1", "name": "edit", "arguments_digest": "a", "is_ptach": True}
    with pytest.raises(ValueError, match=r"ToolCall: unknown field\(s\) 'is_ptach'"):
        emitter.emit("ToolCall", payload)
    assert published == [] and emitter.emitted == []
    # nothing half-done: the next event still takes seq 0 and the genesis link
    event = emitter.emit("ToolCall", {**{k: v for k, v in payload.items() if k != "is_ptach"}, "is_patch": True})
    assert event.seq == 0 and len(published) == 1


def test_fastavro_alone_drops_the_misspelt_key_the_compiled_encoder_refuses():
    # the control: the reference writer encodes the typo as the field's default, silently
    schema = default_registry().latest("event")
    record = next(event for event in build_run() if event.kind == "ToolCall").to_record()
    kind, payload = record["payload"]
    record["payload"] = (kind, {**payload, "is_ptach": True})
    assert encode_datum_reference(schema, record)
    with pytest.raises(ValueError, match="is_ptach"):
        encode_datum(schema, record)
