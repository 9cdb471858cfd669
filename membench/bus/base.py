"""The bus interface. Implementations: `membench.bus.file.FileBus` (embedded, `file://DIR`) and
`membench.bus.kafka.KafkaBus` (distributed, `kafka://HOST:PORT`)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from membench.schemas.events import Event


class Bus(Protocol):
    def publish(self, event: Event, datum: bytes) -> None:
        """Hand one sealed event (and its Avro binary datum) to the bus."""

    def flush(self) -> None:
        """Block until everything published so far is durable."""

    def close(self) -> None: ...


class BusError(RuntimeError):
    pass


def run_set_log_path(runs_dir: Path, run_set: str) -> Path:
    return runs_dir / run_set / "events.avro"
