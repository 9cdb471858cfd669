"""`membench bench concurrency`: how many units one run keeps in flight when each mostly waits on a
model, and what the gateway adds to a model call under that load.

Set-up per level (a worker count N): a scripted model server (membench/bench/scripted_model_server.py) in a
process of its own that answers every call after `delay_s` (a slow model), and a real `membench run`
of the smoke pack with the built-in `openai:` loop through the gateway, `--workers N`, bubblewrap
sandboxes, in a fresh MEMBENCH_HOME. The grid has `rounds × N` units (condition B0, as many seeds as
needed), so each worker runs about `rounds` units.

Measured, from the run set's log and the process:

- units in flight: from each run's RunStarted and RunEnded timestamps, the mean over the grid's
  window (first start to last end) and the maximum;
- units per minute over that window;
- model calls per unit, and the gateway's added latency per call: the ModelCall's `latency_ms`
  (the gateway's time from the agent's request to the answer relayed) minus the server's `delay_s`,
  p50 and p95;
- CPU seconds per unit: the command's CPU (every process it starts, sandboxes included: a cgroup v1
  `cpuacct` group of its own where the machine has one, else `getrusage`, which misses the
  sandboxes' processes) minus that of the same command run again on the complete run set
  (start-up, recovery, report and verification: no unit), over the units;
- peak resident memory of the command's process tree (sampled), and per unit in flight.

Two references:

    ideal units/min     = N × 60 / (calls per unit × delay_s)   every unit only waiting on its model
    CPU ceiling units/min = cores × 60 / CPU s per unit          every core busy with units

and the ratios of the measured rate to each. A level near the CPU ceiling cannot gain from more
workers; a level far below both is limited elsewhere (the harness's own serial work). The
arithmetic is `level_figures` (unit-tested); the runs are `measure_level`.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
SEQUENCES = 3  # the smoke pack's sequences: units per seed at one condition


@dataclass(frozen=True)
class Level:
    workers: int
    units: int
    window_s: float
    units_per_min: float
    in_flight_mean: float
    in_flight_max: int
    calls_per_unit: float
    gateway_added_p50_ms: float
    gateway_added_p95_ms: float
    cpu_s_per_unit: float
    peak_rss_mb: float
    mb_per_unit: float
    ideal_units_per_min: float
    cpu_ceiling_units_per_min: float
    of_ideal: float
    of_cpu_ceiling: float
    unit_wall_s: float  # mean wall time of one unit (RunStarted to RunEnded)


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def in_flight(spans: list[tuple[float, float]]) -> tuple[float, int, float]:
    """(time-weighted mean, max, window) of the number of spans open at once over [first start, last end]."""
    if not spans:
        return 0.0, 0, 0.0
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda p: (p[0], p[1]))
    start, end = points[0][0], points[-1][0]
    area, current, peak, last = 0.0, 0, 0, start
    for at, step in points:
        area += current * (at - last)
        current += step
        peak = max(peak, current)
        last = at
    window = end - start
    return (area / window if window > 0 else float(current)), peak, window


def level_figures(workers: int, spans: list[tuple[float, float]], latencies_ms: list[float], delay_s: float,
                  cpu_s: float, peak_rss_mb: float, n_cores: int) -> Level:
    """The figures of one level from its raw measurements: SPANS (seconds) of each unit, the gateway's
    LATENCIES_MS of each model call, the units' CPU_S, the process tree's PEAK_RSS_MB."""
    units = len(spans)
    mean, peak, window = in_flight(spans)
    rate = units * 60.0 / window if window > 0 else 0.0
    calls = len(latencies_ms) / units if units else 0.0
    added = [ms - delay_s * 1000.0 for ms in latencies_ms]
    cpu_per_unit = cpu_s / units if units else 0.0
    ideal = workers * 60.0 / (calls * delay_s) if calls and delay_s else 0.0
    ceiling = n_cores * 60.0 / cpu_per_unit if cpu_per_unit > 0 else 0.0
    return Level(workers=workers, units=units, window_s=window, units_per_min=rate, in_flight_mean=mean,
                 in_flight_max=peak, calls_per_unit=calls, gateway_added_p50_ms=percentile(added, 0.5),
                 gateway_added_p95_ms=percentile(added, 0.95), cpu_s_per_unit=cpu_per_unit, peak_rss_mb=peak_rss_mb,
                 mb_per_unit=peak_rss_mb / peak if peak else 0.0, ideal_units_per_min=ideal,
                 cpu_ceiling_units_per_min=ceiling, of_ideal=rate / ideal if ideal else 0.0,
                 of_cpu_ceiling=rate / ceiling if ceiling else 0.0,
                 unit_wall_s=statistics.fmean(e - s for s, e in spans) if spans else 0.0)


# ------------------------------------------------------------------------------------ the runs
def _serve(conn: Any, pack_dir: str, delay_s: float) -> None:
    from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack

    with ScriptedUpstream(script_from_pack(Path(pack_dir)), delay_s=delay_s) as upstream:
        conn.send(upstream.base_url)
        conn.recv()


class SlowModel:
    """The scripted model server in its own process (a slow model's answers, `delay_s` each)."""

    def __init__(self, delay_s: float):
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._conn = parent
        self.process = context.Process(target=_serve, args=(child, str(REPO / "fixtures" / "smoke"), delay_s),
                                       daemon=True)

    def __enter__(self) -> str:
        self.process.start()
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


def _tree_rss_mb(root: int) -> float:
    """Resident memory of ROOT and every descendant (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 2**20


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _cpu_group() -> Path | None:
    """A cgroup v1 `cpuacct` group of our own, where there is one to make: it counts the CPU of every
    process the command starts, the sandboxes' included (they move into memory and pids cgroups of
    their own, never out of this one), which `getrusage` misses (their processes are reaped inside
    the sandbox's PID namespace)."""
    path = CPUACCT / f"membench-bench-{os.getpid()}-{time.monotonic_ns()}"
    try:
        path.mkdir()
    except OSError:
        return None
    return path


def _run(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float, float]:
    """(the finished command, its CPU seconds with every process it started, the peak RSS of its
    process tree)."""
    group = _cpu_group()
    if group is not None:
        argv = ["/bin/sh", "-c", 'echo $$ > "$1" && shift && exec "$@"', "membench-bench", str(group / "cgroup.procs"),
                *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss_mb(proc.pid))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if group is not None:
        try:
            cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        finally:
            try:
                group.rmdir()
            except OSError:  # a straggler still in it: the group goes with the machine's next clean-up
                pass
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), cpu, peak[0]


