"""Consumer floors for `membench bench bus`: how fast messages leave the trajectory topic when
nothing is done with them.

- `faust_noop_rate`: a faust-streaming agent with the worker's App settings that only counts
  messages (batches of `BATCH`, as the worker takes them). No worker built on faust-streaming can
  beat this figure on the same machine, so it bounds the end-to-end rate of one worker.
- `kafka_consume_rate`: the confluent-kafka (librdkafka) consumer reading the same messages, to
  show what the broker and the client library deliver without faust.

Both read the topic from its start with a fresh consumer group, in batches of `BATCH`, and
time from the first batch in hand to the last, so start-up and the group join are not counted
(the first batch is not counted either).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from membench.bus.kafka_config import consumer_config

BATCH = 500


def kafka_consume_rate(bootstrap: str, topic: str, messages: int, timeout_s: float = 600.0) -> dict:
    consumer = Consumer(consumer_config(bootstrap, f"bench-floor-{uuid.uuid4().hex[:8]}"))
    consumer.subscribe([topic])
    seen, timed, first, last = 0, 0, None, None
    cpu_first = cpu_last = 0.0
    deadline = time.monotonic() + timeout_s
    try:
        while seen < messages and time.monotonic() < deadline:
            batch = consumer.consume(BATCH, 1.0)
            count = sum(1 for msg in batch if not msg.error())
            seen += count
            if first is None:
                if count:  # the clock starts when the first batch is in hand
                    first, cpu_first = time.perf_counter(), time.process_time()
                continue
            timed += count
            last, cpu_last = time.perf_counter(), time.process_time()
    finally:
        consumer.close()
    return _rate(timed, messages, first, last, cpu_last - cpu_first)


def faust_noop_rate(dsn: str, messages: int, timeout_s: float = 600.0) -> dict:
    """Runs the no-op agent in its own process (faust owns the process's event loop and signals)."""
    with tempfile.TemporaryDirectory(prefix="membench-floor-") as tmp:
        out = Path(tmp) / "floor.json"
        proc = subprocess.Popen([sys.executable, "-m", "membench.bench.floor", dsn, str(messages), str(out),
                                 "worker"],
                                stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "floor.log", "w"))
        deadline = time.monotonic() + timeout_s
        try:
            while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not out.exists():
            log = (Path(tmp) / "floor.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the no-op faust agent did not read {messages} messages:\n{log}")
        return json.loads(out.read_text())


def _rate(seen: int, messages: int, first: float | None, last: float | None, cpu_s: float = 0.0) -> dict:
    """`cpu_us_per_message`: the consuming process's CPU time (every thread, librdkafka's too) over
    the same window, per message."""
    seconds = (last - first) if first is not None and last is not None else 0.0
    return {"messages": seen, "expected": messages, "seconds": seconds,
            "messages_per_s": seen / seconds if seconds > 0 else 0.0,
            "cpu_us_per_message": cpu_s / seen * 1e6 if seen else 0.0}


def _noop_worker(dsn: str, messages: int, out: Path) -> None:
    import faust

    from membench.pipeline.faust_worker import app_settings
    from membench.bus.topics import topics_from_dsn

    topics = topics_from_dsn(dsn)
    app = faust.App(topics.group(f"floor-{uuid.uuid4().hex[:8]}"), **app_settings(topics))
    raw = app.topic(topics.trajectory, key_type=bytes, value_type=bytes, allow_empty=True)
    state: dict[str, Any] = {"seen": 0, "timed": 0, "first": None, "cpu_first": 0.0}

    @app.agent(raw)
    async def count(stream):
        async for batch in stream.take_events(BATCH, within=0.05):
            state["seen"] += len(batch)
            if state["first"] is None:
                state["first"], state["cpu_first"] = time.perf_counter(), time.process_time()
            else:
                state["timed"] += len(batch)
            if state["seen"] >= messages:
                result = _rate(state["timed"], messages, state["first"], time.perf_counter(),
                               time.process_time() - state["cpu_first"])
                tmp = out.with_suffix(".tmp")
                tmp.write_text(json.dumps(result))
                os.replace(tmp, out)
                os._exit(0)  # the figure is written; faust's orderly shutdown would only add seconds

    faust.Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()


if __name__ == "__main__":
    dsn_arg, messages_arg, out_arg = sys.argv[1:4]
    sys.argv = [sys.argv[0], *sys.argv[4:]]  # faust's command line: "worker"
    _noop_worker(dsn_arg, int(messages_arg), Path(out_arg))
