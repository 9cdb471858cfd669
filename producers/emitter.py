"""Per-run event emission: seq without gaps, the hash chain, the bus, in-process listeners."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from schemas.chain import seal
from schemas.events import GENESIS_HASH, Event
from schemas.registry import default_registry

PRODUCER = "membench-runner/0.1"

Listener = Callable[[Event, bytes], None]


class RunEmitter:
    """Emits one run's events in order. Not shared between threads: one run, one emitter."""

    def __init__(self, run_set: str, run_id: str, unit_id: str, publish: Listener, producer: str = PRODUCER):
        self.run_set = run_set
        self.run_id = run_id
        self.unit_id = unit_id
        self._publish = publish
        self._producer = producer
        self._schema = default_registry().latest("event")
        self._seq = 0
        self._prev = GENESIS_HASH
        self.session_index = -1
        self.emitted: list[Event] = []

    def emit(self, kind: str, payload: dict[str, Any], visibility: str = "agent") -> Event:
        event = Event(
            event_id=str(uuid.uuid4()),
            run_set=self.run_set,
            run_id=self.run_id,
            unit_id=self.unit_id,
            session_index=self.session_index,
            seq=self._seq,
            ts=time.time_ns() // 1000,
            producer=self._producer,
            kind=kind,
            visibility=visibility,
            prev_hash=self._prev,
            payload=payload,
        )
        event, datum = seal(self._schema, event)
        self._seq += 1
        self._prev = event.hash
        self.emitted.append(event)
        self._publish(event, datum)
        return event
