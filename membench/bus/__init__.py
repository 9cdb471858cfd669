"""Event buses. A bus takes sealed events (with their Avro datum) in per-run order."""

from membench.bus.base import Bus

__all__ = ["Bus"]
