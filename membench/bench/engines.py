"""`membench bench bus`: CPU per event of each processor engine, and the floors under it.

The same framed messages (synthetic runs, as `membench.bench.bus` builds them) are used for
everything:

- **in-process floors**, on this process's CPU time (`time.process_time`): decoding a message
  (fastavro, a newest-version datum without logical types: `decode(…, plain=True)`, as both engines
  do) and building the `Event`; SHA-256 over the datums
  alone; folding the decoded events (`RunSetProcessor`); encoding the derived events. The kafka
  engine's work per event is the sum of these plus the consumer's and the producer's share.
- **engine drain**: each engine's worker (`membench process --engine E`) on a fresh namespace
  first drains one run, untimed (it has then joined its group, been assigned the partitions and
  committed); then the other messages are produced as fast as the producer goes and the worker
  drains them; CPU per event = the worker's CPU time (from /proc) between the first timed message
  produced and the group's committed offsets reaching the end, over those messages. The rate =
  messages over that wall time (it includes up to one commit interval, 1 s, at the end).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from membench.bench.bus import _Discard, _process_cpu_seconds, synthetic_run


def synthetic_messages(runs: int, sessions: int, turns: int) -> list[tuple[bytes, bytes]]:
    """(key, framed message) of `runs` synthetic runs, run after run."""
    from membench.bus.emitter import RunEmitter
    from membench.schemas.registry import default_registry

    header = b"\xc3\x01" + default_registry().latest("event").fingerprint
    out: list[tuple[bytes, bytes]] = []
    for i in range(runs):
        run_id = str(uuid.uuid4())
        key = run_id.encode()
        emitter = RunEmitter("bench-engines", run_id, f"bench/t/B5/{i}",
                             lambda event, datum: out.append((key, header + datum)))
        emitter.emitted = _Discard()
        synthetic_run(emitter, sessions, turns)
    return out


def in_process_floors(messages: list[tuple[bytes, bytes]]) -> dict:
    """CPU µs per event of decode, SHA-256, fold and derived encode, each alone."""
    import hashlib

    from membench.processors import RunSetProcessor
    from membench.schemas.codec import decode, encode
    from membench.schemas.events import Event
    from membench.schemas.registry import default_registry

    n = len(messages)
    clock = time.process_time
    started = clock()
    events = [Event.from_record(decode(value, plain=True)[1]) for _, value in messages]
    decode_s = clock() - started
    started = clock()
    for _, value in messages:
        hashlib.sha256(value[10:]).digest()
    sha_s = clock() - started
    processor = RunSetProcessor()
    started = clock()
    derived = [d for event in events for d in processor.apply(event)]
    fold_s = clock() - started
    schema = default_registry().latest("derived")
    started = clock()
    for item in derived:
        encode(schema, item.to_record())
    encode_s = clock() - started
    return {"events": n, "derived": len(derived),
            "decode_us": decode_s / n * 1e6, "sha256_us": sha_s / n * 1e6, "fold_us": fold_s / n * 1e6,
            "derived_encode_us": encode_s / n * 1e6,
            "read_floor_events_per_s": n / decode_s if decode_s else 0.0}


def _produce(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]]) -> None:
    from confluent_kafka import Producer

    from membench.bus.kafka_config import producer_config

    producer = Producer(producer_config(bootstrap, {"linger.ms": 20, "queue.buffering.max.messages": 2_000_000}))
    for key, value in messages:
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)


def _wait_caught_up(bootstrap: str, group: str, topic: str, timeout_s: float, procs, what: str) -> None:
    from membench.bus.kafka_read import consumer_group_caught_up

    deadline = time.monotonic() + timeout_s
    while not consumer_group_caught_up(bootstrap, group, topic):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            raise RuntimeError(f"the workers did not {what}")
        time.sleep(0.2)


def engine_drain(bootstrap: str, engine: str, messages: list[tuple[bytes, bytes]], warmup: int,
                 workers: int = 1, timeout_s: float = 1800.0) -> dict:
    """`messages[:warmup]` (whole runs) are drained first, untimed: the workers have then joined,
    been assigned the partitions and committed once; the rest is timed."""
    from membench.bus.kafka import ensure_topics
    from membench.bus.topics import topics_from_dsn

    dsn = f"kafka://{bootstrap}/bench{uuid.uuid4().hex[:8]}"
    topics = topics_from_dsn(dsn)
    ensure_topics(topics)
    group = topics.group("processor")
    timed = messages[warmup:]
    with tempfile.TemporaryDirectory(prefix="membench-bench-") as tmp:
        env = {**os.environ, "MEMBENCH_HOME": str(Path(tmp) / "home")}
        procs = [subprocess.Popen([sys.executable, "-m", "membench", "process", "--engine", engine, "--bus", dsn],
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(Path(tmp) / f"worker{i}.log", "w"), start_new_session=True)
                 for i in range(workers)]
        try:
            _produce(bootstrap, topics.trajectory, messages[:warmup])
            _wait_caught_up(bootstrap, group, topics.trajectory, 600, procs, "drain the warm-up runs")
            cpu_before = sum(_process_cpu_seconds(p.pid) for p in procs)
            started = time.perf_counter()
            _produce(bootstrap, topics.trajectory, timed)
            _wait_caught_up(bootstrap, group, topics.trajectory, timeout_s, procs, f"drain {len(timed)} messages")
            seconds = time.perf_counter() - started
            cpu = sum(_process_cpu_seconds(p.pid) for p in procs) - cpu_before
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
    n = len(timed)
    return {"engine": engine, "workers": workers, "events": n, "seconds": seconds, "events_per_s": n / seconds,
            "cpu_us_per_event": cpu / n * 1e6}


def bench_engines(bootstrap: str, runs: int, sessions: int, turns: int, log) -> dict:
    from membench.bench.floor import faust_noop_rate, kafka_consume_rate

    log(f"engines: building {runs} synthetic runs ...")
    messages = synthetic_messages(runs, sessions, turns)
    log("in-process floors: decode, SHA-256, fold, derived encode ...")
    floors = in_process_floors(messages)
    drains = {}
    for engine in ("kafka", "faust"):
        log(f"engine {engine}: one worker draining {len(messages)} messages ...")
        drains[engine] = engine_drain(bootstrap, engine, messages, warmup=len(messages) // runs)
    log("consumer floors on a topic holding the same messages ...")
    from membench.bus.kafka import ensure_topics
    from membench.bus.topics import topics_from_dsn

    dsn = f"kafka://{bootstrap}/bench{uuid.uuid4().hex[:8]}"
    topics = topics_from_dsn(dsn)
    ensure_topics(topics)
    _produce(bootstrap, topics.trajectory, messages)
    faust_floor = faust_noop_rate(dsn, len(messages))
    kafka_floor = kafka_consume_rate(bootstrap, topics.trajectory, len(messages))
    kafka_work_floor = (kafka_floor["cpu_us_per_message"] + floors["decode_us"] + floors["fold_us"]
                        + floors["derived_encode_us"])
    return {
        "events": len(messages), "in_process": floors, "drain": drains,
        "faust_noop": faust_floor, "kafka_consumer": kafka_floor,
        "ratios": {
            # the kafka engine's CPU per event over its floor: consuming + decode + fold + derived encode
            "kafka_engine_over_floor": drains["kafka"]["cpu_us_per_event"] / kafka_work_floor,
            "kafka_engine_floor_us": kafka_work_floor,
            # the faust engine's rate on one core as a share of the no-op faust agent's (target >= 0.7):
            # a saturated worker's rate is 1 / its CPU per event, so the ratio of CPU costs
            "faust_engine_rate_over_noop": faust_floor["cpu_us_per_message"] / drains["faust"]["cpu_us_per_event"]
            if drains["faust"]["cpu_us_per_event"] else 0.0,
        },
    }
