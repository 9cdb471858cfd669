"""Worker memory over many completed runs, for `membench bench bus`.

A worker's state that grows with the runs it has seen is `RunSetProcessor`'s (fold state of open
runs, ids of ended runs); everything else a worker holds is per batch. This folds `runs`
synthetic runs (RunStarted, RunEnded: the smallest complete run, so a million fit in a benchmark)
through one `RunSetProcessor` with the workers' window, in a fresh process so nothing else
counts, and samples the process's resident set (VmRSS) at checkpoints.

    python -m membench.bench.worker_memory RUNS [--window N|none]   # prints JSON
"""

from __future__ import annotations

import dataclasses
import gc
import json
import subprocess
import sys
from pathlib import Path


def rss_bytes() -> int:
    """The process's current resident set (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _template_run() -> list:
    from membench.bus.emitter import RunEmitter

    events: list = []
    emitter = RunEmitter("bench-memory", "r", "bench/t/B5/1", lambda event, datum: events.append(event))
    emitter.emit("RunStarted", {"suite": "bench", "task": "t", "condition": "B5", "seed": 1, "agent": "bench",
                                "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                                "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None,
                                "attempt": 1}, "harness")
    emitter.session_index = -1
    emitter.emit("RunEnded", {"status": "completed", "error_type": None}, "harness")
    return events


def fold_runs(runs: int, window: int | None, checkpoints: list[int]) -> dict:
    from membench.processors import RunSetProcessor

    template = _template_run()
    processor = RunSetProcessor(window)
    samples: dict[str, int] = {"0": rss_bytes()}
    wanted = sorted(set(c for c in checkpoints if c <= runs) | {runs})
    done = 0
    for checkpoint in wanted:
        while done < checkpoint:
            run_id = f"{done:08x}-0000-4000-8000-000000000000"  # uuid-shaped, as runners make them
            for event in template:
                processor.apply(dataclasses.replace(event, run_id=run_id))
            done += 1
        gc.collect()
        samples[str(checkpoint)] = rss_bytes()
    return {"runs": runs, "ended_window": window, "rss_bytes": samples,
            "ended_remembered": processor.ended_remembered(), "open_runs": len(processor.open_runs())}


def worker_memory(runs: int, window: int | None = None, checkpoints: tuple[int, ...] = (100_000,)) -> dict:
    """Runs `fold_runs` in a fresh interpreter (window None: the workers' default window)."""
    args = [sys.executable, "-m", "membench.bench.worker_memory", str(runs),
            "--checkpoints", ",".join(str(c) for c in checkpoints)]
    if window is not None:
        args += ["--window", str(window)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    from membench.processors.run_set_processor import ENDED_WINDOW

    runs = int(argv[0])
    window: int | None = ENDED_WINDOW
    checkpoints = [100_000]
    rest = argv[1:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--window":
            window = None if value == "none" else int(value)
        elif flag == "--checkpoints":
            checkpoints = [int(c) for c in value.split(",") if c]
    print(json.dumps(fold_runs(runs, window, checkpoints)))


if __name__ == "__main__":
    main(sys.argv[1:])
