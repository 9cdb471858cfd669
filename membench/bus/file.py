"""The embedded bus: one Avro object container file per run set, appended in per-run order."""

from __future__ import annotations

import threading
from pathlib import Path

from membench.bus.ocf import OcfAppender
from membench.schemas.events import Event
from membench.schemas.registry import default_registry


class FileBus:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ocf = OcfAppender(self.path, default_registry().latest("event"))

    def publish(self, event: Event, datum: bytes) -> None:
        with self._lock:
            self._ocf.append(datum)

    def flush(self) -> None:
        with self._lock:
            self._ocf.flush()

    def close(self) -> None:
        with self._lock:
            self._ocf.close()
