"""`membench bench bus`, replay part: replay and rederive rates with --jobs 1 and 2, the
floors under them, and replay's peak memory on two log sizes.

On one log of synthetic runs (`membench.bench.bus.synthetic_run`, written by the embedded pipeline,
so a real events.avro and a real chDB warehouse that agree):

- **read floor**: the log's blocks decoded by fastavro alone (`membench.audit.logscan`), CPU µs per event;
- **replay**: `replay --verify` of the log (chains, diffs, folds, the comparison with the warehouse),
  with jobs 1 (in this process: CPU µs per event and the rate) and jobs 2 (worker processes: wall
  time, the rate);
- **rederive**: `membench rederive` of the run set with jobs 1 and 2 (wall time, the rate), which
  includes the staging tables, the swap's mutations and the copies;
- **chDB insert floor**: the run set's trajectory_events rows, as RowBinary, inserted alone into an
  empty table of the same structure (process CPU, chDB's threads included, µs per row);
- **replay memory**: the peak RSS (VmHWM) of a fresh process replaying a log of N runs and one
  of 4·N runs (`python -m membench.bench.replay_rates rss LOG`): memory holds the open runs, the ended
  runs' heads are on disk (`membench.audit.run_heads`), so the two should be about equal.

Command: `PYTHONPATH=. .venv/bin/python -m membench.bench.replay_rates 500` (or `membench bench bus`);
`… -m membench.bench.replay_rates log EVENTS.avro` profiles an in-process replay of a real log.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def write_runs(directory: Path, runs: int, sessions: int = 3, turns: int = 8, warehouse=None) -> Path:
    """`runs` synthetic runs as a log file (and into `warehouse`, when given, through the embedded pipeline)."""
    from membench.bench.bus import _Discard, synthetic_run
    from membench.bus.file import FileBus
    from membench.bus.emitter import RunEmitter

    path = directory / "events.avro"
    if warehouse is not None:
        from membench.pipeline.embedded import EmbeddedPipeline

        sink: EmbeddedPipeline | FileBus = EmbeddedPipeline(path, warehouse)
    else:
        sink = FileBus(path)
    for i in range(runs):
        emitter = RunEmitter("bench-replay", str(uuid.uuid4()), f"bench/t/B5/{i}", sink.publish)
        emitter.emitted = _Discard()
        synthetic_run(emitter, sessions, turns)
    sink.close()
    return path


def read_floor(path: Path) -> dict:
    from membench.audit.logscan import LogFile

    log = LogFile(path)
    started = time.process_time()
    events = sum(len(log.decode_block(*block)) for block in log.blocks())
    seconds = time.process_time() - started
    return {"events": events, "cpu_us_per_event": seconds / events * 1e6, "events_per_s": events / seconds}


def insert_floor(warehouse) -> dict:
    """The trajectory rows inserted alone into an empty copy of the table, CPU µs per row."""
    from membench.warehouse import queries, tables

    data = queries.raw_table_bytes(warehouse, "RowBinary")
    rows = queries.raw_rows(warehouse)
    columns = queries.raw_columns(warehouse)
    tables.drop_stage(warehouse, "bench_insert_floor")
    tables.create_stage(warehouse, "trajectory_events", "bench_insert_floor")
    try:
        started, wall = time.process_time(), time.perf_counter()
        warehouse.insert_bytes("bench_insert_floor", columns, data, "RowBinary", f"bench:{uuid.uuid4().hex}")
        cpu, seconds = time.process_time() - started, time.perf_counter() - wall
    finally:
        tables.drop_stage(warehouse, "bench_insert_floor")
    return {"rows": rows, "cpu_us_per_row": cpu / rows * 1e6, "rows_per_s": rows / seconds}


def _cpu() -> float:
    """This process's CPU seconds and its finished children's (the workers of --jobs), chDB threads included."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def replay_rates(path: Path, warehouse, jobs_list=(1, 2)) -> dict:
    from membench.audit.checks import SourceDirs
    from membench.audit.file_source import events_from_file
    from membench.audit.parallel_replay import replay_file_jobs
    from membench.audit.replayer import replay

    out = {}
    for jobs in jobs_list:
        findings: list = []
        cpu, wall, total = time.process_time(), time.perf_counter(), _cpu()
        if jobs == 1:
            result = replay(events_from_file(path, findings), findings, warehouse)
        else:
            result = replay_file_jobs(path, jobs, findings, warehouse, SourceDirs(file_dir=path.parent))
        cpu, wall, total = time.process_time() - cpu, time.perf_counter() - wall, _cpu() - total
        if not result.ok:
            raise RuntimeError(f"replay of the benchmark log found problems: {result.findings[:3]}")
        out[str(jobs)] = {"events": result.events, "seconds": wall, "events_per_s": result.events / wall,
                          # jobs 1: this process did everything; jobs 2: the parent's share only
                          "parent_cpu_us_per_event": cpu / result.events * 1e6,
                          # parent and workers (spawned interpreters' start-up included)
                          "cpu_us_per_event": total / result.events * 1e6}
    return out


def rederive_rates(warehouse, run_set: str, jobs_list=(1, 2)) -> dict:
    from membench.audit.rederive import rederive

    out = {}
    for jobs in jobs_list:
        cpu, total = time.process_time(), _cpu()
        result = rederive(warehouse, run_set, jobs)
        cpu, total = time.process_time() - cpu, _cpu() - total
        out[str(jobs)] = {"events": result.events, "seconds": result.seconds,
                          "events_per_s": result.events / result.seconds,
                          "parent_cpu_us_per_event": cpu / result.events * 1e6,
                          "cpu_us_per_event": total / result.events * 1e6}
    return out


