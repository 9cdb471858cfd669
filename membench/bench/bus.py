"""`membench bench bus`: throughput of the event pipeline on synthetic concurrent runs.

Figures: the producer-side cost of emitting one event (seal + hash chain + hand-off to the
Kafka producer; median and p95 over every emit, as the emitting thread's CPU time and as elapsed
time), the producer rate, the end-to-end rate through runner → Kafka → `membench process`
workers (of either engine, one or more) → `membench sink` → warehouse (events whose raw row and derived rows are in the warehouse,
per second of wall time), the consumer floors of `membench.bench.floor` on the same topic, and the
embedded path's rate (file log + in-process processors + chDB) on the same runs.

Emit cost is the CPU time because that is the cost: with more runner threads than cores the
elapsed time of an emit also counts waiting for the GIL, the bus lock and a core, and its median
swings between runs (12–130 µs for the same code here) with the scheduler.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from membench.bus.emitter import RunEmitter
from membench.warehouse import queries
from membench.schemas.events import bounded_text


@dataclass
class EmitTimings:
    """Per-emit durations in ns: `cpu` is the emitting thread's CPU time (the cost of the emit),
    `wall` the elapsed time, which also counts waiting for the GIL, the bus lock and the cores."""

    cpu: list[int] = field(default_factory=list)
    wall: list[int] = field(default_factory=list)

    def extend(self, other: "EmitTimings") -> None:
        self.cpu.extend(other.cpu)
        self.wall.extend(other.wall)


def synthetic_run(emit_run: RunEmitter, sessions: int, turns: int, timings: EmitTimings | None = None) -> int:
    """One run's worth of realistic events; returns the number emitted."""
    wall, cpu = time.perf_counter_ns, time.thread_time_ns

    def emit(kind, payload, visibility="agent"):
        if timings is None:
            emit_run.emit(kind, payload, visibility)
            return
        started_cpu, started = cpu(), wall()
        emit_run.emit(kind, payload, visibility)
        ended = wall()
        timings.cpu.append(cpu() - started_cpu)
        timings.wall.append(ended - started)

    text = bounded_text("The reviewer asked for the registered client id header on every request. " * 2)
    emit("RunStarted", {"suite": "bench", "task": "t", "condition": "B5", "seed": 1, "agent": "bench",
                        "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c", "pack_digest": "p",
                        "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1}, "harness")
    for index in range(1, sessions + 1):
        emit_run.session_index = index
        emit("SessionStarted", {"session_index": index, "instruction": text, "start_state": "continuation",
                                "workspace_digest": "w", "scored": index == sessions, "oracle_id": f"o{index}"})
        emit("MemoryRead", {"query": text, "candidates": ["m1", "m2"], "admitted_ids": ["m1"], "tokens_admitted": 40,
                            "token_budget": 2000, "context": text})
        for turn in range(turns):
            emit("Turn", {"role": "agent", "text": text, "source_event_id": None, "source_kind": None,
                          "input_tokens": 900, "cached_tokens": 300, "output_tokens": 80, "reasoning_tokens": 20,
                          "latency_ms": 700})
            emit("ToolCall", {"call_id": f"c{turn}", "name": "edit", "arguments_digest": "a", "is_patch": turn % 3 == 0})
        emit("PatchProduced", {"files": ["a.py"], "added_lines": 3, "removed_lines": 1, "production_paths": ["a.py"],
                               "test_paths": [], "stripped_paths": [], "diff_sha256": "d"})
        emit("OracleVerdict", {"oracle_id": f"o{index}", "outcome": "pass", "cases": [], "exit_status": 0,
                               "inconclusive": False, "duration_ms": 200}, "harness")
        emit("SessionEnded", {"session_index": index, "status": "completed"})
    emit_run.session_index = -1
    emit("RunEnded", {"status": "completed", "error_type": None}, "harness")
    return 2 + sessions * (5 + 2 * turns)


def _drive(publish, run_set: str, runs: int, threads: int, sessions: int, turns: int, timings: EmitTimings | None):
    lock = threading.Lock()
    per_thread = [list(range(i, runs, threads)) for i in range(threads)]

    def locked(event, datum):
        with lock:
            publish(event, datum)

    def work(indices):
        local = EmitTimings()
        for i in indices:
            emitter = RunEmitter(run_set, str(uuid.uuid4()), f"bench/t/B5/{i}", locked)
            emitter.emitted = _Discard()  # keep memory flat in long benchmarks
            synthetic_run(emitter, sessions, turns, local if timings is not None else None)
        if timings is not None:
            with lock:
                timings.extend(local)

    pool = [threading.Thread(target=work, args=(ix,)) for ix in per_thread]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


class _Discard(list):
    def append(self, item):  # noqa: D401 - the emitter's history is not needed here
        pass


def bench_embedded(runs: int, threads: int, sessions: int, turns: int) -> dict:
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.warehouse.client import connect

    with tempfile.TemporaryDirectory(prefix="membench-bench-") as tmp:
        warehouse = connect(f"chdb://{Path(tmp) / 'wh'}")
        try:
            pipeline = EmbeddedPipeline(Path(tmp) / "events.avro", warehouse)
            started = time.perf_counter()
            _drive(pipeline.publish, "bench-embedded", runs, threads, sessions, turns, None)
            pipeline.close()
            seconds = time.perf_counter() - started
            rows = queries.raw_rows(warehouse)
        finally:
            warehouse.close()
    return {"events": rows, "seconds": seconds, "events_per_s": rows / seconds}


def bench_kafka(bootstrap: str, runs: int, threads: int, sessions: int, turns: int, log, engine: str = "kafka",
                workers: int = 1, floors: bool = True) -> dict:
    from membench.bench.floor import faust_noop_rate, kafka_consume_rate
    from membench.bus.kafka import KafkaBus
    from membench.bus.topics import topics_from_dsn

    namespace = "bench" + uuid.uuid4().hex[:8]
    dsn = f"kafka://{bootstrap}/{namespace}"
    env = {**os.environ}
    with tempfile.TemporaryDirectory(prefix="membench-bench-") as tmp:
        env["MEMBENCH_HOME"] = str(Path(tmp) / "home")
        bus = KafkaBus(dsn, "bench", Path(tmp) / "spool")
        procs = [subprocess.Popen([sys.executable, "-m", "membench", "process", "--engine", engine, "--bus", dsn],
                                  env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(Path(tmp) / f"worker{i}.log", "w")) for i in range(workers)]
        try:
            time.sleep(8 + 4 * (workers - 1))  # let the workers join their group before the clock starts
            log("producing ...")
            timings = EmitTimings()
            machine_before = (time.perf_counter(), _machine_cpu())
            worker_cpu_before = sum(_process_cpu_seconds(p.pid) for p in procs)
            runner_cpu_before = _own_cpu_seconds()
            started = time.perf_counter()
            sink = subprocess.Popen([sys.executable, "-m", "membench", "sink", "--bus", dsn, "--warehouse",
                                     f"chdb://{Path(tmp) / 'wh'}", "--until-idle", "--idle-seconds", "3"],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            _drive(bus.publish, "bench", runs, threads, sessions, turns, timings)
            bus.flush()
            produced_s = time.perf_counter() - started
            runner_cpu = _own_cpu_seconds() - runner_cpu_before
            log("draining through the worker and the sink ...")
            out, _ = sink.communicate(timeout=3600)
            end_to_end_s = time.perf_counter() - started - 3.0  # the sink waits 3 s of quiet before exiting
            worker_cpu = sum(_process_cpu_seconds(p.pid) for p in procs) - worker_cpu_before
            machine_busy = _busy_fraction(machine_before, (time.perf_counter(), _machine_cpu()), end_to_end_s)
            stats = json.loads(out.strip().splitlines()[-1])
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(60)
        events = len(timings.wall)
        if floors:
            log("consumer floors: a no-op faust agent, the confluent-kafka consumer ...")
            faust_floor = faust_noop_rate(dsn, events)
            kafka_floor = kafka_consume_rate(bootstrap, topics_from_dsn(dsn).trajectory, events)
        else:
            faust_floor = kafka_floor = {"messages_per_s": None}
    return {
        "engine": engine, "workers": workers,
        "events": events, "sink_raw": stats["raw"], "sink_derived": stats["derived"],
        "emit_cpu_median_us": statistics.median(timings.cpu) / 1000,
        "emit_cpu_p95_us": _p95(timings.cpu) / 1000,
        "emit_wall_median_us": statistics.median(timings.wall) / 1000,
        "emit_wall_p95_us": _p95(timings.wall) / 1000,
        "produce_events_per_s": events / produced_s,
        "end_to_end_seconds": end_to_end_s, "end_to_end_events_per_s": events / end_to_end_s,
        "faust_noop_messages_per_s": faust_floor["messages_per_s"],
        "kafka_consumer_messages_per_s": kafka_floor["messages_per_s"],
        # CPU time per event of each stage: the runner process (emit + librdkafka), the workers
        # (all of them, from the clock start, so their start-up is not counted), the sink (its own process_time
        # while consuming); and how busy the machine's cores were over the end-to-end time
        "cpu_us_per_event": {"runner": runner_cpu / events * 1e6, "worker": worker_cpu / events * 1e6,
                             "sink": stats["cpu_seconds"] / events * 1e6},
        "machine_busy_fraction": machine_busy,
        "ceiling_events_per_s": stage_ceiling(
            {"runner": runner_cpu / events * 1e6, "worker": worker_cpu / events * 1e6,
             "sink": stats["cpu_seconds"] / events * 1e6}, _cores()),
    }


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def stage_ceiling(cpu_us_per_event: dict[str, float], cores: int) -> float:
    """The end-to-end rate the measured stages allow at most: every core busy with nothing but
    runner, workers and sink, each event costing the sum of their CPU per event (the broker's own
    CPU not counted, so the real ceiling is lower). A rate far below it is lost to waiting and to
    other load; a target above it is out of reach with these stages on this machine."""
    total = sum(cpu_us_per_event.values())
    return cores * 1e6 / total if total > 0 else float("inf")


def bench_emit(events: int = 20_000) -> dict:
    """One thread, no bus: the cost of sealing and chaining alone."""
    timings = EmitTimings()
    emitter = RunEmitter("bench-emit", str(uuid.uuid4()), "bench/t/B5/0", lambda event, datum: None)
    emitter.emitted = _Discard()
    while len(timings.wall) < events:
        synthetic_run(emitter, 3, 8, timings)
        emitter = RunEmitter("bench-emit", str(uuid.uuid4()), "bench/t/B5/0", lambda event, datum: None)
        emitter.emitted = _Discard()
    return {"events": len(timings.wall), "emit_cpu_median_us": statistics.median(timings.cpu) / 1000,
            "emit_wall_median_us": statistics.median(timings.wall) / 1000}


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _machine_cpu() -> tuple[int, int]:
    """(idle, total) jiffies over all cores, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return values[3] + values[4], sum(values)  # idle + iowait


def _busy_fraction(before: tuple[float, tuple[int, int]], after: tuple[float, tuple[int, int]],
                   busy_window_s: float) -> float:
    """The share of all cores' time that was busy, over the first `busy_window_s` of the sampled
    window: busy jiffies / all jiffies of that many seconds. The sink's closing quiet (the rest of
    the window) adds next to nothing busy, so it is left out of the denominator only."""
    (t0, (idle0, total0)), (t1, (idle1, total1)) = before, after
    total = total1 - total0
    if total <= 0 or t1 <= t0:
        return 0.0
    busy = total - (idle1 - idle0)
    return min(1.0, busy / (total * min(1.0, busy_window_s / (t1 - t0))))


def _p95(values: list[int]) -> int:
    return sorted(values)[int(0.95 * len(values))]
