"""`membench bench`: measured speed of membench's parts (figures go to docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import click


@click.group("bench")
def bench() -> None:
    """Benchmarks. Results are recorded, with the machine and the command, in docs/benchmarks.md."""


def machine() -> dict[str, object]:
    """The machine a benchmark ran on: CPU count, CPU model, Python version, platform."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": cpus,
        "cpu_model": model or platform.processor() or "unknown",
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


@bench.command("stats")
@click.option("--units", default=60, show_default=True, help="Units (traps) of the P1–P6 family workload.")
@click.option("--seeds", default=3, show_default=True, help="Seeds per unit.")
@click.option("--cells", "n_cells", default=1_000_000, show_default=True, help="Cells of the pass-fraction workload.")
@click.option("--resamples", default=2000, show_default=True, help="Bootstrap resamples.")
@click.option("--repeats", default=5, show_default=True, help="Repetitions of each timed workload.")
@click.option("--seed", default=0, show_default=True, help="Seed of the synthetic data and the bootstrap.")
@click.option("--compare-units", default=100_000, show_default=True,
              help="Units of the stats-compare workload: a cells CSV of units x seeds x 2 conditions rows.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats_bench(units: int, seeds: int, n_cells: int, resamples: int, repeats: int, seed: int, compare_units: int,
                as_json: bool) -> None:
    """Time the P1–P6 comparison family with bootstraps, and a pass-fraction report over many cells."""
    from membench.bench.stats_timings import bench_compare_csv, bench_family, bench_pass_fractions

    click.echo(f"timing the P1-P6 family on {units} units x {seeds} seeds ({repeats} repeats)...", err=True)
    family = bench_family(units=units, seeds=seeds, resamples=resamples, repeats=repeats, seed=seed)
    click.echo(f"building {n_cells} cells and timing the pass-fraction report ({max(1, repeats // 2)} repeats)...",
               err=True)
    build, report = bench_pass_fractions(cells=n_cells, seeds=seeds, resamples=resamples,
                                         repeats=max(1, repeats // 2), seed=seed)
    click.echo(f"timing stats compare on a {compare_units * seeds * 2}-row cells CSV ...", err=True)
    compare = bench_compare_csv(units=compare_units, seeds=seeds, repeats=max(1, repeats // 2), seed=seed)
    timings = [family, build, report, compare]
    if as_json:
        click.echo(json.dumps({
            "machine": machine(),
            "timings": [
                {"name": t.name, "repeats": t.repeats, "min_s": t.min_s, "median_s": t.median_s, "detail": t.detail}
                for t in timings
            ],
        }, indent=2))
        return
    m = machine()
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}")
    for t in timings:
        click.echo(f"{t.name}: min {t.min_s * 1000:.1f} ms, median {t.median_s * 1000:.1f} ms "
                   f"over {t.repeats} run(s)")
        for key, value in t.detail.items():
            click.echo(f"    {key}: {value}")



@bench.command("bus")
@click.option("--bus", "bus_dsn", default="kafka://127.0.0.1:9092", show_default=True, help="Kafka brokers")
@click.option("--runs", default=300, show_default=True, help="synthetic runs")
@click.option("--threads", default=4, show_default=True, help="concurrent runner threads")
@click.option("--sessions", default=3, show_default=True)
@click.option("--turns", default=8, show_default=True, help="agent turns (each with a tool call) per session")
@click.option("--engine-runs", default=1000, show_default=True,
              help="synthetic runs each processor engine drains for its CPU per event (and the floors)")
@click.option("--memory-runs", default=1_000_000, show_default=True,
              help="completed runs folded for the worker-memory figure (RSS sampled at 100,000 and at the end)")
@click.option("--replay-runs", default=500, show_default=True,
              help="synthetic runs of the replay/rederive figures (replay memory also at 4x as many)")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def bus_bench(bus_dsn: str, runs: int, threads: int, sessions: int, turns: int, engine_runs: int, memory_runs: int,
              replay_runs: int, as_json: bool) -> None:
    """Events/s end to end (runner -> Kafka -> workers -> sink -> warehouse) with 1 and 2 kafka-engine
    workers and 1 faust worker, each engine's CPU per event beside its floors, the producer-side emit
    cost, worker memory after many runs, the embedded path's figure on the same synthetic runs, and
    replay/rederive rates with --jobs 1 and 2 beside the read and chDB insert floors and replay's memory."""
    from membench.bench.bus import bench_embedded, bench_emit, bench_kafka
    from membench.bench.replay_rates import bench_replay, format_lines
    from membench.bench.engines import bench_engines
    from membench.bench.worker_memory import worker_memory
    from membench.bus.topics import topics_from_dsn

    log = lambda msg: click.echo(msg, err=True)  # noqa: E731
    bootstrap = topics_from_dsn(bus_dsn).bootstrap
    log("emit alone (one thread, no bus) ...")
    emit_alone = bench_emit()
    log(f"embedded path: {runs} runs x {threads} threads ...")
    embedded = bench_embedded(runs, threads, sessions, turns)
    log(f"kafka path via {bus_dsn}, 1 kafka-engine worker ...")
    kafka = bench_kafka(bootstrap, runs, threads, sessions, turns, log)
    end_to_end = [kafka]
    for engine, workers in (("kafka", 2), ("faust", 1)):
        log(f"kafka path, {workers} {engine}-engine worker(s) ...")
        end_to_end.append(bench_kafka(bootstrap, runs, threads, sessions, turns, log, engine, workers, floors=False))
    engines = bench_engines(bootstrap, engine_runs, sessions, turns, log)
    log(f"worker memory: {memory_runs} completed runs through RunSetProcessor ...")
    memory = worker_memory(memory_runs, checkpoints=(100_000,))
    replay_figures = bench_replay(replay_runs, log)
    result: dict[str, Any] = {"machine": machine(), "runs": runs, "threads": threads, "emit_alone": emit_alone,
              "embedded": embedded, "kafka": kafka, "end_to_end": end_to_end, "engines": engines,
              "worker_memory": memory, "replay": replay_figures}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    m = result["machine"]
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}")
    click.echo(f"events: {kafka['events']} in {runs} runs ({threads} runner threads)")
    click.echo(f"emit cost, CPU time (seal + chain + Kafka hand-off): median {kafka['emit_cpu_median_us']:.1f} us, "
               f"p95 {kafka['emit_cpu_p95_us']:.1f} us")
    click.echo(f"emit elapsed time ({threads} threads): median {kafka['emit_wall_median_us']:.1f} us, "
               f"p95 {kafka['emit_wall_p95_us']:.1f} us")
    click.echo(f"emit alone (one thread, no bus): CPU median {emit_alone['emit_cpu_median_us']:.1f} us, "
               f"elapsed median {emit_alone['emit_wall_median_us']:.1f} us")
    click.echo(f"producer rate: {kafka['produce_events_per_s']:,.0f} events/s")
    for e2e in end_to_end:
        cpu = e2e["cpu_us_per_event"]
        click.echo(f"end to end (runner -> Kafka -> {e2e['workers']} {e2e['engine']} worker(s) -> sink -> warehouse): "
                   f"{e2e['end_to_end_events_per_s']:,.0f} events/s ({e2e['end_to_end_seconds']:.1f} s; "
                   f"sink wrote {e2e['sink_raw']} raw, {e2e['sink_derived']} derived); CPU per event: runner "
                   f"{cpu['runner']:.0f} us, workers {cpu['worker']:.0f} us, sink {cpu['sink']:.0f} us; "
                   f"cores busy {e2e['machine_busy_fraction']:.0%}; ceiling of these stages on "
                   f"{m['nproc']} cores {e2e['ceiling_events_per_s']:,.0f} events/s")
    floors, drain, ratios = engines["in_process"], engines["drain"], engines["ratios"]
    click.echo(f"floors, CPU per event ({engines['events']} events): decode {floors['decode_us']:.1f} us, "
               f"SHA-256 {floors['sha256_us']:.2f} us, fold {floors['fold_us']:.1f} us, derived encode "
               f"{floors['derived_encode_us']:.1f} us; confluent consumer "
               f"{engines['kafka_consumer']['cpu_us_per_message']:.1f} us "
               f"({engines['kafka_consumer']['messages_per_s']:,.0f} messages/s); no-op faust agent "
               f"{engines['faust_noop']['cpu_us_per_message']:.1f} us "
               f"({engines['faust_noop']['messages_per_s']:,.0f} messages/s)")
    for name in ("kafka", "faust"):
        click.echo(f"engine {name}, one worker draining the same messages: {drain[name]['cpu_us_per_event']:.1f} us "
                   f"CPU per event ({drain[name]['events_per_s']:,.0f} events/s wall)")
    click.echo(f"kafka engine / its floor (consumer + decode + fold + encode = {ratios['kafka_engine_floor_us']:.1f} us): "
               f"{ratios['kafka_engine_over_floor']:.2f}; faust engine's rate / no-op faust agent's: "
               f"{ratios['faust_engine_rate_over_noop']:.0%}")
    rss = memory["rss_bytes"]
    click.echo(f"worker memory (RunSetProcessor, window {memory['ended_window']:,} ended runs): RSS "
               f"{rss['100000'] / 2**20:.1f} MiB after 100,000 runs, {rss[str(memory['runs'])] / 2**20:.1f} MiB after "
               f"{memory['runs']:,}" if "100000" in rss else
               f"worker memory: RSS {rss[str(memory['runs'])] / 2**20:.1f} MiB after {memory['runs']:,} runs")
    click.echo(f"embedded (file log + in-process processors + chDB): {embedded['events_per_s']:,.0f} events/s")
    for line in format_lines(replay_figures):
        click.echo(line)


@bench.command("claims")
@click.option("--bus", "bus_dsn", default="kafka://127.0.0.1:9092", show_default=True, help="Kafka brokers")
@click.option("--units", default=48, show_default=True, type=click.IntRange(1), help="units claimed")
@click.option("--json", "as_json", is_flag=True, help="print the figures as JSON")
def claims_bench(bus_dsn: str, units: int, as_json: bool) -> None:
    """What a runner's claim on a unit's status costs per unit (docs/design.md §2 Claims): the status
    read before deciding, recording `started` without and with the claim check, and a lost claim."""
    from membench.bench.claim_cost import bench_claims, format_lines
    from membench.bus.topics import topics_from_dsn

    result = {"machine": machine(), **bench_claims(topics_from_dsn(bus_dsn).bootstrap, units,
                                                   lambda msg: click.echo(msg, err=True))}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    m = result["machine"]
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}")
    for line in format_lines(result):
        click.echo(line)


@bench.command("gateway")
@click.option("--calls", default=500, show_default=True,
              help="Timed calls per path (direct, via the gateway) for each API and answer kind.")
@click.option("--chunks", default=200, show_default=True, help="Text deltas in the long streamed answer.")
@click.option("--chunk-calls", default=100, show_default=True,
              help="Timed calls per path of the short and of the long stream, per API.")
@click.option("--warmup", default=20, show_default=True, help="Untimed calls per path before each timed series.")
@click.option("--fresh-connections", is_flag=True,
              help="A new connection per call on both paths (default: one keep-alive connection per path).")
@click.option("--one-process", is_flag=True,
              help="Run the upstream and the gateway in this process (default: each in its own process).")
@click.option("--prompt-kb", default=0, show_default=True, help="Filler text added to each request's prompt, in KB.")
@click.option("--pause-ms", default=0.0, show_default=True,
              help="Idle time before each timed call (an agent's think and tool time between calls).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def gateway_bench(calls: int, chunks: int, chunk_calls: int, warmup: int, fresh_connections: bool, one_process: bool,
                  prompt_kb: int, pause_ms: float, as_json: bool) -> None:
    """Latency the model gateway adds per call (p50, p95) and per streamed chunk, against a local
    scripted upstream measured directly in the same run."""
    from membench.bench.gateway import bench_gateway, format_table

    result = bench_gateway(calls=calls, chunks=chunks, chunk_calls=chunk_calls, warmup=warmup,
                           keepalive=not fresh_connections, isolate=not one_process, prompt_bytes=prompt_kb * 1024,
                           pause_ms=pause_ms, log=lambda msg: click.echo(msg, err=True))
    m = machine()
    if as_json:
        click.echo(json.dumps({**result.to_dict(), "machine": m}, indent=2))
        return
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}")
    for line in format_table(result):
        click.echo(line)


