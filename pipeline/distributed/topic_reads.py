"""What the distributed wiring reads back from the topics: one run's head (a runner taking over a
unit) and the newest unit-status records. Replay's read of the whole trajectory is
`audit.kafka_source`."""

from __future__ import annotations

import json
import threading
import time

from schemas.events import Event


def read_run_head(topics, run_id: str, timeout: float = 30.0):
    """Where `run_id` stands on the trajectory topic (a `producers.attempts.RunHead`), or None when
    the run has no event: its events followed in partition order by the processors' rule
    (`RunChain`: the first RunEnded ends it, later or duplicate events are fenced). Every partition
    is scanned by key, decoding only the run's messages."""
    import os

    from confluent_kafka import Consumer, TopicPartition

    from producers.attempts import RunChain
    from schemas.codec import decode_datum, unframe

    key = run_id.encode()
    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group(f"head-{os.getpid()}"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 10})  # reads to a known end: no batching delay
    chain = None
    try:
        meta = consumer.list_topics(topics.trajectory, timeout=timeout)
        for partition in sorted(meta.topics[topics.trajectory].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topics.trajectory, partition), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topics.trajectory, partition, low)])
            position, deadline = low, time.monotonic() + timeout
            while position < high:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topics.trajectory} partition {partition}: could not read to offset "
                                       f"{high} within {timeout:.0f}s")
                for msg in consumer.consume(1000, 0.05):  # a short wait: consume() waits it out for < 1000
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    if msg.key() != key:
                        continue
                    writer, datum = unframe(msg.value() or b"")
                    event = Event.from_record(decode_datum(writer, datum))
                    if chain is None:
                        chain = RunChain(event.run_set, event.run_id, event.unit_id)
                    chain.add(event)
    finally:
        consumer.close()
    return None if chain is None else chain.head


class StatusView:
    """Every unit's status, kept current by reading the compacted topic up to its end before each
    decision (one reader, assigned every partition, no group). Each key's records are folded by the
    claim rule (`producers.unit_queue.KeyStatus`): a `started` record whose claim lost is ignored."""

    def __init__(self, topics, claims_prefix: str | None = None):
        """`claims_prefix`: keep the verdicts of those claims only (a runner's own, until it reads
        them), not of every claim of every unit; None keeps all."""
        import os

        from confluent_kafka import Consumer, TopicPartition

        self.topics = topics
        self._lock = threading.Lock()
        self._claims_prefix = claims_prefix
        self.keys: dict = {}  # "<run_set>/<unit_id>" -> KeyStatus
        self.claims: dict[tuple[str, str, str], bool] = {}  # (key, claim, status) -> whether that record counted
        self._consumer = Consumer({"bootstrap.servers": topics.bootstrap,
                                   "group.id": topics.group(f"status-view-{os.getpid()}"),
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                   "fetch.wait.max.ms": 10})  # reads to a known end: no batching delay
        meta = self._consumer.list_topics(topics.unit_status, timeout=30)
        self._partitions = sorted(meta.topics[topics.unit_status].partitions)
        self._consumer.assign([TopicPartition(topics.unit_status, p, -2) for p in self._partitions])  # -2: beginning
        self._positions = {p: 0 for p in self._partitions}

    def refresh(self, timeout: float = 30.0, until: tuple[int, int] | None = None) -> None:
        """Read every partition up to the end it has when called; with `until` (partition, offset),
        only that partition up to and including that offset (a runner's own acknowledged record: the
        claim check reads from where the last refresh stopped, at most its base, up to it)."""
        from confluent_kafka import TopicPartition

        from producers.unit_queue import KeyStatus

        with self._lock:
            ends = {}
            if until is not None:
                if until[1] + 1 > self._positions[until[0]]:
                    ends[until[0]] = until[1] + 1
            for p in self._partitions if until is None else ():
                _, high = self._consumer.get_watermark_offsets(TopicPartition(self.topics.unit_status, p),
                                                               timeout=timeout)
                if high > self._positions[p]:
                    ends[p] = high
            deadline = time.monotonic() + timeout
            while any(self._positions[p] < high for p, high in ends.items()):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"could not read {self.topics.unit_status} to its end within {timeout:.0f}s")
                # ask for what is missing: consume() returns once it has that many, or waits its timeout
                # out (a gap that compaction left costs that short wait, no more)
                missing = sum(max(0, high - self._positions[p]) for p, high in ends.items())
                for msg in self._consumer.consume(min(1000, missing), 0.05):
                    if msg.error():
                        continue
                    self._positions[msg.partition()] = msg.offset() + 1
                    if msg.value():
                        key, record = msg.key().decode(), json.loads(msg.value())
                        counted = self.keys.setdefault(key, KeyStatus()).add(msg.offset(), record)
                        if "claim" in record and "base" in record and "restates" not in record and (
                                self._claims_prefix is None or record["claim"].startswith(self._claims_prefix)):
                            self.claims[(key, record["claim"], record.get("status"))] = counted

    @property
    def records(self) -> dict[str, dict]:
        """key -> the newest record that counts."""
        with self._lock:
            return {key: state.record for key, state in self.keys.items() if state.record is not None}

    def get(self, key: str) -> dict | None:
        with self._lock:
            state = self.keys.get(key)
            return None if state is None else state.record

    def state(self, key: str):
        """The key's `KeyStatus` (a copy), or a blank one."""
        from dataclasses import replace

        from producers.unit_queue import KeyStatus

        with self._lock:
            state = self.keys.get(key)
            return KeyStatus() if state is None else replace(state)

    def won(self, key: str, claim: str, status: str = "started") -> bool | None:
        """Whether the record of `claim` with STATUS (its `started`, or a take-over's `abandoned`)
        counted (None: not read yet); a verdict is read once."""
        with self._lock:
            return self.claims.pop((key, claim, status), None)

    def close(self) -> None:
        self._consumer.close()
