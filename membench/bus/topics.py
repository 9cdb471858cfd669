"""Kafka topic names and settings: the distributed bus's contract (docs/design.md §2, §3).

- trajectory: raw events, key = run_id (a run's events stay in one partition, in order),
  value = Avro single-object encoding of an `event` record;
- derived: derived events from processor workers, key = run_id, `derived` records;
- deadletter: messages a worker could not decode or process, header `reason`;
- schemas: compacted, key = fingerprint hex, value = schema JSON (travels with the data);
- unit-status: compacted (no record younger than a day), key = "<run_set>/<unit_id>", value =
  JSON {status, run_id, attempt} and a runner's claim fields (`membench/bus/unit_status.py` `KeyStatus`),
  so `membench run` can skip complete units without the warehouse;
- units: the work queue of `membench runner` processes (a consumer group), key =
  "<run_set>/<unit_id>", value = JSON unit order (`membench/runner/unit_queue.py`); a runner commits a
  unit's offset only once the unit is complete, so a dead runner's units go to another one;
- blobs: compacted, key = "<run_set>/<sha256>/<chunk>/<chunks>", value = that chunk of the blob: the
  recorded model calls' bodies and large diffs a runner stored, so any runner (a `--model-replay`)
  and any replay reads them (`membench/bus/kafka_blobs.py`).

A DSN `kafka://HOST:PORT[,HOST:PORT…][/NAMESPACE][?partitions=N&replication=R&min_insync=M]`
names the brokers; the optional namespace prefixes every topic and consumer group
(`NAMESPACE.membench.trajectory`), so several studies (or test cases) share one cluster without
seeing each other's data; the query sets how new topics are created (default 4 partitions,
replication factor 1).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl
from dataclasses import dataclass

UNIT_STATUS_COMPACTION_LAG_MS = 24 * 3600 * 1000  # a unit-status record stays this long at least
_NAMESPACE = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class TopicLayout:
    partitions: int = 4
    replication_factor: int = 1
    min_insync_replicas: int | None = None

    def specs(self, topics: "Topics") -> dict[str, dict[str, str]]:
        """topic -> topic config."""
        common = {} if self.min_insync_replicas is None else {"min.insync.replicas": str(self.min_insync_replicas)}
        compacted = {**common, "cleanup.policy": "compact"}
        return {topics.trajectory: dict(common), topics.derived: dict(common), topics.deadletter: dict(common),
                topics.schemas: compacted, topics.units: dict(common), topics.blobs: compacted,
                # a runner's claim check reads a unit's records from the one its decision read up to
                # its own: compaction must not drop them while a claim can still be decided
                topics.unit_status: {**compacted, "min.compaction.lag.ms": str(UNIT_STATUS_COMPACTION_LAG_MS)}}


@dataclass(frozen=True)
class Topics:
    bootstrap: str
    namespace: str = ""
    layout: TopicLayout = TopicLayout()

    @property
    def prefix(self) -> str:
        return f"{self.namespace}.membench." if self.namespace else "membench."

    @property
    def trajectory(self) -> str:
        return self.prefix + "trajectory"

    @property
    def derived(self) -> str:
        return self.prefix + "derived"

    @property
    def deadletter(self) -> str:
        return self.prefix + "deadletter"

    @property
    def schemas(self) -> str:
        return self.prefix + "schemas"

    @property
    def unit_status(self) -> str:
        return self.prefix + "unit-status"

    @property
    def units(self) -> str:
        return self.prefix + "units"

    @property
    def blobs(self) -> str:
        return self.prefix + "blobs"

    def group(self, role: str) -> str:
        return self.prefix + role


def topics_from_dsn(dsn: str) -> Topics:
    if not dsn.startswith("kafka://"):
        raise ValueError(f"not a Kafka DSN: {dsn!r} (expected kafka://HOST:PORT[,HOST:PORT][/NAMESPACE])")
    rest, _, query = dsn[len("kafka://"):].partition("?")
    bootstrap, _, namespace = rest.partition("/")
    namespace = namespace.strip("/")
    params = dict(parse_qsl(query))
    unknown = set(params) - {"partitions", "replication", "min_insync"}
    if unknown:
        raise ValueError(f"Kafka DSN {dsn!r}: unknown parameter(s) {', '.join(sorted(unknown))}")
    try:
        layout = TopicLayout(int(params.get("partitions", 4)), int(params.get("replication", 1)),
                             int(params["min_insync"]) if "min_insync" in params else None)
    except ValueError:
        raise ValueError(f"Kafka DSN {dsn!r}: partitions, replication and min_insync must be integers") from None
    if not bootstrap:
        raise ValueError(f"Kafka DSN {dsn!r} names no broker")
    if namespace and not _NAMESPACE.match(namespace):
        raise ValueError(f"Kafka DSN {dsn!r}: namespace may hold letters, digits, '.', '_' and '-' only")
    return Topics(bootstrap, namespace, layout)


def bootstrap_from_dsn(dsn: str) -> str:
    return topics_from_dsn(dsn).bootstrap
