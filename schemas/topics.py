"""Kafka topic names and settings: the distributed bus's contract (DESIGN.md §2, §3).

- trajectory: raw events, key = run_id (a run's events stay in one partition, in order),
  value = Avro single-object encoding of an `event` record;
- derived: derived events from processor workers, key = run_id, `derived` records;
- deadletter: messages a worker could not decode or process, header `reason`;
- schemas: compacted, key = fingerprint hex, value = schema JSON (travels with the data);
- unit-status: compacted, key = "<run_set>/<unit_id>", value = JSON {status, run_id, attempt},
  so `membench run` can skip complete units without the warehouse.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "membench."
TRAJECTORY = PREFIX + "trajectory"
DERIVED = PREFIX + "derived"
DEADLETTER = PREFIX + "deadletter"
SCHEMAS = PREFIX + "schemas"
UNIT_STATUS = PREFIX + "unit-status"


@dataclass(frozen=True)
class TopicLayout:
    partitions: int = 4
    replication_factor: int = 1
    min_insync_replicas: int | None = None

    def specs(self) -> dict[str, dict[str, str]]:
        """topic -> topic config."""
        common = {} if self.min_insync_replicas is None else {"min.insync.replicas": str(self.min_insync_replicas)}
        compacted = {**common, "cleanup.policy": "compact"}
        return {TRAJECTORY: dict(common), DERIVED: dict(common), DEADLETTER: dict(common),
                SCHEMAS: compacted, UNIT_STATUS: compacted}


def bootstrap_from_dsn(dsn: str) -> str:
    if not dsn.startswith("kafka://"):
        raise ValueError(f"not a Kafka DSN: {dsn!r} (expected kafka://HOST:PORT[,HOST:PORT])")
    return dsn[len("kafka://"):].rstrip("/")
