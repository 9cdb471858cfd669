"""Per-run event emission: seq without gaps, the hash chain, the bus, in-process listeners."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from membench.schemas.chain import seal_body
from membench.schemas.codec import constant_fields_encoder
from membench.schemas.events import GENESIS_HASH, NAMESPACE, Event
from membench.schemas.registry import default_registry

if TYPE_CHECKING:  # the payload types cost an import; annotations only (docs/design.md §3)
    from membench.schemas.payloads import Emit

PRODUCER = "membench-runner/0.1"

Listener = Callable[[Event, bytes], None]


def uuid4_strings(batch: int = 256) -> Iterator[str]:
    """Random (version 4) UUID strings from the OS CSPRNG, read `batch` ids at a time: one
    os.urandom call per 256 ids instead of per id (~8x cheaper than str(uuid.uuid4()))."""
    while True:
        raw = bytearray(os.urandom(16 * batch))
        for at in range(0, 16 * batch, 16):
            raw[at + 6] = (raw[at + 6] & 0x0F) | 0x40
            raw[at + 8] = (raw[at + 8] & 0x3F) | 0x80
            h = raw[at:at + 16].hex()
            yield f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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
        self._ids = uuid4_strings()  # per emitter: a generator must not be shared between threads
        # the envelope fields that never change within a run are encoded once, not per event
        self._encode = constant_fields_encoder(self._schema, {"run_set": run_set, "run_id": run_id,
                                                              "unit_id": unit_id, "producer": producer})
        # emit(kind, payload, visibility): typed per kind (membench/schemas/payloads.py, generated), so a type
        # checker refuses a wrong payload key or value at every call site; emit_any is the same call
        # for a kind known only at run time (a replayed transcript), checked by the encoder alone.
        self.emit: Emit[Event] = self._emit
        self.emit_any = self._emit

    def _emit(self, kind: str, payload: Mapping[str, Any], visibility: str = "agent") -> Event:
        event_id, ts = next(self._ids), time.time_ns() // 1000
        digest, datum = seal_body(self._prev, self._encode({
            "event_id": event_id, "session_index": self.session_index, "seq": self._seq, "ts": ts, "kind": kind,
            "visibility": visibility, "prev_hash": self._prev, "payload": (NAMESPACE + kind, payload), "hash": "",
        }))
        event = Event(event_id, self.run_set, self.run_id, self.unit_id, self.session_index, self._seq, ts,
                      self._producer, kind, visibility, self._prev,
                      payload,  # type: ignore[arg-type]  # a TypedDict payload is a dict at run time; not copied
                      digest)
        self._seq += 1
        self._prev = event.hash
        self.emitted.append(event)
        self._publish(event, datum)
        return event
