"""A run set published to Kafka from this process: what `membench run --bus kafka://…`
(`pipeline.distributed.kafka_run`) and `membench transfer --bus kafka://…`
(`pipeline.transfer_run`) share. Processors and the sink run as separate processes
(`membench process`, `membench sink`); `membench runner` has its own claims
(`pipeline.distributed.group_member`).

The steps, in order:

1. `KafkaPublication(settings, run_set)` opens the bus (its spool under the run set's directory)
   and reads the run set's unit statuses from the compacted unit-status topic (`status`);
2. `todo(units)`: the units not `completed` or `excluded` there, which are skipped;
3. `start(todo)`: each gets the attempt after its last recorded one (`attempts`), and is marked
   `started` with the run id of that attempt before anything runs;
4. the units run with `publish` as their bus and `completed(unit, run_id)` once each is done (a
   unit is complete only once Kafka acknowledged all of its events);
5. `close()` flushes the bus and says how the report follows; the run set's id goes to stdout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from pipeline.settings import Settings

if TYPE_CHECKING:
    from producers.bus.kafka import SharedUnitBus

DONE = ("completed", "excluded")  # a unit in one of these states is not run again


class KafkaPublication:
    def __init__(self, settings: Settings, run_set: str):
        from producers.bus.kafka import KafkaBus, read_unit_status

        self.run_set = run_set
        self.bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
        self.topics = self.bus.topics
        self.status: dict[str, dict] = read_unit_status(self.topics, run_set)  # unit id -> newest record
        self.attempts: dict[str, int] = {}  # unit id -> the attempt this process runs (set by `start`)
        self._shared: SharedUnitBus  # set by `start`, before the first publish

    def todo(self, units: list) -> list:
        """The units of UNITS the unit-status topic does not hold as completed or excluded."""
        return [u for u in units if self.status.get(u.unit_id, {}).get("status") not in DONE]

    def start(self, units: list) -> None:
        """Number each unit's attempt (one past its last recorded one) and mark it `started`."""
        from producers.bus.kafka import SharedUnitBus
        from producers.grid import run_id_for

        self.attempts.update({u.unit_id: self.status.get(u.unit_id, {}).get("attempt", 0) + 1 for u in units})
        self._shared = SharedUnitBus(self.bus, self.attempts)
        self._shared.mark_started({u.unit_id: run_id_for(self.run_set, u, self.attempts[u.unit_id]) for u in units})

    def publish(self, event, datum: bytes) -> None:
        self._shared.publish(event, datum)

    def completed(self, unit, run_id: str) -> None:
        self._shared.completed(unit.unit_id, run_id)

    def close(self, console: Console) -> None:
        """Flush what was published, then say what comes next; the run set's id on stdout."""
        self.bus.close()
        console.print(f"published run set {self.run_set}; when `membench sink --until-idle` has drained the "
                      f"topics, `membench report {self.run_set}` builds the report", highlight=False, markup=False)
        print(self.run_set)
