"""The distributed wiring: `membench run --bus kafka://…` publishes to Kafka (processors and the
sink run as separate processes), `membench run … --enqueue` puts a grid's units on the units topic
for `membench runner` processes on any machine, and replay can read the trajectory topic from the
start."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from membench.settings import Settings
from schemas.events import Event
from schemas.registry import SchemaVersion


def run_distributed(pack_spec, conditions, seeds, agent, workers, run_set, sandbox_name, read_budget,
                    settings: Settings) -> str:
    from producers.bus.kafka import KafkaBus, SharedUnitBus, read_unit_status
    from producers.pack_resolver import open_pack
    from producers.runner import RunConfig, code_digest, default_run_set, plan_grid, run_grid, run_id_for
    from sandbox.registry import get_sandbox

    console = Console(stderr=True)
    pack = open_pack(pack_spec, settings.home)
    run_set = run_set or default_run_set(pack.name, pack.digest, agent, conditions, seeds)
    bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
    status = read_unit_status(bus.topics, run_set)
    units = plan_grid(pack, conditions, seeds)
    todo = [u for u in units if status.get(u.unit_id, {}).get("status") not in ("completed", "excluded")]
    attempts = {u.unit_id: status.get(u.unit_id, {}).get("attempt", 0) + 1 for u in todo}
    console.print(f"run set [bold]{run_set}[/] on {settings.bus}: {len(units)} units, "
                  f"{len(units) - len(todo)} already complete, {len(todo)} to run with {workers} workers")
    config = RunConfig(run_set, agent, read_budget=read_budget, code_digest=code_digest(),
                       blob_dir=settings.runs_dir / run_set / "blobs")  # this runner's MEMBENCH_HOME
    shared = SharedUnitBus(bus, attempts)
    shared.mark_started({u.unit_id: run_id_for(run_set, u, attempts[u.unit_id]) for u in todo})

    def done(unit, run_id):
        shared.completed(unit.unit_id, run_id)
        progress.update(bar, advance=1, description=unit.unit_id)

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("units", total=len(todo))
        run_grid(pack, todo, config, get_sandbox(sandbox_name), shared.publish, workers, attempts, done)
    bus.close()
    console.print(f"published run set {run_set}; when `membench sink --until-idle` has drained the topics, "
                  f"`membench report {run_set}` builds the report")
    print(run_set)
    return run_set


def events_from_kafka(dsn: str, findings: list, timeout: float = 30.0) -> Iterator[tuple[Event, SchemaVersion]]:
    """Every event of the trajectory topic from the start, partition by partition (a run lives in
    one partition, so its order is kept), with the writer schema its message names: replay
    recomputes the hash with it, so the datum is decoded as written, not resolved to the newest."""
    import os

    from confluent_kafka import Consumer, TopicPartition

    from membench.replay import Finding
    from schemas.codec import DecodeError, decode_datum, unframe
    from schemas.topics import topics_from_dsn

    topics = topics_from_dsn(dsn)
    TRAJECTORY = topics.trajectory
    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group(f"replay-{os.getpid()}"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        meta = consumer.list_topics(TRAJECTORY, timeout=timeout)
        for partition in sorted(meta.topics[TRAJECTORY].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(TRAJECTORY, partition), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(TRAJECTORY, partition, low)])
            position, deadline = low, time.monotonic() + timeout
            while position < high and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    try:
                        writer, datum = unframe(msg.value() or b"")
                        try:
                            record = decode_datum(writer, datum)
                        except DecodeError:
                            raise
                        except Exception as exc:  # fastavro raises many types on corrupt data
                            raise DecodeError(f"datum does not match schema {writer.family}.v{writer.version}: "
                                              f"{exc}") from exc
                        yield Event.from_record(record), writer
                    except DecodeError as exc:
                        findings.append(Finding("?", None, f"partition {partition} offset {msg.offset()}: {exc}"))
    finally:
        consumer.close()


# --- runners on many machines (issue 17 item 5) -------------------------------------------------

RUNNER_SESSION_TIMEOUT_MS = 10_000  # a dead runner's units move to another runner after about this long
RUNNER_MAX_POLL_INTERVAL_MS = 6 * 3600 * 1000  # a rebalance waits this long for running units to finish


def enqueue_grid(pack_spec, conditions, seeds, agent, run_set, sandbox_name, read_budget, settings: Settings) -> str:
    """Put the grid's units that are not complete (and not already queued) on the units topic, each
    marked `queued` on the unit-status topic, and print the run set id. Nothing runs here."""
    from confluent_kafka import Producer

    from producers.bus.kafka import KafkaBus, read_unit_status
    from producers.pack_resolver import open_pack
    from producers.runner import default_run_set, plan_grid
    from producers.unit_queue import DONE_STATUSES, UnitOrder

    console = Console(stderr=True)
    pack = open_pack(pack_spec, settings.home)
    run_set = run_set or default_run_set(pack.name, pack.digest, agent, conditions, seeds)
    bus = KafkaBus(settings.bus, run_set, settings.runs_dir / run_set / "spool")
    status = read_unit_status(bus.topics, run_set)
    units = plan_grid(pack, conditions, seeds)
    # a unit already queued or running has its order on the topic; a second order would only be skipped
    todo = [u for u in units if status.get(u.unit_id, {}).get("status") not in (*DONE_STATUSES, "queued", "started")]
    producer = Producer({"bootstrap.servers": bus.bootstrap, "enable.idempotence": True, "acks": "all"})
    for unit in todo:
        order = UnitOrder(run_set, pack_spec, pack.digest, agent, sandbox_name, read_budget, unit.suite, unit.task,
                          unit.condition, unit.seed)
        bus.mark_unit(unit.unit_id, "queued", "", status.get(unit.unit_id, {}).get("attempt", 0))
        producer.produce(bus.topics.units, order.to_json(), order.key.encode())
    bus.flush()  # the queued marks before the orders: a runner may claim an order at once
    if producer.flush(60) != 0:
        raise RuntimeError(f"unit orders not acknowledged by Kafka at {bus.bootstrap}")
    bus.close()
    console.print(f"run set [bold]{run_set}[/] on {settings.bus}: {len(units)} units, {len(todo)} queued for "
                  f"`membench runner`, {len(units) - len(todo)} already complete, queued or running")
    print(run_set)
    return run_set


def read_run_head(topics, run_id: str, timeout: float = 30.0):
    """The last event of `run_id` on the trajectory topic (a `producers.attempts.RunHead`), or None
    when the run has no event. Every partition is scanned by key, decoding only the run's messages."""
    import os

    from confluent_kafka import Consumer, TopicPartition

    from producers.attempts import RunHead
    from schemas.codec import decode_datum, unframe

    key = run_id.encode()
    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group(f"head-{os.getpid()}"),
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    head = None
    try:
        meta = consumer.list_topics(topics.trajectory, timeout=timeout)
        for partition in sorted(meta.topics[topics.trajectory].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topics.trajectory, partition), timeout=timeout)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topics.trajectory, partition, low)])
            position, deadline = low, time.monotonic() + timeout
            while position < high:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{topics.trajectory} partition {partition}: could not read to offset "
                                       f"{high} within {timeout:.0f}s")
                for msg in consumer.consume(1000, 1.0):
                    if msg.error():
                        continue
                    position = msg.offset() + 1
                    if msg.key() != key:
                        continue
                    writer, datum = unframe(msg.value() or b"")
                    event = Event.from_record(decode_datum(writer, datum))
                    if head is None:
                        head = RunHead(event.run_set, event.run_id, event.unit_id)
                    head.events += 1
                    if event.seq > head.last_seq:
                        head.last_seq, head.last_hash = event.seq, event.hash
                    if event.kind == "RunEnded":
                        head.ended, head.status = True, event.payload.get("status")
    finally:
        consumer.close()
    return head


