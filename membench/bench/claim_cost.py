"""`membench bench claims`: what a runner's claim on a unit's status costs (docs/design.md §2
**Claims**), against a real broker: per unit, the status read before deciding, a status record
produced and acknowledged without a claim (what recording `started` cost before), the same with the
claim check, and a second claim on the same base that loses (its check and its restatement)."""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path


def _figure(seconds: list[float]) -> dict:
    ordered = sorted(seconds)
    return {"median_ms": statistics.median(ordered) * 1000, "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000}


def bench_claims(bootstrap: str, units: int, log) -> dict:
    from membench.pipeline.distributed.unit_claims import record_claim, restate
    from membench.pipeline.distributed.topic_reads import StatusView
    from membench.bus.kafka import KafkaBus
    from membench.bus.topics import topics_from_dsn

    dsn = f"kafka://{bootstrap}/bench{uuid.uuid4().hex[:8]}"
    topics = topics_from_dsn(dsn)
    timings: dict[str, list[float]] = {"status_read": [], "record_without_claim": [], "record_with_claim": [],
                                       "lost_claim": []}
    outcomes = {"won": 0, "lost": 0, "settled": 0}
    with tempfile.TemporaryDirectory(prefix="membench-bench-") as tmp:
        bus = KafkaBus(dsn, "bench-claims", Path(tmp) / "spool")
        view = StatusView(topics)
        try:
            for i in range(units):
                bus.mark_unit(f"u{i}", "queued", "", 0)
            bus.flush()
            view.refresh()
            log(f"{units} units: decide, record, claim, lose ...")
            for i in range(units):
                unit, run = f"u{i}", f"run-{i}"
                started = time.perf_counter()
                view.refresh()
                base = view.state(f"{bus.run_set}/{unit}").offset
                read = time.perf_counter()
                bus.mark_unit(f"plain{i}", "started", run, 1)  # the record as it was before claims
                bus.flush()
                plain = time.perf_counter()
                won = record_claim(view, bus, unit, "started", run, 1, f"bench-a/{i}", base)
                claimed = time.perf_counter()
                lost = record_claim(view, bus, unit, "started", run, 1, f"bench-b/{i}", base)
                settled = restate(view, bus, unit, f"bench-b/{i}")
                done = time.perf_counter()
                outcomes["won"] += won
                outcomes["lost"] += not lost
                outcomes["settled"] += settled
                for name, seconds in (("status_read", read - started), ("record_without_claim", plain - read),
                                      ("record_with_claim", claimed - plain), ("lost_claim", done - claimed)):
                    timings[name].append(seconds)
        finally:
            view.close()
            bus.close()
    figures = {name: _figure(values) for name, values in timings.items()}
    extra = figures["record_with_claim"]["median_ms"] - figures["record_without_claim"]["median_ms"]
    return {"units": units, **outcomes, "figures": figures, "claim_check_median_ms": extra}


def format_lines(result: dict) -> list[str]:
    f = result["figures"]
    return [f"{result['units']} units: {result['won']} first claims won, {result['lost']} second claims on the same "
            f"base lost, {result['settled']} keys settled after the loser's restatement",
            *(f"{name.replace('_', ' ')}: median {f[name]['median_ms']:.1f} ms, p90 {f[name]['p90_ms']:.1f} ms"
              for name in ("status_read", "record_without_claim", "record_with_claim", "lost_claim")),
            f"the claim check adds {result['claim_check_median_ms']:.1f} ms per unit (median, with claim - without)"]