def measure_level(workers: int, base_url: str, delay_s: float, rounds: int, sandbox_nice: int | None,
                  say: Callable[[str], None], n_cores: int) -> Level:
    from membench.bus.attempts import read_log

    seeds = max(1, math.ceil(workers * rounds / SEQUENCES))
    with tempfile.TemporaryDirectory(prefix="membench-bench-concurrency-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "MEMBENCH_HOME": str(home), "MEMBENCH_MODEL_API_KEY": "bench"}
        if sandbox_nice is not None:
            env["MEMBENCH_SANDBOX_NICE"] = str(sandbox_nice)
        run_set = f"concurrency-{workers}"
        argv = [sys.executable, "-m", "membench", "run", "smoke", "--agent", "openai:local-model", "--model-base-url",
                base_url, "--conditions", "B0", "--seeds", ",".join(str(s) for s in range(1, seeds + 1)),
                "--workers", str(workers), "--run-set", run_set]
        say(f"{workers} workers: {seeds * SEQUENCES} units ...")
        done, cpu, peak = _run(argv, env)
        if done.returncode != 0:
            raise RuntimeError(f"membench run exited {done.returncode}: {done.stderr[-2000:]}")
        again, fixed_cpu, _ = _run(argv, env)  # nothing to run: the command's fixed CPU
        if again.returncode != 0:
            raise RuntimeError(f"membench run (again) exited {again.returncode}: {again.stderr[-2000:]}")
        starts: dict[str, float] = {}
        spans: list[tuple[float, float]] = []
        latencies: list[float] = []
        for event, _ in read_log(home / "runs" / run_set / "events.avro"):
            if event.kind == "RunStarted":
                starts[event.run_id] = event.ts / 1e6
            elif event.kind == "RunEnded" and event.run_id in starts:
                spans.append((starts[event.run_id], event.ts / 1e6))
            elif event.kind == "ModelCall" and event.payload.get("status") == "ok":
                latencies.append(float(event.payload["latency_ms"]))
    return level_figures(workers, spans, latencies, delay_s, max(0.0, cpu - fixed_cpu), peak, n_cores)


def bench_concurrency(levels: list[int], delay_s: float, rounds: int, sandbox_nice: int | None,
                      say: Callable[[str], None]) -> dict[str, Any]:
    from membench.pipeline.worker_count import cores

    n_cores = cores()
    out = []
    with SlowModel(delay_s) as base_url:
        for workers in levels:
            out.append(asdict(measure_level(workers, base_url, delay_s, rounds, sandbox_nice, say, n_cores)))
    return {"delay_s": delay_s, "rounds": rounds, "cores": n_cores,
            "sandbox_nice": sandbox_nice, "levels": out}


def format_level(level: Level) -> str:
    return (f"{level.workers:>4} workers: {level.units} units, {level.in_flight_mean:.1f} in flight (max "
            f"{level.in_flight_max}), {level.units_per_min:.1f} units/min = {level.of_ideal:.2f} of the ideal "
            f"{level.ideal_units_per_min:.1f}, {level.of_cpu_ceiling:.2f} of the CPU ceiling "
            f"{level.cpu_ceiling_units_per_min:.1f}; {level.cpu_s_per_unit:.2f} CPU s and {level.mb_per_unit:.0f} MB "
            f"per unit, unit wall {level.unit_wall_s:.1f} s, {level.calls_per_unit:.1f} calls per unit; gateway "
            f"adds p50 {level.gateway_added_p50_ms:.0f} ms, p95 {level.gateway_added_p95_ms:.0f} ms")
