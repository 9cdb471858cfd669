"""Avro contracts of membench (the `.avsc` files in `avsc/`) and the code that speaks them.

The `.avsc` files are the registry: `<family>.v<N>.avsc`, the newest version of a family is the
one producers write. `codec` encodes with Avro single-object encoding; `chain` keeps the SHA-256
hash chain of a run's events; `events` builds envelope records.
"""

from membench.schemas.registry import Registry, SchemaVersion, default_registry, load_schema

__all__ = ["Registry", "SchemaVersion", "default_registry", "load_schema"]
