"""Writer schemas: which schema an event was written with, as a `SchemaVersion`.

Hashes are recomputed with the writer's schema, never the newest (membench/schemas/chain.py), so every
reader of stored events needs the writer schema: a log file names it in its header
(`avro.schema`), a warehouse row and a Kafka message by fingerprint.
"""

from __future__ import annotations

import json
from typing import Any

from membench.schemas.registry import Registry, SchemaVersion, default_registry, load_schema


def writer_schema(schema_json: Any, registry: Registry | None = None) -> SchemaVersion:
    """The registered version whose fingerprint the given schema has; a schema the registry does not
    ship (a fork, a hand-written log) is loaded as it is, so its events still verify."""
    if isinstance(schema_json, (str, bytes)):
        schema_json = json.loads(schema_json)
    adhoc = load_schema(schema_json)
    known = (registry or default_registry()).by_fingerprint(adhoc.fingerprint)
    return known or adhoc
