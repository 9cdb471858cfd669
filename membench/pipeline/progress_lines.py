"""Plain progress lines for a grid whose progress stream is not a terminal (CI, nohup, a log file).

A rich progress bar draws nothing between its first and last frame when its stream is not a
terminal, so a long run redirected to a file would be silent until the final table. `PlainProgress`
prints one line every `interval_s` seconds instead (and one when the grid ends):

    progress: 12/186 units (6%) · passed 5 · excluded 1 · 2.4 units/min · ETA 1h12m

The interval is PROGRESS_INTERVAL_ENV (seconds, default 30; 0 turns the lines off). Passed counts
the units whose scored session's oracle verdict was `pass`; excluded the units that ended
`excluded` or `error` (their cells leave the comparison). Both are read from the events the units
publish (`observe`), so the counts are the log's, not a second bookkeeping.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PROGRESS_INTERVAL_ENV = "MEMBENCH_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 30.0


def progress_interval() -> float:
    """Seconds between two lines (PROGRESS_INTERVAL_ENV); a value that is not a number >= 0 is the default."""
    raw = os.environ.get(PROGRESS_INTERVAL_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value >= 0 else DEFAULT_INTERVAL_S


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class PlainProgress:
    """Counts a grid's units as they end and prints a line every `interval_s` seconds while running
    (`running()`), from a daemon thread. `what` names the units ("units", "traps"); `passes` False
    leaves the passed count out (a grid whose units have no pass/fail verdict, e.g. transfer units)."""

    def __init__(self, total: int, say: Callable[[str], None], interval_s: float | None = None,
                 what: str = "units", passes: bool = True, clock: Callable[[], float] = time.monotonic):
        self.total, self.say, self.what, self.passes, self.clock = total, say, what, passes, clock
        self.interval_s = progress_interval() if interval_s is None else interval_s
        self.done = self.passed = self.excluded = 0
        self._scored: dict[str, int] = {}  # run id -> its scored session's index, until its RunEnded
        self._verdict: dict[str, str] = {}  # run id -> its scored session's outcome
        self._lock = threading.Lock()
        self._started = clock()
        self._finished = threading.Event()

    def observe(self, event: Any) -> None:
        """Watches one published event (as the units publish them, any thread)."""
        kind = event.kind
        if kind == "SessionStarted" and event.payload.get("scored"):
            with self._lock:
                self._scored[event.run_id] = event.session_index
        elif kind == "OracleVerdict":
            with self._lock:
                if self._scored.get(event.run_id) == event.session_index:
                    self._verdict[event.run_id] = event.payload.get("outcome")
        elif kind == "RunEnded":
            with self._lock:
                self._scored.pop(event.run_id, None)
                outcome = self._verdict.pop(event.run_id, None)
                if event.payload.get("status") in ("excluded", "error"):
                    self.excluded += 1
                elif outcome == "pass":
                    self.passed += 1

    def unit_done(self, *_: Any) -> None:
        with self._lock:
            self.done += 1

    def add(self, passed: bool = False, excluded: bool = False) -> None:
        """One unit ended, counted by the caller (a grid whose verdicts are not events, e.g. validate)."""
        with self._lock:
            self.done += 1
            self.passed += bool(passed)
            self.excluded += bool(excluded)

    def line(self) -> str:
        with self._lock:
            done, passed, excluded = self.done, self.passed, self.excluded
        elapsed = max(self.clock() - self._started, 1e-9)
        share = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        parts = [f"progress: {done}/{self.total} {self.what}{share}"]
        if self.passes:
            parts.append(f"passed {passed}")
        parts.append(f"{'refused' if self.what == 'traps' else 'excluded'} {excluded}")
        rate = done / elapsed * 60
        parts.append(f"{rate:.1f} {self.what}/min")
        if done and done < self.total:
            parts.append(f"ETA {_duration((self.total - done) / (done / elapsed))}")
        elif not done:
            parts.append("ETA unknown")
        parts.append(f"elapsed {_duration(elapsed)}")
        return " · ".join(parts)

    def _loop(self) -> None:
        while not self._finished.wait(self.interval_s):
            self.say(self.line())

    @contextmanager
    def running(self) -> Iterator["PlainProgress"]:
        """Lines every interval while inside, and one at the end (0 s: none)."""
        thread = None
        if self.interval_s > 0:
            thread = threading.Thread(target=self._loop, daemon=True, name="membench-progress-lines")
            thread.start()
        try:
            yield self
        finally:
            self._finished.set()
            if thread is not None:
                thread.join(timeout=1.0)
                self.say(self.line())
