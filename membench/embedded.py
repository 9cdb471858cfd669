"""The embedded pipeline: file bus + in-process processors + batched warehouse sink.

One lock orders the three, so the log, the derived events and the warehouse see each run's
events in seq order even with many units running concurrently. The warehouse is written in
batches (at a run's end once a second has passed, or every 5000 events), and the log is made
durable (fsync) before each batch: a crash never leaves warehouse rows that the log lacks.
"""

from __future__ import annotations

import threading
from pathlib import Path

from processors import RunSetProcessor
from producers.bus.file import FileBus
from schemas.events import Event
from schemas.registry import default_registry
from warehouse.sink import RunBatchSink


class EmbeddedPipeline:
    def __init__(self, log_path: Path, warehouse):
        self.bus = FileBus(log_path)
        self.processor = RunSetProcessor()
        self.sink = RunBatchSink(warehouse, default_registry().latest("event").fingerprint_hex,
                                 before_write=self.bus.flush)
        self._lock = threading.Lock()
        self.events = 0

    def publish(self, event: Event, datum: bytes) -> None:
        with self._lock:
            self.bus.publish(event, datum)
            derived = self.processor.apply(event)
            self.sink.add(event, datum, derived)
            self.events += 1

    def close(self) -> None:
        with self._lock:
            self.sink.flush()  # flushes the log first
            self.bus.close()
