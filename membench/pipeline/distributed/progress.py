"""`membench runner --progress`: every grid's progress, from any machine."""

from __future__ import annotations

from membench.pipeline.distributed.topic_reads import StatusView
from membench.pipeline.settings import Settings


def grid_progress(settings: Settings, run_set: str | None) -> dict:
    """Unit counts per status of each run set (or of one), from the compacted unit-status topic:
    what any machine sees of a grid's progress. `attempts_abandoned` counts the attempts before each
    unit's newest one that were closed (attempt numbers start at 1)."""
    from membench.bus.topics import topics_from_dsn

    view = StatusView(topics_from_dsn(settings.bus))
    try:
        view.refresh()
        records = dict(view.records)
    finally:
        view.close()
    out: dict[str, dict] = {}
    for key, record in sorted(records.items()):
        rs, _, _unit = key.partition("/")
        if run_set is not None and rs != run_set:
            continue
        entry = out.setdefault(rs, {"units": 0, "queued": 0, "started": 0, "abandoned": 0, "completed": 0,
                                    "excluded": 0, "attempts_abandoned": 0})
        entry["units"] += 1
        state = record.get("status", "queued")
        entry[state] = entry.get(state, 0) + 1
        attempt = int(record.get("attempt", 0) or 0)
        entry["attempts_abandoned"] += max(0, attempt - 1) + (1 if state == "abandoned" else 0)
    return out
