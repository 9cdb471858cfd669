"""The distributed bus: Apache Kafka through confluent-kafka.

The producer is idempotent (`enable.idempotence=true`, `acks=all`), so broker retries neither
lose nor duplicate events, and keys the trajectory topic by run_id so a run stays ordered.
Delivery reports are checked: a message whose delivery finally fails (e.g. a broker outage
longer than `message.timeout.ms`) goes to a bounded on-disk spool and is re-sent at the next
flush, so an outage delays events instead of losing them. `flush()` returns only when every
event published so far is acknowledged by the brokers; a unit counts as complete only then.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from membench.bus.base import BusError
from membench.bus.kafka_read import open_reader, read_to_end
from membench.schemas.events import Event
from membench.bus.kafka_config import admin_config, producer_config
from membench.schemas.registry import default_registry
from membench.bus.topics import TopicLayout, Topics, topics_from_dsn

SPOOL_LIMIT_BYTES = 512 * 1024 * 1024
POLL_EVERY = 256  # messages between two polls for delivery reports


PROBE_TIMEOUT_S = 5.0


def probe_brokers(bootstrap: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when a Kafka broker of BOOTSTRAP answers a metadata request within TIMEOUT; otherwise why
    not, in a few words. A plain TCP connect first (a closed port answers at once), then librdkafka's
    metadata request with its log silenced: unreachable, it would log every reconnect attempt
    (hundreds of lines) while the caller only needs one."""
    import logging
    import socket

    reasons = []
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout).close()
            break
        except (OSError, ValueError) as exc:
            reasons.append(getattr(exc, "strerror", None) or str(exc))
    else:
        return reasons[0] if len(set(reasons)) == 1 else "; ".join(reasons)
    quiet = logging.getLogger("membench.kafka_probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    # (confluent-kafka's annotation lists plain values only; `logger` takes a logging.Logger)
    admin = AdminClient({**admin_config(bootstrap), "logger": quiet, "log_level": 0})  # type: ignore[dict-item]
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        return f"no Kafka metadata within {timeout:g} s ({exc.args[0].str()})"
    return None


def ensure_topics(topics: Topics, layout: TopicLayout | None = None, timeout: float = 30.0) -> None:
    layout = layout or topics.layout
    bootstrap = topics.bootstrap
    admin = AdminClient(admin_config(bootstrap))
    existing = set(admin.list_topics(timeout=timeout).topics)
    wanted = [NewTopic(name, num_partitions=layout.partitions, replication_factor=layout.replication_factor,
                       config=config)
              for name, config in layout.specs(topics).items() if name not in existing]
    if not wanted:
        return
    for name, future in admin.create_topics(wanted, request_timeout=timeout).items():
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise BusError(f"cannot create topic {name}: {exc}") from exc
    # creation is asynchronous on the brokers: wait until every partition has a leader
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = admin.list_topics(timeout=timeout).topics
        if all(name in found and found[name].partitions and
               all(p.leader >= 0 for p in found[name].partitions.values()) for name in layout.specs(topics)):
            return
        time.sleep(0.2)
    raise BusError(f"topics were created but have no leaders after {timeout:.0f}s at {bootstrap}")


def publish_schemas(producer: Producer, topics: Topics) -> None:
    for version in default_registry().all():
        producer.produce(topics.schemas, json.dumps(version.schema_json).encode(), version.fingerprint_hex.encode())


class Spool:
    """Length-prefixed (topic, key, value) records on disk, in the order their delivery failed.

    `take()` moves them to a second file (`resending.bin`) rather than deleting them; `confirm()`
    deletes that file once every re-sent message was acknowledged (or failed again, and so is
    back in `undelivered.bin`). A process that dies in between leaves `resending.bin`, and the
    next `take()` returns it again: after a crash a message may be sent twice, never lost."""

    def __init__(self, directory: Path, limit: int = SPOOL_LIMIT_BYTES):
        self.path = Path(directory) / "undelivered.bin"
        self.resending = Path(directory) / "resending.bin"
        self.limit = limit
        self._lock = threading.Lock()

    def append(self, topic: str, key: bytes, value: bytes) -> None:
        name = topic.encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            size = self.path.stat().st_size if self.path.exists() else 0
            if size + len(name) + len(key) + len(value) + 12 > self.limit:
                raise BusError(f"delivery spool {self.path} is full ({size} bytes); the broker has been "
                               "unreachable too long")
            with open(self.path, "ab") as handle:
                handle.write(struct.pack(">III", len(name), len(key), len(value)) + name + key + value)
                handle.flush()
                os.fsync(handle.fileno())

    def take(self) -> list[tuple[str, bytes, bytes]]:
        """Everything to send again: what an earlier process took and never confirmed, then what
        failed since."""
        with self._lock:
            if self.path.exists():
                with open(self.resending, "ab") as handle:
                    handle.write(self.path.read_bytes())
                    handle.flush()
                    os.fsync(handle.fileno())
                self.path.unlink()
            return self._parse(self.resending.read_bytes()) if self.resending.exists() else []

    def confirm(self) -> None:
        """The records of the last `take()` are delivered (or spooled again)."""
        with self._lock:
            self.resending.unlink(missing_ok=True)

    def count(self) -> int:
        """Records waiting: failed deliveries, and any taken but not confirmed."""
        with self._lock:
            return sum(len(self._parse(p.read_bytes())) for p in (self.path, self.resending) if p.exists())

    @staticmethod
    def _parse(data: bytes) -> list[tuple[str, bytes, bytes]]:
        out, at = [], 0
        while at + 12 <= len(data):
            tlen, klen, vlen = struct.unpack(">III", data[at:at + 12])
            at += 12
            topic = data[at:at + tlen].decode()
            at += tlen
            out.append((topic, data[at:at + klen], data[at + klen:at + klen + vlen]))
            at += klen + vlen
        return out


class KafkaBus:
    def __init__(self, dsn: str, run_set: str, spool_dir: Path, layout: TopicLayout | None = None,
                 message_timeout_ms: int = 120_000):
        self.topics = topics_from_dsn(dsn)
        self.bootstrap = self.topics.bootstrap
        self.run_set = run_set
        ensure_topics(self.topics, layout)
        self._producer = Producer(producer_config(self.bootstrap, {
            "message.timeout.ms": message_timeout_ms,
            # one delivery callback for every message: cheaper than a callable per produce()
            "on_delivery": self._on_delivery,
        }))
        self._fingerprint = default_registry().latest("event").fingerprint
        self._header = b"\xc3\x01" + self._fingerprint
        self._trajectory = self.topics.trajectory  # the emit path: no property call per event
        self._spool = Spool(spool_dir)
        self._errors: list[str] = []
        self.delivered = 0
        self.status_positions: dict[str, tuple[int, int]] = {}  # unit-status key -> (partition, offset) acknowledged
        self._unpolled = 0
        self._resending = False
        publish_schemas(self._producer, self.topics)

    def _on_delivery(self, err, msg) -> None:  # called from poll()/flush()
        if err is None:
            self.delivered += 1
            return
        self._errors.append(str(err))
        self._spool.append(msg.topic(), msg.key() or b"", msg.value() or b"")

    def _on_status_delivery(self, err, msg) -> None:
        self._on_delivery(err, msg)
        if err is None:
            self.status_positions[msg.key().decode()] = (msg.partition(), msg.offset())

    def _produce(self, topic: str, key: bytes, value: bytes, on_delivery=None) -> None:
        while True:
            try:
                if on_delivery is None:
                    self._producer.produce(topic, value, key)
                else:
                    self._producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: wait for deliveries (backpressure, never drop)
                self._producer.poll(0.1)
        # Serve delivery reports every POLL_EVERY messages, not after each: poll() releases the
        # GIL, and with several runner threads that hand-off dominated the cost of an emit.
        self._unpolled += 1
        if self._unpolled >= POLL_EVERY:
            self._unpolled = 0
            self._producer.poll(0)

    def poll(self, timeout: float = 0.0) -> None:
        """Serve pending delivery reports (a failed delivery goes to the spool)."""
        self._producer.poll(timeout)

    @property
    def spooled(self) -> int:
        """Messages in the spool, waiting for the next flush."""
        return self._spool.count()

    def publish(self, event: Event, datum: bytes) -> None:
        self._produce(self._trajectory, event.run_id.encode(), self._header + datum)

    def publish_message(self, key: bytes, message: bytes) -> None:
        """A pre-framed message (benchmarks and tests)."""
        self._produce(self.topics.trajectory, key, message)

    def publish_blob(self, digest: str, data: bytes) -> None:
        """A blob of the run set's content store on the blobs topic, in chunks under the broker's
        message size (`membench/bus/kafka_blobs.py` reads them back)."""
        from membench.bus.kafka_blobs import chunks

        for key, chunk in chunks(self.run_set, digest, data):
            self._produce(self.topics.blobs, key, chunk)

    def mark_unit(self, unit_id: str, status: str, run_id: str, attempt: int, **claim) -> None:
        """Record a unit's status; `claim` adds a runner's claim fields (`claim`, `base`: the
        compare-and-set of `membench/bus/unit_status.py` `KeyStatus`)."""
        self.mark_record(unit_id, {"status": status, "run_id": run_id, "attempt": attempt, **claim})

    def mark_record(self, unit_id: str, record: dict) -> None:
        """A claim's record (one with `base`): once flushed, `status_positions["<run_set>/<unit_id>"]`
        is where it landed, until the claim check takes it (`membench/pipeline/distributed/unit_claims.py`)."""
        self._produce(self.topics.unit_status, f"{self.run_set}/{unit_id}".encode(), json.dumps(record).encode(),
                      self._on_status_delivery if "base" in record else None)

    def flush(self, timeout: float = 3600.0) -> None:
        """Block until everything published is acknowledged; re-send the spool meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = self._producer.flush(min(10.0, max(0.1, deadline - time.monotonic())))
            if remaining == 0:
                if self._resending:  # each re-sent message was acknowledged or is back in the spool
                    self._spool.confirm()
                spooled = self._spool.take()
                self._resending = bool(spooled)
                if not spooled:
                    return
                for topic, key, value in spooled:
                    self._produce(topic, key, value)
                continue
            if time.monotonic() > deadline:
                raise BusError(f"{remaining} events not acknowledged by Kafka at {self.bootstrap} "
                               f"after {timeout:.0f}s (last errors: {self._errors[-3:]})")

    def close(self) -> None:
        self.flush()


class SharedUnitBus:
    """One KafkaBus shared by a runner's worker threads. Publishes are serialized; each unit is marked
    `started` before anything runs (so a crashed runner's retry gets the next attempt number) and
    `completed` only once Kafka acknowledged every event of it. `attempts`: unit id -> attempt."""

    def __init__(self, bus: KafkaBus, attempts: dict[str, int]):
        self.bus = bus
        self.attempts = attempts
        self._lock = threading.Lock()

    def mark_started(self, run_ids: dict[str, str]) -> None:
        """`run_ids`: unit id -> the run id of its coming attempt."""
        for unit_id, run_id in run_ids.items():
            self.bus.mark_unit(unit_id, "started", run_id, self.attempts[unit_id])
        self.bus.flush()

    def publish(self, event: Event, datum: bytes) -> None:
        with self._lock:
            self.bus.publish(event, datum)

    def completed(self, unit_id: str, run_id: str) -> None:
        with self._lock:
            self.bus.flush()  # a unit is complete only once Kafka acknowledged all of its events
            self.bus.mark_unit(unit_id, "completed", run_id, self.attempts[unit_id])
            self.bus.flush()


def read_unit_status(topics: Topics, run_set: str, timeout: float = 30.0) -> dict[str, dict]:
    """unit_id -> newest status record of the run set that counts, read from the compacted topic to
    the end it has when called. A short read raises `ShortRead` (`membench/bus/kafka_read.py`): a
    partial map would let `run --bus` re-run a unit whose `completed` record it did not reach."""
    from membench.bus.unit_status import KeyStatus

    prefix = f"{run_set}/"
    out: dict[str, KeyStatus] = {}
    consumer = open_reader(topics, "status")
    try:
        for msg, record in read_to_end(consumer, topics.unit_status, timeout=timeout,
                                       keep=lambda m: m.key().startswith(prefix.encode()) and bool(m.value()),
                                       decode=lambda m: json.loads(m.value())):
            # folded by the claim rule: a lost claim is ignored
            out.setdefault(msg.key().decode()[len(prefix):], KeyStatus()).add(msg.offset(), record)
    finally:
        consumer.close()
    return {unit: state.record for unit, state in out.items() if state.record is not None}


def read_run_events(topics: Topics, run_ids: set[str], kinds: set[str], timeout: float = 60.0) -> list[Event]:
    """The events of KINDS of the runs RUN_IDS, read from the trajectory topic (up to its end when
    called; a short read raises `ShortRead`). Messages are keyed by run id, so only the runs' own
    messages are decoded; the rest of the topic is only scanned. Each event is decoded with the
    writer schema its message names."""
    from membench.schemas.codec import decode_datum, unframe

    keys = {r.encode() for r in run_ids}

    def decode(msg) -> Event:
        writer, datum = unframe(msg.value())
        return Event.from_record(decode_datum(writer, datum))

    consumer = open_reader(topics, "runs")
    try:
        out = [event for _, event in read_to_end(consumer, topics.trajectory, timeout=timeout,
                                                 keep=lambda m: m.key() in keys, decode=decode)
               if event.kind in kinds]
    finally:
        consumer.close()
    return sorted(out, key=lambda e: (e.run_id, e.seq))