def replay_rss(path: Path) -> int:
    """Peak RSS in bytes of a fresh process that replays `path` (no warehouse)."""
    proc = subprocess.run([sys.executable, "-m", "membench.bench.replay_rates", "rss", str(path)], capture_output=True,
                          text=True, check=True)
    return int(json.loads(proc.stdout.strip().splitlines()[-1])["rss_bytes"])


def bench_replay(runs: int = 500, log=lambda msg: None) -> dict:
    from membench.warehouse.client import connect

    with tempfile.TemporaryDirectory(prefix="membench-bench-replay-") as tmp_name:
        tmp = Path(tmp_name)
        warehouse = connect(f"chdb://{tmp / 'wh'}")
        try:
            log(f"replay: writing {runs} synthetic runs through the embedded pipeline ...")
            path = write_runs(tmp, runs, warehouse=warehouse)
            log("replay: the read floor, replay --verify with jobs 1 and 2 ...")
            floor = read_floor(path)
            replays = replay_rates(path, warehouse)
            log("rederive with jobs 1 and 2, the chDB insert floor ...")
            rederives = rederive_rates(warehouse, "bench-replay")
            inserts = insert_floor(warehouse)
        finally:
            warehouse.close()
        log(f"replay memory: logs of {runs} and {4 * runs} runs ...")
        small = tmp / "small"
        large = tmp / "large"
        small.mkdir()
        large.mkdir()
        rss = {str(runs): replay_rss(write_runs(small, runs)), str(4 * runs): replay_rss(write_runs(large, 4 * runs))}
    return {"runs": runs, "events": floor["events"], "read_floor": floor, "replay_verify": replays,
            "rederive": rederives, "chdb_insert_floor": inserts, "replay_rss_bytes": rss}


def format_lines(result: dict) -> list[str]:
    floor, rep, red, ins = (result["read_floor"], result["replay_verify"], result["rederive"],
                            result["chdb_insert_floor"])
    rss = result["replay_rss_bytes"]
    sizes = sorted(rss, key=int)
    return [
        f"replay/rederive on {result['events']:,} events ({result['runs']} runs): read floor (fastavro decode alone) "
        f"{floor['cpu_us_per_event']:.1f} us CPU per event ({floor['events_per_s']:,.0f} events/s)",
        f"replay --verify: jobs 1 {rep['1']['events_per_s']:,.0f} events/s wall, {rep['1']['cpu_us_per_event']:.1f} us "
        f"CPU per event; jobs 2 {rep['2']['events_per_s']:,.0f} events/s wall, {rep['2']['cpu_us_per_event']:.1f} us "
        f"CPU per event (parent {rep['2']['parent_cpu_us_per_event']:.1f})",
        f"rederive: jobs 1 {red['1']['events_per_s']:,.0f} events/s wall, {red['1']['cpu_us_per_event']:.1f} us CPU per "
        f"event; jobs 2 {red['2']['events_per_s']:,.0f} events/s wall, {red['2']['cpu_us_per_event']:.1f} us CPU per "
        f"event",
        f"chDB insert floor (trajectory rows as RowBinary, alone): {ins['cpu_us_per_row']:.1f} us CPU per row "
        f"({ins['rows_per_s']:,.0f} rows/s)",
        "replay peak RSS: " + ", ".join(f"{rss[s] / 2**20:.1f} MiB at {int(s):,} runs" for s in sizes),
    ]


def profile_log(path: Path, repeats: int = 3) -> dict:
    """CPU µs per event of an in-process replay of a real log (no warehouse), best of `repeats`, and
    of its parts alone: decode, decode + `Event`, the chain check, the fold."""
    from membench.audit.logscan import LogFile
    from membench.audit.file_source import events_from_file
    from membench.audit.replayer import replay
    from membench.processors import RunSetProcessor
    from membench.schemas.chain import ChainVerifier

    def best(work) -> float:
        times = []
        for _ in range(repeats):
            started = time.process_time()
            work()
            times.append(time.process_time() - started)
        return min(times)

    log = LogFile(path)
    items = list(events_from_file(path, []))
    n = len(items)

    def chain():
        verifier = ChainVerifier()
        for event, schema, datum in items:
            verifier.check(event, schema, datum)

    def fold():
        processor = RunSetProcessor(ended_window=None)
        for item in items:
            processor.apply(item[0])

    figures = {"replay": best(lambda: replay(events_from_file(path, []), [])),
               "decode": best(lambda: [log.decode_block(*block) for block in log.blocks()]),
               "decode_and_event": best(lambda: list(events_from_file(path, []))),
               "chain": best(chain), "fold": best(fold)}
    return {"events": n, **{f"{name}_us": seconds / n * 1e6 for name, seconds in figures.items()}}


def _rss_main(path: str) -> None:
    from membench.audit.file_source import events_from_file
    from membench.audit.replayer import replay

    findings: list = []
    replay(events_from_file(Path(path), findings), findings)
    # VmHWM, not ru_maxrss: the latter keeps the peak of the forked parent image from before exec
    hwm = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("VmHWM:"))
    print(json.dumps({"rss_bytes": int(hwm.split()[1]) * 1024}))


if __name__ == "__main__":
    if sys.argv[1] == "rss":
        _rss_main(sys.argv[2])
    elif sys.argv[1] == "log":  # python -m membench.bench.replay_rates log EVENTS.avro
        print(json.dumps(profile_log(Path(sys.argv[2])), indent=2))
    else:
        figures = bench_replay(int(sys.argv[1]), log=lambda msg: print(msg, file=sys.stderr))
        print("\n".join(format_lines(figures)))
        print(json.dumps(figures, indent=2))