class StatusView:
    """The newest unit-status record of every unit, kept current by reading the compacted topic
    up to its end before each decision (one reader, assigned every partition, no group)."""

    def __init__(self, topics):
        import os

        from confluent_kafka import Consumer, TopicPartition

        self.topics = topics
        self._lock = threading.Lock()
        self.records: dict[str, dict] = {}  # "<run_set>/<unit_id>" -> record
        self._consumer = Consumer({"bootstrap.servers": topics.bootstrap,
                                   "group.id": topics.group(f"status-view-{os.getpid()}"),
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        meta = self._consumer.list_topics(topics.unit_status, timeout=30)
        self._partitions = sorted(meta.topics[topics.unit_status].partitions)
        self._consumer.assign([TopicPartition(topics.unit_status, p, -2) for p in self._partitions])  # -2: beginning
        self._positions = {p: 0 for p in self._partitions}

    def refresh(self, timeout: float = 30.0) -> None:
        from confluent_kafka import TopicPartition

        with self._lock:
            ends = {}
            for p in self._partitions:
                _, high = self._consumer.get_watermark_offsets(TopicPartition(self.topics.unit_status, p),
                                                               timeout=timeout)
                if high > self._positions[p]:
                    ends[p] = high
            deadline = time.monotonic() + timeout
            while any(self._positions[p] < high for p, high in ends.items()):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"could not read {self.topics.unit_status} to its end within {timeout:.0f}s")
                for msg in self._consumer.consume(1000, 0.5):
                    if msg.error():
                        continue
                    self._positions[msg.partition()] = msg.offset() + 1
                    if msg.value():
                        self.records[msg.key().decode()] = json.loads(msg.value())

    def get(self, key: str) -> dict | None:
        with self._lock:
            return self.records.get(key)

    def close(self) -> None:
        self._consumer.close()


def committable(offsets: dict[int, bool]) -> int:
    """The offset a partition may commit (the next one to read): one past the last of the
    claimed offsets that are done without a gap before it, 0 when the first is not done. A unit that
    finished before an earlier one still running is not committed past it."""
    done = 0
    for offset in sorted(offsets):
        if not offsets[offset]:
            break
        done = offset + 1
    return done


class RunnerError(RuntimeError):
    """A runner cannot run what it claimed (another pack digest here); the unit stays unclaimed."""


@dataclass
class RunnerStats:
    claimed: int = 0
    completed: int = 0
    skipped: int = 0
    closed: int = 0  # abandoned attempts this runner closed
    bad_orders: int = 0


class UnitRunner:
    """A `membench runner` process: claims unit orders from the units topic through the `runner`
    consumer group and runs each to completion.

    - A unit's offset is committed only after its events and its `completed` status are acknowledged
      by the brokers (offsets of one partition commit in order: up to the first unit not done).
    - On a rebalance the runner first lets its running units finish and commits them, so the units
      a partition still holds are never run by two live runners at once.
    - A runner that dies (`kill -9`) leaves its units uncommitted: after the group's session timeout
      another runner receives them, closes the dead attempt in its own chain
      (`RunEnded{abandoned}`, `producers/attempts.py`) and runs the next attempt (`decide`)."""

    def __init__(self, settings: Settings, workers: int = 1, log=None):
        from concurrent.futures import ThreadPoolExecutor

        from confluent_kafka import Consumer

        from producers.bus.kafka import ensure_topics
        from producers.runner import code_digest
        from schemas.topics import topics_from_dsn

        self.settings = settings
        self.topics = topics_from_dsn(settings.bus)
        ensure_topics(self.topics)
        self.workers = workers
        self.stats = RunnerStats()
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._name = f"{socket.gethostname()}-{os.getpid()}"
        self._code_digest = code_digest()
        self._status = StatusView(self.topics)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="membench-runner")
        self._lock = threading.Lock()
        self._buses: dict[str, object] = {}
        self._packs: dict[tuple[str, str], object] = {}
        self._running: dict = {}  # future -> (partition, offset, key)
        self._keys: set[str] = set()  # units running here (a duplicate order waits for no one: it is skipped)
        self._offsets: dict[int, dict[int, bool]] = {}  # partition -> offset -> done
        self._consumer = Consumer({
            "bootstrap.servers": self.topics.bootstrap, "group.id": self.topics.group("runner"),
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": RUNNER_SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 2000,
            "max.poll.interval.ms": RUNNER_MAX_POLL_INTERVAL_MS,
            "enable.partition.eof": False, "fetch.wait.max.ms": 200,
        })
        self._consumer.subscribe([self.topics.units], on_revoke=self._on_revoke)

    # -- the consumer side (main thread) --

    def _on_revoke(self, consumer, partitions) -> None:
        """Another member joined or left: finish and commit what runs here before giving it away."""
        from concurrent.futures import wait

        if self._running:
            self._log(f"runner {self._name}: rebalance; finishing {len(self._running)} running unit(s) first")
            wait(list(self._running))
        self._reap()
        self._commit()
        self._offsets.clear()

    def _reap(self) -> None:
        for future in [f for f in self._running if f.done()]:
            partition, offset, key = self._running.pop(future)
            self._keys.discard(key)
            future.result()  # a runner that cannot publish stops here, its unit uncommitted
            self._offsets[partition][offset] = True

    def _commit(self) -> None:
        from confluent_kafka import TopicPartition

        commits = []
        for partition, offsets in self._offsets.items():
            done = committable(offsets)
            if done:
                commits.append(TopicPartition(self.topics.units, partition, done))
                for offset in [o for o in offsets if o < done]:
                    del offsets[offset]
        if commits:
            self._consumer.commit(offsets=commits, asynchronous=False)

    def _group_lag(self) -> int:
        """Orders of the whole group not committed yet (every partition, not only this runner's)."""
        from confluent_kafka import TopicPartition

        meta = self._consumer.list_topics(self.topics.units, timeout=30)
        parts = [TopicPartition(self.topics.units, p) for p in meta.topics[self.topics.units].partitions]
        lag = 0
        for tp in self._consumer.committed(parts, timeout=30):
            low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topics.units, tp.partition),
                                                             timeout=30)
            lag += max(0, high - (tp.offset if tp.offset >= 0 else low))
        return lag

    def run(self, until_idle: bool = False, idle_seconds: float = 5.0) -> RunnerStats:
        from concurrent.futures import FIRST_COMPLETED, wait

        last_activity = time.monotonic()
        self._log(f"runner {self._name}: waiting for units on {self.topics.units}")
        try:
            while True:
                self._reap()
                self._commit()
                free = self.workers - len(self._running)
                if free <= 0:
                    wait(list(self._running), timeout=1.0, return_when=FIRST_COMPLETED)
                    last_activity = time.monotonic()
                    continue
                messages = [m for m in self._consumer.consume(free, 1.0) if not m.error()]
                for msg in messages:
                    self._claim(msg)
                if messages or self._running:
                    last_activity = time.monotonic()
                elif until_idle and time.monotonic() - last_activity >= idle_seconds and self._group_lag() == 0:
                    return self.stats
        finally:
            self._pool.shutdown(wait=True)
            self._reap_quietly()
            for bus in self._buses.values():
                bus.close()
            self._consumer.close()
            self._status.close()

    def _reap_quietly(self) -> None:
        try:
            self._reap()
            self._commit()
        except Exception as exc:  # already leaving on an error: say so, keep the first one
            self._log(f"runner {self._name}: {exc}")

    def _claim(self, msg) -> None:
        from producers.unit_queue import OrderError, UnitOrder

        partition, offset = msg.partition(), msg.offset()
        self._offsets.setdefault(partition, {})[offset] = False
        try:
            order = UnitOrder.from_json(msg.value() or b"")
        except OrderError as exc:  # a bad order is skipped (and said), never run or retried forever
            self.stats.bad_orders += 1
            self._log(f"runner {self._name}: {self.topics.units} partition {partition} offset {offset}: {exc}")
            self._offsets[partition][offset] = True
            return
        if order.key in self._keys:  # a duplicate order of a unit running here
            self.stats.skipped += 1
            self._offsets[partition][offset] = True
            return
        self._keys.add(order.key)
        self.stats.claimed += 1
        future = self._pool.submit(self._run_order, order)
        self._running[future] = (partition, offset, order.key)

    # -- the unit side (worker threads) --

    def _bus(self, run_set: str):
        from producers.bus.kafka import KafkaBus

        with self._lock:
            if run_set not in self._buses:
                # a spool of this process's own: a dead runner's undelivered events belong to an attempt
                # that is closed as abandoned, never re-sent after its closing event
                self._buses[run_set] = KafkaBus(self.settings.bus, run_set,
                                                self.settings.runs_dir / run_set / "spool" / self._name)
            return self._buses[run_set]

    def _pack(self, order):
        from producers.pack_resolver import open_pack
        from schemas.pack_format import PackError

        with self._lock:
            key = (order.pack, order.pack_digest)
            if key not in self._packs:
                try:
                    pack = open_pack(order.pack, self.settings.home)
                except PackError as exc:
                    raise RunnerError(f"unit {order.key}: {exc}") from None
                if pack.digest != order.pack_digest:
                    raise RunnerError(f"unit {order.key}: pack {order.pack!r} here has digest {pack.digest[:12]}, the "
                                       f"order needs {order.pack_digest[:12]}; copy the finalized pack into "
                                       f"{self.settings.home / 'packs'}")
                self._packs[key] = pack
            return self._packs[key]

    def _run_order(self, order) -> None:
        from producers.attempts import closing_event, describe
        from producers.runner import RunConfig, run_id_for, run_unit
        from producers.unit_queue import Head, decide
        from sandbox.registry import get_sandbox

        unit = order.unit
        bus = self._bus(order.run_set)
        self._status.refresh()
        status = self._status.get(order.key)
        head = None
        if status and status.get("status") in ("started", "abandoned") and status.get("run_id"):
            head = read_run_head(self.topics, status["run_id"])
        decision = decide(status, None if head is None else Head(head.run_id, head.last_seq,
                                                                  head.status if head.ended else None))
        if decision.action == "skip":
            if decision.finished_run:
                bus.mark_unit(unit.unit_id, "completed", decision.finished_run, decision.attempt)
                bus.flush()
            self._log(f"runner {self._name}: skipped {order.key}: {decision.reason}")
            with self._lock:
                self.stats.skipped += 1
            return
        pack = self._pack(order)
        if decision.close is not None:
            event, datum = closing_event(head)
            bus.publish(event, datum)
            bus.flush()
            bus.mark_unit(unit.unit_id, "abandoned", head.run_id, decision.attempt - 1)
            self._log(f"runner {self._name}: {describe(event)}")
            with self._lock:
                self.stats.closed += 1
        run_id = run_id_for(order.run_set, unit, decision.attempt)
        bus.mark_unit(unit.unit_id, "started", run_id, decision.attempt)
        bus.flush()  # recorded before the run's first event: a runner that takes over finds the attempt
        self._log(f"runner {self._name}: claimed {order.key} attempt {decision.attempt} run {run_id}")
        config = RunConfig(order.run_set, order.agent, read_budget=order.read_budget, code_digest=self._code_digest,
                           blob_dir=self.settings.runs_dir / order.run_set / "blobs")
        lock = threading.Lock()

        def publish(event, datum):
            with lock:
                bus.publish(event, datum)

        run_unit(pack, unit, config, get_sandbox(order.sandbox), publish, decision.attempt)
        bus.flush()  # a unit is complete only once Kafka acknowledged all of its events
        bus.mark_unit(unit.unit_id, "completed", run_id, decision.attempt)
        bus.flush()
        self._log(f"runner {self._name}: completed {order.key} attempt {decision.attempt} run {run_id}")
        with self._lock:
            self.stats.completed += 1


def grid_progress(settings: Settings, run_set: str | None) -> dict:
    """Unit counts per status of each run set (or of one), from the compacted unit-status topic:
    what any machine sees of a grid's progress. `attempts_abandoned` counts the attempts before each
    unit's newest one that were closed (attempt numbers start at 1)."""
    from schemas.topics import topics_from_dsn

    view = StatusView(topics_from_dsn(settings.bus))
    try:
        view.refresh()
        records = dict(view.records)
    finally:
        view.close()
    out: dict[str, dict] = {}
    for key, record in sorted(records.items()):
        rs, _, _unit = key.partition("/")
        if run_set is not None and rs != run_set:
            continue
        entry = out.setdefault(rs, {"units": 0, "queued": 0, "started": 0, "abandoned": 0, "completed": 0,
                                    "excluded": 0, "attempts_abandoned": 0})
        entry["units"] += 1
        state = record.get("status", "queued")
        entry[state] = entry.get(state, 0) + 1
        attempt = int(record.get("attempt", 0) or 0)
        entry["attempts_abandoned"] += max(0, attempt - 1) + (1 if state == "abandoned" else 0)
    return out
