"""The log reader replay uses (`membench.audit.logscan`): the generated skipper walks every datum to the
same end as fastavro's decoder, for every writer schema shipped, and the envelope readers find the
run and seq; a damaged block is refused naming its offset."""

from __future__ import annotations

import pytest

from membench.audit.logscan import BlockError, LogFile, compile_skipper, run_and_seq
from membench.bus.file import FileBus
from membench.schemas.codec import encode_datum
from membench.schemas.registry import default_registry
from tests.audit.test_replay_jobs import _transfer_runs
from tests.processors.test_verdicts import build_run


def _events():
    events = build_run(("pass", "fail", "pass"), run_id="r-verdicts") + _transfer_runs("1" * 64, "2" * 64)
    return events


def test_the_skipper_ends_every_datum_where_fastavro_does(tmp_path):
    schema = default_registry().latest("event")
    path = tmp_path / "events.avro"
    bus = FileBus(path)
    events = _events()
    for event in events:
        bus.publish(event, encode_datum(schema, event.to_record()))
    bus.close()
    log = LogFile(path)
    blocks = list(log.blocks())
    decoded = [d for block in blocks for d in log.decode_block(*block)]
    bounds = [(data, b) for block in blocks for data in [block[2]] for b in log.datum_bounds(*block)]
    assert [data[s:e] for data, (s, e) in bounds] == [datum for _, datum in decoded]
    assert [run_and_seq(data, s) for data, (s, _) in bounds] == [(e.run_id, e.seq) for e in events]
    assert [record["kind"] for record, _ in decoded] == [e.kind for e in events]
    assert all(isinstance(record["ts"], int) for record, _ in decoded)  # no datetime round trip


@pytest.mark.parametrize("version", default_registry().versions("event"), ids=lambda v: f"event.v{v.version}")
def test_a_skipper_compiles_for_every_shipped_event_schema(version):
    skip = compile_skipper(version.schema_json)
    for event in build_run(run_id="r"):  # an older writer encodes the fields it has
        datum = encode_datum(version, event.to_record())
        assert skip(datum + b"trailing", 0) == len(datum)


def test_a_damaged_block_is_refused_with_its_offset(tmp_path):
    schema = default_registry().latest("event")
    path = tmp_path / "events.avro"
    bus = FileBus(path)
    for event in build_run(run_id="r"):
        bus.publish(event, encode_datum(schema, event.to_record()))
    bus.close()
    size = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(b"\x02\x10" + b"\x00" * 24)
    with pytest.raises(BlockError) as caught:
        list(LogFile(path).blocks())
    assert caught.value.offset == size


def test_a_log_repacked_with_deflate_replays_like_the_original(tmp_path):
    import fastavro

    from membench.audit.file_source import events_from_file
    from membench.audit.replayer import replay

    schema = default_registry().latest("event")
    path = tmp_path / "events.avro"
    bus = FileBus(path)
    for event in build_run(run_id="r"):
        bus.publish(event, encode_datum(schema, event.to_record()))
    bus.close()
    with open(path, "rb") as handle:
        reader = fastavro.reader(handle)
        writer_schema, records = reader.writer_schema, list(reader)
    packed = tmp_path / "packed.avro"
    with open(packed, "wb") as handle:
        fastavro.writer(handle, writer_schema, records, codec="deflate")
    results = []
    for log in (path, packed):
        findings: list = []
        results.append(replay(events_from_file(log, findings), findings))
    assert results[0].ok and results[1].ok and results[0].log_root == results[1].log_root