@bench.command("scoring")
@click.option("--pack", "pack_name", default="smoke", show_default=True, help="Built-in pack (or pack directory) whose "
              "sessions are scored, each with its reference solution.")
@click.option("--sessions", default=0, show_default=True, type=click.IntRange(0),
              help="Score only the first N sessions (0: all of the pack's pytest-scored sessions).")
@click.option("--repeats", default=3, show_default=True, type=click.IntRange(1), help="Timed rounds per piece.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def scoring_bench(pack_name: str, sessions: int, repeats: int, as_json: bool) -> None:
    """CPU of one scored session on the pytest and the fast oracle runner, beside each piece of the
    pytest-free floor (a sandbox start, the interpreter, the oracle's own test functions), in one
    run, counted by a cgroup cpuacct group (bwrap, as root)."""
    import tempfile

    from membench.bench.scoring_cpu import CpuAccountUnavailable, format_lines, pack_cases, scoring_bench as run_bench
    from membench.packs.pack_resolver import open_pack
    from membench.sandbox.bwrap import BwrapSandbox
    from membench.formats.pack_format import PackError

    with tempfile.TemporaryDirectory(prefix="membench-bench-scoring-") as home:
        try:
            cases = pack_cases(open_pack(pack_name, Path(home)))
        except PackError as exc:
            raise click.UsageError(str(exc)) from None
        if sessions:
            cases = cases[:sessions]
        if not cases:
            raise click.UsageError(f"{pack_name} has no session scored by a pytest oracle")
        try:
            result = run_bench(BwrapSandbox(), cases, repeats)
        except CpuAccountUnavailable as exc:
            raise click.UsageError(str(exc)) from None
    m = machine()
    load = os.getloadavg()
    if as_json:
        click.echo(json.dumps({**result, "machine": m, "loadavg": load}, indent=2))
        return
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}; load {load[0]:.1f}")
    for line in format_lines(result):
        click.echo(line)


