"""Event buses. A bus takes sealed events (with their Avro datum) in per-run order: the embedded
log and Kafka (its topic names, the `kafka://` DSN and every client's config), the emitter that
seals a run's events, the content store (blobs), the attempts a crash abandoned, and the claim
rule a unit's status is folded by."""

from membench.bus.base import Bus

__all__ = ["Bus"]
