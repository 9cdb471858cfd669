"""A clean stop of a running grid: what the first and second Ctrl-C (or SIGTERM) do.

- First signal: no further unit starts (`stopping`); running units may finish within the grace
  period (`--stop-grace`, default 30 s). When it ends, `kill` runs.
- `kill` (the grace period over, or a second signal): the pipeline is fenced (a unit still running
  can no longer append to the log), then every sandbox is stopped (its processes killed), so the
  unit threads wind down at once; the caller then closes every unfinished attempt in the log with
  `RunEnded{abandoned}` (membench/bus/attempts.py), which keeps the log verifiable (`membench replay`)
  and the units retried on resume.
- A third signal calls the caller's `hard_exit` (the CLI's ends the process at once, status 130,
  however the unit threads, Kafka clients or sandbox children hang), as a last resort; without one
  it raises KeyboardInterrupt in the main thread, as Python's own SIGINT handler does.

A grid whose oracle harness keeps faulting stops the same way, by itself (`HarnessFaultLimit`): once
at least HARNESS_FAULT_MIN units are excluded `harness_fault` and they are more than
HARNESS_FAULT_SHARE of the units ended so far, no further unit starts, the report is written
partial with the cause, and the stop says `harness_faults` (the CLI exits 4 on it). Such units are retried on
resume, so the grid finishes once the installation is fixed. A stray fault in a long healthy grid
stays one excluded unit; a broken installation costs a few units, not the whole grid.

`run_units` is the grid loop that honours it: at most `workers` units in flight, the next one
started only while no stop was asked, and after `kill` it returns within KILL_WAIT_S even if a unit
thread is still blocked (`unit_threads_alive` says so: the CLI then exits without waiting for
it). Both buses run their grid with it: `membench run` embedded (membench/pipeline/grid_run.py) and
`membench run --bus kafka://…` (membench/pipeline/distributed/kafka_run.py); on Kafka the fence is the
publication's (nothing more of a running unit is published) and the abandoned attempts are closed
on the trajectory topic.

A stopped run records why in runs/<run_set>/partial.json (`write_partial`), removed once a run of
the run set finishes its grid: `membench report` marks the report it builds partial while it is
there, so a report rebuilt later (the only report of a Kafka run) says so too.

Nothing here ends the process: a stop is the `GridStop`'s state (`stopped`, `cause`), which the grid
runs return in their outcomes, and the CLI alone chooses the exit status and performs the exit
(`membench/errors.py`).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from membench.sandbox.base import IsolationUnavailable

SIGNAL = "signal"  # how a grid stopped: a SIGINT/SIGTERM (or `request`) ...
HARNESS_FAULTS = "harness_faults"  # ... or by itself: its oracle harness kept producing no outcome
HARNESS_FAULT_MIN = 3  # harness faults before a grid may stop for them ...
HARNESS_FAULT_SHARE = 0.05  # ... and their share of the units ended (the exclusion-balance gate's 5 %)
KILL_WAIT_S = 15.0


@dataclass(frozen=True, kw_only=True)
class GridEnd:
    """How a grid run ended, on either bus (the embedded `RunOutcome` and the Kafka `PublishedRun`
    hold it alike; the CLI alone turns it into an exit status).

    `stopped`: None (the grid ran to its end), "signal" (a SIGINT/SIGTERM stopped it: the run set is
    partial, `resume` says how to go on) or "harness_faults" (the grid stopped itself: its oracle
    harness kept producing no outcome, `stop_cause` says why). `stopped_after_grid`: a signal came once
    every unit had ended; nothing is partial."""

    units_planned: int
    units_not_started: int
    attempts_abandoned: int
    stopped: str | None = None
    stop_cause: str | None = None
    stopped_after_grid: bool = False
    resume: str | None = None


class GridStop:
    """SAY shows the stop's lines; HARD_EXIT, the caller's last resort on a third signal (the CLI's
    ends the process at once; None: KeyboardInterrupt)."""

    def __init__(self, grace_s: float, say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
                 hard_exit: Callable[[], None] | None = None):
        self.grace_s = grace_s
        self.say = say
        self.hard_exit = hard_exit
        self.stopping = threading.Event()
        self.killed = threading.Event()
        self.signals = 0
        self.on_kill: list[Callable[[], None]] = []  # run in order by kill(): fence the log first
        self._lock = threading.Lock()
        self._kill_started = False
        self._timer: threading.Timer | None = None
        self.cause: str | None = None  # why the grid stopped itself (None: a signal)
        self.how = SIGNAL  # what `stopped` says once a stop was asked

    def halt(self, cause: str, how: str = HARNESS_FAULTS) -> None:
        """The grid stops itself for CAUSE: as a first signal, and `stopped` says HOW."""
        with self._lock:
            if self.cause is not None or self.stopping.is_set():
                return
            self.cause, self.how = cause, how
        self.request(f"stopping: {cause}")

    @property
    def asked(self) -> bool:
        return self.stopping.is_set()

    @property
    def stopped(self) -> str | None:
        """None while no stop was asked; else SIGNAL or HARNESS_FAULTS (the outcomes' `stopped`)."""
        return self.how if self.stopping.is_set() else None

    def request(self, how: str = "a stop was asked") -> None:
        """The first signal's effect (also callable without a signal)."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.say(f"{how}: no further unit starts; running units get {self.grace_s:g} s to finish "
                 "(Ctrl-C again to stop them now)")
        self._timer = threading.Timer(self.grace_s, self.kill, kwargs={"why": "the grace period is over"})
        self._timer.daemon = True
        self._timer.start()

    def kill(self, why: str = "stopped again") -> None:
        with self._lock:
            if self._kill_started:
                return
            self._kill_started = True
        self.stopping.set()
        if self._timer is not None:
            self._timer.cancel()
        self.say(f"{why}: stopping the running units' sandboxes; their attempts are closed as abandoned")
        for hook in self.on_kill:  # the log is fenced before any sandbox dies: a killed agent is no result
            hook()
        self.killed.set()

    def _handle(self, signum: int, frame: Any) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            self.request(f"{name} received")
        elif self.signals == 2:
            threading.Thread(target=self.kill, kwargs={"why": f"{name} received again"}, daemon=True).start()
        elif self.hard_exit is not None:
            self.hard_exit()
        else:
            raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator["GridStop"]:
        """SIGINT and SIGTERM handled as above while the grid runs (main thread only)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        before = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
            if self._timer is not None:
                self._timer.cancel()


class HarnessFaultLimit:
    """Watches a grid's events (every one the units publish) and halts STOP when the units excluded
    `harness_fault` pass the limit (module doc), naming the last fault's cause."""

    def __init__(self, stop: GridStop, minimum: int = HARNESS_FAULT_MIN, share: float = HARNESS_FAULT_SHARE):
        self.stop, self.minimum, self.share = stop, minimum, share
        self.ended = self.faults = 0
        self.causes: dict[str, str] = {}  # run id -> its harness fault's cause, until its RunEnded
        self._lock = threading.Lock()

    def observe(self, event: Any) -> None:
        if event.kind == "Turn" and event.payload.get("source_kind") == "harness_fault":
            with self._lock:
                self.causes[event.run_id] = event.payload["text"]["text"]
        elif event.kind == "RunEnded":
            with self._lock:
                self.ended += 1
                cause = self.causes.pop(event.run_id, None)
                if event.payload.get("error_type") != "harness_fault":
                    return
                self.faults += 1
                over = self.faults >= self.minimum and self.faults > self.share * self.ended
                faults, ended = self.faults, self.ended
            if over:
                self.stop.halt(f"the oracle's harness produced no outcome in {faults} of {ended} units (the limit: "
                               f"{self.minimum}, and over {self.share:.0%} of the units ended); the last cause: "
                               f"{cause or 'not recorded'}", HARNESS_FAULTS)


class _Either:
    """`is_set()` of two events: a caller's own stop, or the grid's kill."""

    def __init__(self, first: threading.Event, second: threading.Event):
        self.first, self.second = first, second

    def is_set(self) -> bool:
        return self.first.is_set() or self.second.is_set()


class StoppableSandbox:
    """The run's sandbox backend, whose every sandbox ends when the grid is killed (the backends
    kill every process of a sandbox whose `stop` is set, membench/sandbox/base.py)."""

    def __init__(self, inner: Any, killed: threading.Event):
        self._inner = inner
        self._killed = killed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def run(self, argv: list[str], spec: Any, stop: threading.Event | None = None) -> Any:
        if self._killed.is_set():  # a unit winding down starts no new sandbox
            raise IsolationUnavailable("the run was stopped")
        return self._inner.run(argv, spec, self._killed if stop is None else _Either(stop, self._killed))


def run_units(run_one: Callable[[Any], str], units: list[Any], workers: int,
              on_done: Callable[[Any, str], None], stop: GridStop | None = None) -> list[Any]:
    """Runs `run_one(unit)` for each unit, `workers` at a time; returns the units never started
    (a stop was asked). After `stop.kill`, returns within KILL_WAIT_S without waiting for a unit
    thread still blocked (it is a daemon of nothing: the CLI exits without joining it,
    `unit_threads_alive`)."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="membench-unit")
    queue = list(units)
    running: dict[Any, Any] = {}
    killed_at = None
    try:
        while queue and len(running) < max(1, workers) and not (stop and stop.asked):
            unit = queue.pop(0)
            running[pool.submit(run_one, unit)] = unit
        while running:
            done, _ = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                unit = running.pop(future)
                on_done(unit, future.result())
                if queue and not (stop and stop.asked):
                    nxt = queue.pop(0)
                    running[pool.submit(run_one, nxt)] = nxt
            if stop is not None and stop.killed.is_set():
                killed_at = killed_at or time.monotonic()
                if time.monotonic() - killed_at > KILL_WAIT_S:
                    break
    finally:
        pool.shutdown(wait=not (stop and stop.killed.is_set()), cancel_futures=True)
    return queue


PARTIAL_FILE = "partial.json"


def write_partial(runs_dir: Path, run_set: str, partial: Any) -> Path:
    """runs/<run_set>/partial.json: the `membench.reports.model.PartialRun` of a stopped run (written atomically)."""
    from dataclasses import asdict

    path = Path(runs_dir) / run_set / PARTIAL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{PARTIAL_FILE}.tmp")
    tmp.write_text(json.dumps(asdict(partial), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_partial(runs_dir: Path, run_set: str) -> Any:
    """The `PartialRun` a stopped run recorded (None: the run set's last run finished its grid)."""
    from membench.reports.model import PartialRun

    path = Path(runs_dir) / run_set / PARTIAL_FILE
    try:
        return PartialRun(**json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:  # unreadable: the report says so rather than hide it
        return PartialRun(reason=f"{path} is unreadable ({exc})", units_planned=0, units_not_started=0,
                          attempts_abandoned=0, resume="")


def clear_partial(runs_dir: Path, run_set: str) -> None:
    (Path(runs_dir) / run_set / PARTIAL_FILE).unlink(missing_ok=True)


UNIT_THREADS = ("membench-unit", "membench-runner")  # the pools' thread-name prefixes (`run_units`, the runner)


def unit_threads_alive() -> bool:
    """Whether a unit thread is still running (blocked past a kill: its output is fenced). A process
    that ends then must not join it (a plain exit would wait for it): the CLI ends it at once."""
    return any(t.name.startswith(UNIT_THREADS) and t.is_alive() for t in threading.enumerate())
