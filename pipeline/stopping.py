"""A clean stop of a running grid (issue 30): what the first and second Ctrl-C (or SIGTERM) do.

- First signal: no further unit starts (`stopping`); running units may finish within the grace
  period (`--stop-grace`, default 30 s). When it ends, `kill` runs.
- `kill` (the grace period over, or a second signal): the pipeline is fenced (a unit still running
  can no longer append to the log), then every sandbox is stopped (its processes killed), so the
  unit threads wind down at once; the caller then closes every unfinished attempt in the log with
  `RunEnded{abandoned}` (producers/attempts.py), which keeps the log verifiable (`membench replay`)
  and the units retried on resume.
- A third signal exits at once (status 130), as a last resort.

`run_units` is the grid loop that honours it: at most `workers` units in flight, the next one
started only while no stop was asked, and after `kill` it returns within KILL_WAIT_S even if a unit
thread is still blocked (the caller then exits without waiting for it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Iterator

from sandbox.base import IsolationUnavailable

EXIT_STOPPED = 130  # 128 + SIGINT, as shells report an interrupted command
KILL_WAIT_S = 15.0


class GridStop:
    def __init__(self, grace_s: float, say: Callable[[str], None] = lambda text: print(text, file=sys.stderr)):
        self.grace_s = grace_s
        self.say = say
        self.stopping = threading.Event()
        self.killed = threading.Event()
        self.signals = 0
        self.on_kill: list[Callable[[], None]] = []  # run in order by kill(): fence the log first
        self._lock = threading.Lock()
        self._kill_started = False
        self._timer: threading.Timer | None = None

    @property
    def asked(self) -> bool:
        return self.stopping.is_set()

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
        else:
            os._exit(EXIT_STOPPED)

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


class _Either:
    """`is_set()` of two events: a caller's own stop, or the grid's kill."""

    def __init__(self, first: threading.Event, second: threading.Event):
        self.first, self.second = first, second

    def is_set(self) -> bool:
        return self.first.is_set() or self.second.is_set()


class StoppableSandbox:
    """The run's sandbox backend, whose every sandbox ends when the grid is killed (the backends
    kill every process of a sandbox whose `stop` is set, sandbox/base.py)."""

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
    thread still blocked (it is a daemon of nothing: the caller exits)."""
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
