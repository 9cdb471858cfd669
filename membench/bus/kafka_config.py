"""The confluent-kafka client configurations, built in one place (docs/design.md §2).

Plain dicts, no confluent-kafka import: every package may import `schemas`, so the bus and the
runners (`membench/runner/`, `membench/pipeline/`, `membench/`) and the sink (`membench/warehouse/`) take their configs from here. One
function per client kind holds the settings every client of that kind shares; a caller passes the
brokers, its group, and only what is its own (a delivery callback, a rebalance timeout):

- `producer_config`: idempotent, `acks=all` (a broker retry neither loses nor duplicates), no
  compression (the faust worker's aiokafka reads it without extra codecs), a deep local queue;
- `consumer_config`: a member of a consumer group (`subscribe`): offsets are committed explicitly
  by the caller, never automatically; a new group starts at the beginning; only committed records
  are read (librdkafka's default, stated);
- `reader_config`: a consumer that assigns partitions and reads them to a known end
  (`membench/bus/kafka_read.py` `read_to_end`): a consumer's settings, and the broker answers a
  fetch at once instead of batching for up to `fetch.wait.max.ms`;
- `admin_config`: the admin client (topic creation).

No client uses TLS or SASL today; when one does, its settings go into `_COMMON`, and so into every
client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_COMMON: dict[str, Any] = {}  # every client: security settings would go here

_PRODUCER: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "compression.type": "none",
    "queue.buffering.max.messages": 1_000_000,
}

_CONSUMER: dict[str, Any] = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
}

_READER: dict[str, Any] = {
    "fetch.wait.max.ms": 10,  # reads to a known end: no batching delay
}


def admin_config(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **_COMMON}


def producer_config(bootstrap: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """EXTRA: the caller's own settings (a delivery callback, a timeout); they win over the shared ones."""
    return {"bootstrap.servers": bootstrap, **_COMMON, **_PRODUCER, **(extra or {})}


def consumer_config(bootstrap: str, group: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A consumer group member; EXTRA as for `producer_config`."""
    return {"bootstrap.servers": bootstrap, "group.id": group, **_COMMON, **_CONSUMER, **(extra or {})}


def reader_config(bootstrap: str, group: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A consumer that assigns partitions and reads them to an end; it never commits, GROUP only
    names it to the broker."""
    return consumer_config(bootstrap, group, {**_READER, **(extra or {})})
