"""The processors' route over Kafka, declared once (docs/design.md §2, §7): which topic they
consume, in which consumer group, and what they produce where, keyed how. Both engines interpret it
— the confluent-kafka engine (`membench/pipeline/kafka_engine.py`) and the faust worker
(`membench/pipeline/faust_worker.py`) — and fold each message with the same `MessageFolder`.

- consumed: the trajectory topic (raw events, key run_id), as the group `<prefix>processor`: one
  group for both engines, so a deployment can switch engines and resume from the committed offsets;
- produced: each derived event to the derived topic, key = its run_id (a run's derived events stay
  in one partition, in order), value = the Avro single-object encoding of its `derived` record
  (the newest `derived` schema);
- dead letters: a message that does not decode or that a processor rejects, to the dead-letter
  topic, with the source message's own key and value, and the headers `reason` (at most 1,000
  bytes) and `source` (`<partition>:<offset>` of the trajectory message).
"""

from __future__ import annotations

from membench.schemas.codec import encode
from membench.schemas.derived import DerivedEvent
from membench.schemas.registry import default_registry
from membench.bus.topics import Topics

REASON_BYTES = 1000  # a dead letter's `reason` header, at most


class ProcessorRoute:
    def __init__(self, topics: Topics):
        self.topics = topics
        self.consumes = topics.trajectory
        self.group = topics.group("processor")
        self.derived = topics.derived
        self.dead_letters = topics.deadletter
        self._derived_schema = default_registry().latest("derived")

    def derived_message(self, item: DerivedEvent) -> tuple[bytes, bytes]:
        """(key, value) of a derived event on the derived topic."""
        return item.run_id.encode(), encode(self._derived_schema, item.to_record())

    @staticmethod
    def dead_letter_headers(reason: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
        """The headers of the dead letter of the trajectory message at PARTITION, OFFSET (its key and
        value are the message's own)."""
        return [("reason", reason.encode()[:REASON_BYTES]), ("source", f"{partition}:{offset}".encode())]
