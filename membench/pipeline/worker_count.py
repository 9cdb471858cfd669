"""How many units a run keeps in flight by default (`membench run` without --workers).

A unit's cost on this machine is CPU (the harness's own work: emitting events, the memory system,
the scoring sandboxes, the agent's process) and memory (the run process's share and the unit's
sandboxes). A unit whose agent is driven by a model mostly waits on it: its CPU is a small part of
its wall time, so one core keeps several such units busy. The rule (docs/benchmarks.md,
"Concurrency for waiting work", where the figures below were measured with `membench bench
concurrency`):

    CPU-bound agents (scripted, command):  workers = cores
    model-driven agents (openai:, codex, claude-code):
        workers = min(cores × TARGET_CPU_SHARE × WALL_PER_CPU,   the CPU ceiling
                      available memory × TARGET_MEMORY_SHARE / MB_PER_UNIT,
                      MAX_WORKERS)

WALL_PER_CPU is a model-driven unit's wall time over its CPU time at one worker (a unit that waits
3 s per model call), MB_PER_UNIT the resident memory one more unit in flight adds. Past the CPU
ceiling more workers only queue for the CPU (every unit slower, the model's latency no longer
hidden); past the memory bound the machine swaps. `--workers N` overrides the rule (at most
MAX_WORKERS: threads of one process, each unit's agent and sandboxes its own processes).
"""

from __future__ import annotations

import os

MAX_WORKERS = 512
TARGET_CPU_SHARE = 0.8  # leave headroom for the gateway, the sink and the machine's own work
TARGET_MEMORY_SHARE = 0.7
WALL_PER_CPU = 16.0  # measured: 25.5 s wall over 1.51 CPU s of a 3-session `openai:` unit, 3 s model, 4 workers
MB_PER_UNIT = 40.0  # measured: 32–37 MB more resident memory per unit in flight, rounded up
MODEL_AGENTS = ("openai:", "codex", "claude-code")


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def available_mb() -> float | None:
    """MemAvailable from /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def waits_on_a_model(agent: str) -> bool:
    return agent.startswith(MODEL_AGENTS)


def default_workers(agent: str, n_cores: int | None = None, memory_mb: float | None = None) -> tuple[int, str]:
    """(workers, why): the rule of the module doc for AGENT on this machine (or the given one)."""
    n_cores = cores() if n_cores is None else n_cores
    if not waits_on_a_model(agent):
        return max(1, n_cores), f"{n_cores} cores, a CPU-bound agent: one unit per core"
    cpu = int(n_cores * TARGET_CPU_SHARE * WALL_PER_CPU)
    memory_mb = available_mb() if memory_mb is None else memory_mb
    memory = int(memory_mb * TARGET_MEMORY_SHARE / MB_PER_UNIT) if memory_mb is not None else MAX_WORKERS
    workers = max(1, min(cpu, memory, MAX_WORKERS))
    bound = "CPU" if workers == cpu else "memory" if workers == memory else "the cap"
    return workers, (f"a model-driven agent: {n_cores} cores × {TARGET_CPU_SHARE:g} × {WALL_PER_CPU:g} (wall/CPU of "
                     f"a unit) = {cpu}, memory {memory_mb or 0:.0f} MB × {TARGET_MEMORY_SHARE:g} / {MB_PER_UNIT:g} MB "
                     f"per unit = {memory}; bound by {bound}")