@bench.command("concurrency")
@click.option("--levels", default="4,16,64,128", show_default=True, help="Worker counts to measure, comma-separated.")
@click.option("--delay", "delay_s", default=3.0, show_default=True, type=click.FloatRange(0.1),
              help="Seconds the scripted model takes for every call.")
@click.option("--rounds", default=2, show_default=True, type=click.IntRange(1),
              help="Units per worker at each level (the grid has about rounds × workers units).")
@click.option("--sandbox-nice", "sandbox_nice", default=None, type=click.IntRange(0, 19),
              help="Niceness of the sandboxes (MEMBENCH_SANDBOX_NICE; default: the run's own default, 10).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def concurrency_bench(levels: str, delay_s: float, rounds: int, sandbox_nice: int | None, as_json: bool) -> None:
    """Units in flight, units per minute and the gateway's added latency (p50, p95) of real `membench
    run`s of the smoke pack with the built-in `openai:` loop against a slow scripted model, at each
    worker count; with the ratio to the latency ideal and to the CPU ceiling (membench/bench/concurrency.py)."""
    from membench.bench.concurrency import Level, bench_concurrency, format_level

    try:
        counts = [int(v) for v in levels.split(",") if v.strip()]
    except ValueError:
        raise click.UsageError(f"--levels: not a list of integers: {levels!r}") from None
    if not counts or min(counts) < 1 or max(counts) > 512:
        raise click.UsageError("--levels: worker counts from 1 to 512")
    result = bench_concurrency(counts, delay_s, rounds, sandbox_nice, lambda msg: click.echo(msg, err=True))
    m = machine()
    if as_json:
        click.echo(json.dumps({**result, "machine": m}, indent=2))
        return
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}; model delay {delay_s:g} s")
    for level in result["levels"]:
        click.echo(format_level(Level(**level)))


