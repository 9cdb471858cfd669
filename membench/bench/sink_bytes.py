"""The sink's raw-event stage, measured in-process on the same messages: the
Python rows path the Kafka sink used before (decode → Event → row → clickhouse-connect insert)
against the RowBinary path it uses now (`membench.warehouse.sink.RawRowEncoder` → one byte insert), with the
floors that bound the new path: the payload decode and its JSON alone, and the chDB insert of the
finished RowBinary alone. Figures are CPU µs per raw event (process CPU: chDB's insert threads
count), so they do not depend on how busy the machine is. `membench bench bus` can call
`bench_sink`; `python -m membench.bench.sink_bytes [RUNS]` prints it."""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

from membench.bench.bus import _Discard, synthetic_run
from membench.bus.emitter import RunEmitter
from membench.warehouse import queries
from membench.schemas.codec import decode_datum, frame, unframe
from membench.schemas.events import Event
from membench.schemas.registry import default_registry


def sample_messages(runs: int, sessions: int = 3, turns: int = 8) -> list[bytes]:
    """Framed messages of `runs` synthetic runs, as the trajectory topic holds them."""
    schema = default_registry().latest("event")
    out: list[bytes] = []
    for i in range(runs):
        emitter = RunEmitter("bench-sink", str(uuid.uuid4()), f"bench/t/B5/{i}",
                             lambda event, datum: out.append(frame(schema, datum)))
        emitter.emitted = _Discard()
        synthetic_run(emitter, sessions, turns)
    return out


def _cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def bench_sink(runs: int = 500, batch: int = 5000) -> dict:
    """CPU µs per raw event of each way and each floor, on the same messages, in batches of `batch`."""
    from fastavro import schemaless_reader

    from membench.warehouse.client import connect
    from membench.warehouse.sink import (RawRowEncoder, insert_raw, insert_raw_rowbinary, location, payload_json,
                                trajectory_row)

    registry = default_registry()
    latest = registry.latest("event")
    messages = sample_messages(runs)
    batches = [messages[i:i + batch] for i in range(0, len(messages), batch)]
    topic = "bench.membench.trajectory"
    encoder = RawRowEncoder(registry)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="membench-bench-sink-") as tmp:
        warehouse = connect(f"chdb://{Path(tmp) / 'wh'}")
        try:
            def python_rows():
                offset = 0
                for n, chunk in enumerate(batches):
                    rows = []
                    for message in chunk:
                        writer, datum = unframe(message, registry)
                        event = Event.from_record(decode_datum(writer, datum, latest))
                        rows.append(trajectory_row(event, datum, writer.fingerprint_hex, topic, 0, offset))
                        offset += 1
                    insert_raw(warehouse, rows, f"py:{n}")

            encoded: list[bytes] = []

            def rowbinary():
                offset = 0
                for n, chunk in enumerate(batches):
                    rows = []
                    for message in chunk:
                        rows.append(encoder.row(message, location(topic, 1, offset)))
                        offset += 1
                    data = b"".join(rows)
                    encoded.append(data)
                    insert_raw_rowbinary(warehouse, data, f"rb:{n}")

            def encode_only():
                offset = 0
                for chunk in batches:
                    b"".join(encoder.row(m, location(topic, 2, offset + i)) for i, m in enumerate(chunk))
                    offset += len(chunk)

            def insert_only():
                for n, data in enumerate(encoded):
                    insert_raw_rowbinary(warehouse, data, f"again:{n}")  # new tokens: a real insert

            def payload_floor():  # what the payload JSON column costs at least: decode, then JSON text
                for message in messages:
                    record = schemaless_reader(io.BytesIO(message[10:]), latest.parsed, None)
                    payload_json(record["payload"])  # type: ignore[index,call-overload,arg-type]  # an Event record

            def full_decode_floor():
                for message in messages:
                    schemaless_reader(io.BytesIO(message[10:]), latest.parsed, None)

            per = 1e6 / len(messages)
            figures["python_rows_us"] = _cpu(python_rows) * per
            figures["rowbinary_us"] = _cpu(rowbinary) * per
            figures["rowbinary_encode_us"] = _cpu(encode_only) * per
            figures["rowbinary_insert_us"] = _cpu(insert_only) * per
            figures["decode_and_payload_json_floor_us"] = _cpu(payload_floor) * per
            figures["fastavro_decode_floor_us"] = _cpu(full_decode_floor) * per
            rows = queries.raw_rows(warehouse)
        finally:
            warehouse.close()
    figures["ratio_python_to_rowbinary"] = figures["python_rows_us"] / figures["rowbinary_us"]
    return {"events": len(messages), "rows_written": rows, "batch": batch,
            **{k: round(v, 2) for k, v in figures.items()}}


if __name__ == "__main__":
    print(json.dumps(bench_sink(int(sys.argv[1]) if len(sys.argv) > 1 else 500), indent=2))
