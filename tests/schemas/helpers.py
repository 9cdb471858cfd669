"""Event builders for tests."""

from __future__ import annotations

from membench.schemas.events import GENESIS_HASH, Event, bounded_text


def sample_event(seq: int = 0, text: str = "hello", run_id: str = "run-1", kind: str = "Turn") -> Event:
    return Event(
        event_id=f"ev-{run_id}-{seq}", run_set="rs", run_id=run_id, unit_id="suite/task/B0/1",
        session_index=1, seq=seq, ts=1_700_000_000_000_000 + seq, producer="test", kind=kind,
        visibility="agent", prev_hash=GENESIS_HASH,
        payload={"role": "user", "text": bounded_text(text), "source_event_id": None, "source_kind": None,
                 "input_tokens": 1, "cached_tokens": 0, "output_tokens": 2, "reasoning_tokens": 0, "latency_ms": 3},
    )
