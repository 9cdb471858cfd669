"""What the distributed wiring reads back from the topics: one run's head (a runner taking over a
unit) and the newest unit-status records. Replay's read of the whole trajectory is
`membench.audit.kafka_source`."""

from __future__ import annotations

import json
import threading

from membench.schemas.events import Event


def read_run_head(topics, run_id: str, timeout: float = 30.0):
    """Where `run_id` stands on the trajectory topic (a `membench.bus.attempts.RunHead`), or None when
    the run has no event: its events followed in partition order by the processors' rule
    (`RunChain`: the first RunEnded ends it, later or duplicate events are fenced). Every partition
    is scanned by key, decoding only the run's messages, up to the end it has when called; a short
    read raises `ShortRead` (a head read short could hide the run's end)."""
    from membench.bus.attempts import RunChain
    from membench.bus.kafka_read import open_reader, read_to_end
    from membench.schemas.codec import decode_datum, unframe

    def decode(msg) -> Event:
        writer, datum = unframe(msg.value() or b"")
        return Event.from_record(decode_datum(writer, datum))

    key = run_id.encode()
    chain = None
    consumer = open_reader(topics, "head")
    try:
        for _, event in read_to_end(consumer, topics.trajectory, keep=lambda m: m.key() == key, decode=decode,
                                    timeout=timeout):
            if chain is None:
                chain = RunChain(event.run_set, event.run_id, event.unit_id)
            chain.add(event)
    finally:
        consumer.close()
    return None if chain is None else chain.head


class StatusView:
    """Every unit's status, kept current by reading the compacted topic up to its end before each
    decision (one reader, assigned every partition, no group). Each key's records are folded by the
    claim rule (`membench.bus.unit_status.KeyStatus`): a `started` record whose claim lost is ignored."""

    def __init__(self, topics, claims_prefix: str | None = None):
        """`claims_prefix`: keep the verdicts of those claims only (a runner's own, until it reads
        them), not of every claim of every unit; None keeps all."""
        from confluent_kafka import TopicPartition

        from membench.bus.kafka_read import open_reader, partitions_of

        self.topics = topics
        self._lock = threading.Lock()
        self._claims_prefix = claims_prefix
        self.keys: dict = {}  # "<run_set>/<unit_id>" -> KeyStatus
        self.claims: dict[tuple[str, str, str], bool] = {}  # (key, claim, status) -> whether that record counted
        self._consumer = open_reader(topics, "status-view")
        self._partitions = partitions_of(self._consumer, topics.unit_status)
        self._consumer.assign([TopicPartition(topics.unit_status, p, -2) for p in self._partitions])  # -2: beginning
        self._positions = {p: 0 for p in self._partitions}

    def refresh(self, timeout: float = 30.0, until: tuple[int, int] | None = None) -> None:
        """Read every partition up to the end it has when called; with `until` (partition, offset),
        only that partition up to and including that offset (a runner's own acknowledged record: the
        claim check reads from where the last refresh stopped, at most its base, up to it)."""
        from membench.bus.kafka_read import read_assigned, watermarks
        from membench.bus.unit_status import KeyStatus

        with self._lock:
            ends = {}
            if until is not None:
                if until[1] + 1 > self._positions[until[0]]:
                    ends[until[0]] = until[1] + 1
            for p in self._partitions if until is None else ():
                _, high = watermarks(self._consumer, self.topics.unit_status, p)
                if high > self._positions[p]:
                    ends[p] = high
            # every message this consumer receives is folded, past the ends too: it will not fetch it again
            for msg, record in read_assigned(self._consumer, self.topics.unit_status, self._positions, ends,
                                             keep=lambda m: bool(m.value()), decode=lambda m: json.loads(m.value()),
                                             timeout=timeout, beyond_end=True):
                key = msg.key().decode()
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

        from membench.bus.unit_status import KeyStatus

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