@bench.command("viewer")
@click.option("--units", default=10_000, show_default=True, help="Units of the synthetic run set.")
@click.option("--repeats", default=5, show_default=True, help="Repetitions of each timed request (the median is shown).")
@click.option("--browser", "chromium", default=None, metavar="CHROMIUM",
              help="Also time the page (first render, filter, sort, search) in this Chromium, driven by Playwright.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def viewer_bench(units: int, repeats: int, chromium: str | None, as_json: bool) -> None:
    """The live viewer's run-set page at UNITS units: the first answer (the log read and folded),
    each poll's answer (time, size, and with If-None-Match), a full-text search, one unit."""
    from membench.bench.viewer_api import bench_viewer, format_lines

    if units < 1 or repeats < 1:
        raise click.UsageError("--units and --repeats must be at least 1")
    if chromium is not None and not Path(chromium).is_file():
        raise click.UsageError(f"--browser: no Chromium at {chromium}")
    click.echo(f"writing a synthetic run set of {units} units and serving it ...", err=True)
    result = bench_viewer(units=units, repeats=repeats, chromium=chromium)
    m = machine()
    if as_json:
        click.echo(json.dumps({**result, "machine": m}, indent=2))
        return
    click.echo(f"machine: {m['nproc']} CPUs, {m['cpu_model']}, Python {m['python']}")
    for line in format_lines(result):
        click.echo(line)
