"""A run set published to Kafka from this process: what `membench run --bus kafka://…`
(`membench.pipeline.distributed.kafka_run`) and `membench transfer --bus kafka://…`
(`membench.pipeline.transfer_run`) share. Processors and the sink run as separate processes
(`membench process`, `membench sink`); `membench runner` has its own claims
(`membench.pipeline.distributed.group_member`).

The steps, in order:

1. `KafkaPublication(settings, run_set)` opens the bus (its spool under the run set's directory)
   and reads the run set's unit statuses from the compacted unit-status topic (`status`);
2. `todo(units)`: the units not `completed` or `excluded` there, which are skipped;
3. `start(todo)`: each gets the attempt after its last recorded one (`attempts`), and is marked
   `started` with the run id of that attempt before anything runs (`start(todo, mark=False)` and
   `begin(unit)` as each starts instead: a grid that can be stopped leaves the units it never
   started unmarked, as the embedded log has no trace of them);
4. the units run with `publish` as their bus and `completed(unit, run_id)` once each is done (a
   unit is complete only once Kafka acknowledged all of its events; one excluded for a cause a later
   run may not meet, RETRIED_EXCLUSIONS, is recorded `excluded` with its error type and run again
   on resume, as the embedded run does);
5. `close(display)` flushes the bus and says how the report follows on the caller's display (the
   CLI then prints the run set's id on stdout).

A clean stop's kill (`membench.pipeline.stopping`) calls `fence()`: from then on a unit still running
publishes nothing; `close_open()` then closes every attempt begun here whose run had not ended with
`RunEnded{abandoned}` continuing its chain where the topic holds it (`membench/bus/attempts.py`), and
records the unit `abandoned`, so a resumed run runs its next attempt.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from membench.pipeline.settings import Settings

if TYPE_CHECKING:
    from membench.pipeline.run_display import RunDisplay
    from membench.bus.attempts import RunHead
    from membench.bus.kafka import SharedUnitBus

DONE = ("completed", "excluded")  # a unit in one of these states is not run again
# exclusions a later run may not meet again, retried on resume as the embedded run retries them
# (membench.warehouse.queries.completed_units): the user fixes the model's key, URL or name, or the installation
RETRIED_EXCLUSIONS = ("model_unavailable", "model_misconfigured", "harness_fault")


class KafkaPublication:
    def __init__(self, settings: Settings, run_set: str):
        from membench.bus.kafka import KafkaBus, read_unit_status

        self.run_set = run_set
        self.bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
        self.topics = self.bus.topics
        self.status: dict[str, dict] = read_unit_status(self.topics, run_set)  # unit id -> newest record
        self.attempts: dict[str, int] = {}  # unit id -> the attempt this process runs (set by `start`)
        self._shared: SharedUnitBus  # set by `start`, before the first publish
        self._lock = threading.Lock()
        self._fenced = False
        self._begun: dict[str, str] = {}  # unit id -> the run id of its attempt begun here
        self._heads: dict[str, RunHead] = {}  # run id -> membench.bus.attempts.RunHead as published
        self._completed: set[str] = set()  # unit ids
        self._retried: dict[str, str] = {}  # run id -> its RunEnded's error type, one of RETRIED_EXCLUSIONS

    def todo(self, units: list) -> list:
        """The units of UNITS the unit-status topic does not hold as completed or excluded (an exclusion
        of RETRIED_EXCLUSIONS is run again)."""
        def done(record: dict) -> bool:
            return record.get("status") in DONE and record.get("error_type") not in RETRIED_EXCLUSIONS

        return [u for u in units if not done(self.status.get(u.unit_id, {}))]

    def start(self, units: list, mark: bool = True) -> None:
        """Number each unit's attempt (one past its last recorded one) and, with MARK, mark it `started`."""
        from membench.bus.kafka import SharedUnitBus
        from membench.runner.grid import run_id_for

        self.attempts.update({u.unit_id: self.status.get(u.unit_id, {}).get("attempt", 0) + 1 for u in units})
        self._shared = SharedUnitBus(self.bus, self.attempts)
        if mark:
            run_ids = {u.unit_id: run_id_for(self.run_set, u, self.attempts[u.unit_id]) for u in units}
            self._begun.update(run_ids)
            self._shared.mark_started(run_ids)

    def begin(self, unit) -> str:
        """Mark UNIT `started` (acknowledged) as it starts; the run id of its attempt."""
        from membench.runner.grid import run_id_for

        run_id = run_id_for(self.run_set, unit, self.attempts[unit.unit_id])
        with self._lock:
            self._begun[unit.unit_id] = run_id
        self._shared.mark_started({unit.unit_id: run_id})
        return run_id

    def publish(self, event, datum: bytes) -> None:
        from membench.bus.attempts import RunHead

        with self._lock:
            if self._fenced:  # the attempt is closed as abandoned: what it adds now is no result
                return
            self._shared.publish(event, datum)
            head = self._heads.get(event.run_id)
            if head is None:
                head = self._heads[event.run_id] = RunHead(event.run_set, event.run_id, event.unit_id)
            head.events += 1
            head.last_seq, head.last_hash = event.seq, event.hash
            if event.kind == "RunEnded":
                head.ended, head.status = True, event.payload.get("status")
                if head.status == "excluded" and event.payload.get("error_type") in RETRIED_EXCLUSIONS:
                    self._retried[event.run_id] = event.payload["error_type"]

    def completed(self, unit, run_id: str) -> None:
        with self._lock:
            head = self._heads.get(run_id)
            if self._fenced and not (head is not None and head.ended):
                return  # cut short by the fence: `close_open` closes it
            self._completed.add(unit.unit_id)
            retried = self._retried.get(run_id)
        self._mark_ended(unit.unit_id, run_id, retried)

    def _mark_ended(self, unit_id: str, run_id: str, retried: str | None) -> None:
        """`completed` once its events are acknowledged; a retried exclusion `excluded` with its error type."""
        if retried is None:
            self._shared.completed(unit_id, run_id)
            return
        self.bus.flush()
        self.bus.mark_unit(unit_id, "excluded", run_id, self.attempts[unit_id], error_type=retried)
        self.bus.flush()

    def fence(self) -> None:
        """Publish nothing more of the running units (a clean stop's kill, before their sandboxes die)."""
        with self._lock:
            self._fenced = True

    def close_open(self) -> list:
        """Close every attempt begun here whose run has not ended: `RunEnded{abandoned}` at the next seq
        of its chain as published (seq 0 for a run with no event), then the unit recorded `abandoned`;
        all acknowledged. Returns the closing events."""
        from membench.bus.attempts import RunHead, closing_event

        closed = []
        with self._lock:
            self._fenced = True
            for unit_id, run_id in self._begun.items():
                head = self._heads.get(run_id) or RunHead(self.run_set, run_id, unit_id)
                if unit_id in self._completed:
                    continue
                if head.ended:  # its RunEnded went out before the fence; its thread never reported back
                    self._mark_ended(unit_id, run_id, self._retried.get(run_id))
                    self._completed.add(unit_id)
                    continue
                event, datum = closing_event(head)
                self._shared.publish(event, datum)
                head.ended, head.status = True, event.payload["status"]
                self.bus.mark_unit(unit_id, "abandoned", run_id, self.attempts[unit_id])
                closed.append(event)
        self.bus.flush()
        return closed

    def close(self, display: RunDisplay) -> None:
        """Flush what was published, then say what comes next on DISPLAY."""
        self.bus.close()
        display.print(f"published run set {self.run_set}; when `membench sink --until-idle` has drained the "
                      f"topics, `membench report {self.run_set}` builds the report", highlight=False, markup=False)
