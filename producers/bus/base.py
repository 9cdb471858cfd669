"""The bus interface and DSN dispatch (`file://DIR` embedded, `kafka://HOST:PORT` distributed)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from schemas.events import Event


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


def open_bus(dsn: str, run_set: str, runs_dir: Path) -> Bus:
    if dsn.startswith("file://"):
        from producers.bus.file import FileBus

        return FileBus(run_set_log_path(Path(dsn[len("file://"):]), run_set))
    if dsn.startswith("kafka://"):
        try:
            from producers.bus.kafka import KafkaBus
        except ModuleNotFoundError as exc:  # pragma: no cover - until the Kafka backend lands
            raise BusError("the kafka bus backend is not available in this build") from exc
        return KafkaBus(dsn, run_set=run_set, spool_dir=runs_dir / run_set / "spool")
    raise BusError(f"unknown bus DSN {dsn!r}: expected file://DIR or kafka://HOST:PORT")
