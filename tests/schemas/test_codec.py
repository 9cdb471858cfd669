import io
import json

import fastavro
import pytest
from fastavro.schema import fingerprint as fastavro_fingerprint

from membench.schemas import default_registry
from membench.schemas.codec import DecodeError, MAGIC, decode, encode
from membench.schemas.events import TEXT_BOUND, bounded_text
from tests.schemas.helpers import sample_event


def test_single_object_frame_names_the_writer_schema():
    schema = default_registry().latest("event")
    message = encode(schema, sample_event().to_record())
    assert message[:2] == MAGIC == b"\xc3\x01"
    assert message[2:10] == schema.fingerprint
    # the Avro spec's CRC-64-AVRO of the Parsing Canonical Form, as fastavro computes it
    assert schema.fingerprint.hex() == fastavro_fingerprint(schema.canonical, "CRC-64-AVRO")


def test_round_trip_preserves_every_field():
    schema = default_registry().latest("event")
    event = sample_event()
    writer, record = decode(encode(schema, event.to_record()))
    assert writer.family == "event"
    assert record["payload"]["text"]["text"] == event.payload["text"]["text"]
    assert record["run_id"] == event.run_id and record["seq"] == event.seq


def test_datum_is_plain_avro_binary():
    schema = default_registry().latest("event")
    event = sample_event()
    message = encode(schema, event.to_record())
    record = fastavro.schemaless_reader(io.BytesIO(message[10:]), schema.parsed, None)
    assert record["event_id"] == event.event_id


@pytest.mark.parametrize("garbage", [b"", b"\x00\x01", b"\xc3\x01" + b"\xff" * 8 + b"abc", b"hello world, not avro"])
def test_garbage_is_a_decode_error_not_a_crash(garbage):
    with pytest.raises(DecodeError):
        decode(garbage)


def test_truncated_datum_is_a_decode_error():
    schema = default_registry().latest("event")
    message = encode(schema, sample_event().to_record())
    with pytest.raises(DecodeError):
        decode(message[: len(message) // 2])


def test_bounded_text_keeps_digest_and_length_of_long_values():
    long = "x" * (TEXT_BOUND + 10)
    value = bounded_text(long)
    assert value["truncated"] is True
    assert len(value["text"]) == TEXT_BOUND
    assert value["length"] == TEXT_BOUND + 10
    short = bounded_text("short")
    assert short == {"text": "short", "sha256": short["sha256"], "length": 5, "truncated": False}


def test_registry_ships_every_avsc_as_package_data():
    registry = default_registry()
    assert {"event", "derived"} <= set(registry.families())
    for version in registry.all():
        assert json.loads(json.dumps(version.schema_json))["namespace"] == "membench"


def test_a_plain_decode_builds_the_same_event_and_refuses_what_the_full_one_refuses():
    """The processors' path reads newest-version datums without logical types (`plain=True`): the
    `Event` is the one the full decode builds, `ts` included; an older writer is still resolved."""
    from membench.schemas.chain import seal
    from membench.schemas.events import Event

    registry = default_registry()
    newest = registry.latest("event")
    event, datum = seal(newest, sample_event())
    message = MAGIC + newest.fingerprint + datum
    full, plain = decode(message)[1], decode(message, plain=True)[1]
    assert isinstance(plain["ts"], int) and not isinstance(full["ts"], int)
    assert Event.from_record(plain) == Event.from_record(full)
    assert (Event.from_record(plain).ts, Event.from_record(plain).hash) == (event.ts, event.hash)
    with pytest.raises(DecodeError, match="trailing bytes"):
        decode(message + b"\x00", plain=True)
    with pytest.raises(DecodeError):
        decode(message[: len(message) // 2], plain=True)
    older = registry.versions("event")[-2]
    old_message = encode(older, event.to_record())
    assert Event.from_record(decode(old_message, plain=True)[1]) == Event.from_record(decode(old_message)[1])
