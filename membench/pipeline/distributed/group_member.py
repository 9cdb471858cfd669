"""`membench runner`: a process of the `runner` consumer group on the units topic that claims unit
orders and runs each to completion (the rules are in docs/design.md §2)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from membench.pipeline.distributed.topic_reads import StatusView, read_run_head
from membench.pipeline.settings import Settings

if TYPE_CHECKING:  # imported where a unit runs: a runner that only waits does not load them
    from membench.bus.kafka import KafkaBus
    from membench.bus.attempts import RunHead
    from membench.runner.unit_queue import Decision

RUNNER_SESSION_TIMEOUT_MS = 10_000  # a dead runner's units move to another runner after about this long
RUNNER_MAX_POLL_INTERVAL_MS = 6 * 3600 * 1000  # a rebalance waits this long for running units to finish


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
    fenced: int = 0  # attempts of this runner that another runner had closed before they ended
    lost_claims: int = 0  # attempts another runner claimed first from the same status record


@dataclass(frozen=True)
class Plan:
    """What a runner decided for one claimed order, and on what: `base` is the offset of the status
    record it read (None: it read none), `claim` the token its records carry."""

    decision: Decision
    head: RunHead | None  # of the attempt the status names
    base: int | None
    claim: str


class UnitRunner:
    """A `membench runner` process: claims unit orders from the units topic through the `runner`
    consumer group and runs each to completion.

    - A unit's offset is committed only after its events and its `completed` status are acknowledged
      by the brokers (offsets of one partition commit in order: up to the first unit not done).
    - On a rebalance the runner first lets its running units finish and commits them, so the units
      a partition still holds are never run by two live runners at once.
    - A runner that dies (`kill -9`) leaves its units uncommitted: after the group's session timeout
      another runner receives them, closes the dead attempt in its own chain
      (`RunEnded{abandoned}`, `membench/bus/attempts.py`) and runs the next attempt (`decide`).
    - A runner that only stalled (or was cut off) past the session timeout or `max.poll.interval.ms`
      is fenced: the close is the first RunEnded of its attempt's run, so what it publishes on
      resuming derives nothing, and before recording `completed` it checks that its own RunEnded ended
      the run (`_ended_by`); otherwise it says `fenced` and records nothing."""

    def __init__(self, settings: Settings, workers: int = 1, log=None,
                 max_poll_interval_ms: int = RUNNER_MAX_POLL_INTERVAL_MS, admit=None):
        from concurrent.futures import ThreadPoolExecutor

        from confluent_kafka import Consumer

        from membench.bus.kafka import ensure_topics
        from membench.runner.grid import code_digest
        from membench.bus.kafka_config import consumer_config
        from membench.bus.topics import topics_from_dsn

        self.settings = settings
        self.topics = topics_from_dsn(settings.bus)
        ensure_topics(self.topics)
        self.workers = workers
        self.stats = RunnerStats()
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._name = f"{socket.gethostname()}-{os.getpid()}"
        self._code_digest = code_digest()
        # a nonce of this process: a restarted runner with the same host name and pid (a container's
        # pid 1) does not keep its predecessor's claims as its own
        self._claims = f"{self._name}/{uuid.uuid4().hex[:8]}-"
        self._status = StatusView(self.topics, claims_prefix=self._claims)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="membench-runner")
        from membench.pipeline.distributed.runner_models import RunnerModels

        # the model gateway and the admissions of the units run here (`admit`: the conformance rule)
        self._models = RunnerModels(settings, workers, admit, self._log)
        self._ready_lock = threading.Lock()
        self._scoring: set[tuple[str, str]] = set()  # (pack digest, sandbox) whose scoring pre-flight passed
        self._lock = threading.Lock()
        self._buses: dict[str, KafkaBus] = {}
        self._packs: dict[tuple[str, str], object] = {}
        self._running: dict = {}  # future -> (partition, offset, key, generation)
        self._generation = 0  # bumped when partitions are lost: a unit claimed before marks no offset after
        self._keys: set[str] = set()  # units running here (a duplicate order waits for no one: it is skipped)
        self._offsets: dict[int, dict[int, bool]] = {}  # partition -> offset -> done
        # a clean stop's kill (`fence`): nothing more of a running unit is published, its sandboxes die,
        # and `_close_cut` closes the attempts it left open; their orders stay uncommitted for the group
        self.killed = threading.Event()
        self._attempts: dict[str, tuple] = {}  # order key -> (order, plan, run id, ended event ids), running here
        self._cut: set[str] = set()  # order keys whose attempt the kill cut short
        self._consumer = Consumer(consumer_config(self.topics.bootstrap, self.topics.group("runner"), {
            "session.timeout.ms": RUNNER_SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 2000,
            "max.poll.interval.ms": max_poll_interval_ms,
            "enable.partition.eof": False, "fetch.wait.max.ms": 200,
        }))
        self._consumer.subscribe([self.topics.units], on_revoke=self._on_revoke, on_lost=self._on_lost)

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

    def _on_lost(self, consumer, partitions) -> None:
        """The group took our partitions without a revoke (this process stalled, or its heartbeats
        did not reach the broker, past the timeouts): another runner may run their units already.
        Nothing of theirs can be committed here; a unit still running finds out whether it was fenced
        before it records anything (`_ended_by`)."""
        self._log(f"runner {self._name}: lost {len(partitions)} partition(s) to the group (stalled past the "
                  f"session timeout or max.poll.interval.ms); {len(self._running)} unit(s) still running here")
        self._generation += 1
        self._offsets.clear()

    def _reap(self) -> None:
        for future in [f for f in self._running if f.done()]:
            partition, offset, key, generation = self._running.pop(future)
            self._keys.discard(key)
            future.result()  # a runner that cannot publish stops here, its unit uncommitted
            with self._lock:  # an attempt the kill cut short stays in `_attempts`: its order stays the group's
                cut = key in self._cut or key in self._attempts
            if generation == self._generation and not cut:
                self._offsets[partition][offset] = True

    def _commit(self) -> None:
        from confluent_kafka import KafkaException

        from confluent_kafka import TopicPartition

        commits = []
        for partition, offsets in self._offsets.items():
            done = committable(offsets)
            if done:
                commits.append(TopicPartition(self.topics.units, partition, done))
                for offset in [o for o in offsets if o < done]:
                    del offsets[offset]
        if commits:
            try:
                self._consumer.commit(offsets=commits, asynchronous=False)
            except KafkaException as exc:  # no longer a member (a stall): the partitions' new owner decides
                self._log(f"runner {self._name}: offsets not committed ({exc.args[0].str()}); the group "
                          f"reassigns those orders and their units' status decides")

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

    def run(self, until_idle: bool = False, idle_seconds: float = 5.0, stop=None) -> RunnerStats:
        """`stop` (membench.pipeline.stopping.GridStop): once asked, no further order is claimed; the running
        units finish and are committed, then this returns (the remaining orders stay queued for the
        group). Its kill path is the caller's: the process exits, as a `kill -9` would."""
        from concurrent.futures import FIRST_COMPLETED, wait

        last_activity = time.monotonic()
        self._log(f"runner {self._name}: waiting for units on {self.topics.units}")
        try:
            while True:
                self._reap()
                self._commit()
                if stop is not None and stop.killed.is_set():
                    self._close_cut(stop)
                    return self.stats
                if stop is not None and stop.asked:
                    if not self._running:
                        self._log(f"runner {self._name}: stopped; the orders not claimed stay queued")
                        return self.stats
                    # keep polling (fetching paused) for heartbeats and rebalances; claim nothing new
                    self._consumer.pause(self._consumer.assignment())
                    self._consumer.consume(1, 0)
                    wait(list(self._running), timeout=1.0, return_when=FIRST_COMPLETED)
                    continue
                free = self.workers - len(self._running)
                if free <= 0:
                    # busy: keep polling (with fetching paused) so that max.poll.interval.ms measures a
                    # stalled process, not a long unit; rebalance callbacks run here too
                    self._consumer.pause(self._consumer.assignment())
                    for msg in self._consumer.consume(1, 0):
                        if not msg.error():  # fetched before the pause: claim it all the same (never drop)
                            self._claim(msg)
                    wait(list(self._running), timeout=1.0, return_when=FIRST_COMPLETED)
                    last_activity = time.monotonic()
                    continue
                self._consumer.resume(self._consumer.assignment())
                messages = [m for m in self._consumer.consume(free, 1.0) if not m.error()]
                for msg in messages:
                    self._claim(msg)
                if messages or self._running:
                    last_activity = time.monotonic()
                elif until_idle and time.monotonic() - last_activity >= idle_seconds and self._group_lag() == 0:
                    return self.stats
        finally:
            # after a kill, a unit thread still blocked (its output fenced) is not waited for
            self._pool.shutdown(wait=not self.killed.is_set(), cancel_futures=self.killed.is_set())
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
        from membench.runner.unit_queue import OrderError, UnitOrder

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
        self._running[future] = (partition, offset, order.key, self._generation)

    # -- the unit side (worker threads) --

    def _bus(self, run_set: str):
        from membench.bus.kafka import KafkaBus

        with self._lock:
            if run_set not in self._buses:
                # a spool of this process's own: a dead runner's undelivered events belong to an attempt
                # that is closed as abandoned, never re-sent after its closing event
                self._buses[run_set] = KafkaBus(self.settings.bus, run_set,
                                                self.settings.runs_dir / run_set / "spool" / self._name)
            return self._buses[run_set]

    def _pack(self, order):
        from membench.packs.pack_resolver import open_pack
        from membench.formats.pack_format import PackError

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

    def _scoring_ready(self, order) -> None:
        """The scoring pre-flight (docs/sandbox.md) on this machine, once per pack and sandbox backend."""
        from membench.runner.scoring_preflight import ScoringPreflightFailed, require_scoring

        with self._ready_lock:
            if (order.pack_digest, order.sandbox) in self._scoring:
                return
            try:
                require_scoring(self._pack(order), order.sandbox)
            except ScoringPreflightFailed as exc:
                raise RunnerError(f"unit {order.key}: {exc}") from None
            self._scoring.add((order.pack_digest, order.sandbox))
            self._log(f"runner {self._name}: scoring pre-flight passed for pack {order.pack_digest[:12]} on "
                      f"{order.sandbox}")

    def _hosted(self, order):
        from membench.pipeline.distributed.runner_models import ModelsRefused

        try:
            return self._models.for_order(order)
        except ModelsRefused as exc:
            raise RunnerError(f"unit {order.key}: {exc}") from None

    def _plan(self, order) -> "Plan":
        """Read the unit's status (to the topic's end) and, when an attempt started, its run's head;
        decide. The claim token names this decision, the base the record it read."""
        from membench.runner.unit_queue import Head, decide

        self._status.refresh()
        state = self._status.state(order.key)
        status = state.record
        head = None
        if status and status.get("status") in ("started", "abandoned") and status.get("run_id"):
            head = read_run_head(self.topics, status["run_id"])
        decision = decide(status, None if head is None else Head(head.run_id, head.last_seq,
                                                                  head.status if head.ended else None))
        return Plan(decision, head, state.offset, f"{self._claims}{uuid.uuid4().hex[:12]}")

    def _run_order(self, order) -> None:
        plan = self._plan(order)
        run_id = self._prepare(order, plan)
        if run_id is None or not self._claim_attempt(order, plan, run_id):
            return
        self._execute(order, plan, run_id)

    def _prepare(self, order, plan: "Plan") -> str | None:
        """Skip a done unit, or close the earlier attempt the plan takes over; the run id of the
        attempt to claim, or None when there is nothing to run here."""
        from membench.bus.attempts import RunHead
        from membench.runner.grid import run_id_for

        decision, bus = plan.decision, self._bus(order.run_set)
        if decision.action == "skip":
            self._skip(bus, order, decision.reason, decision.finished_run, decision.attempt)
            return None
        self._pack(order)
        # checked before the claim, once each here: a runner that cannot run it leaves it to another
        self._scoring_ready(order)
        self._hosted(order)
        run_id = run_id_for(order.run_set, order.unit, decision.attempt)
        if decision.close is not None:
            head = plan.head or RunHead(order.run_set, decision.close, order.unit.unit_id)
            # `abandoned` is recorded, and acknowledged, before the close is published: a stalled
            # runner that finishes afterwards finds it and checks the log before recording `completed`
            if not self._record_claim(order, plan, "abandoned", head.run_id, decision.attempt - 1, run_id):
                return None
            finished = self._close(bus, order, head)
            if finished is not None:  # the stalled runner's RunEnded came first: its attempt completed the unit
                self._skip(bus, order, f"run {finished} ended before it could be closed", finished,
                           decision.attempt - 1)
                return None
        return run_id

    def _claim_attempt(self, order, plan: "Plan", run_id: str) -> bool:
        """Record `started` (acknowledged, before the run's first event: a runner that takes over
        finds the attempt) with our claim and base; whether it won."""
        attempt = plan.decision.attempt
        if not self._record_claim(order, plan, "started", run_id, attempt, run_id):
            return False
        self._log(f"runner {self._name}: claimed {order.key} attempt {attempt} run {run_id}")
        return True

    def _record_claim(self, order, plan: "Plan", status: str, run_id: str, attempt: int, claimed_run: str) -> bool:
        """Record STATUS with our claim and base and read the status topic up to it
        (`membench/pipeline/distributed/unit_claims.py`): it counts unless another claim's `started` (or a
        completed/excluded mark) landed after our base (`KeyStatus`). A loser publishes nothing of
        the attempt, repeats the record that counts after its own so the key's newest record is true
        again, and leaves the unit to the winner."""
        from membench.pipeline.distributed.unit_claims import record_claim, restate

        bus, unit_id = self._bus(order.run_set), order.unit.unit_id
        if record_claim(self._status, bus, unit_id, status, run_id, attempt, plan.claim, plan.base):
            return True
        winner = self._status.get(order.key) or {}
        self._log(f"runner {self._name}: lost claim {order.key} attempt {plan.decision.attempt} run {claimed_run} "
                  f"to {winner.get('claim') or 'an unclaimed record'} ({winner.get('status')} attempt "
                  f"{winner.get('attempt')}); the unit is left to it")
        with self._lock:
            self.stats.lost_claims += 1
        if not restate(self._status, bus, unit_id, plan.claim):
            self._log(f"runner {self._name}: {order.key}: its newest status record is still not the one that "
                      f"counts after 10 repeats; readers that fold the key by the claim rule are not affected")
        return False

    def _execute(self, order, plan: "Plan", run_id: str) -> None:
        from membench.bus.kafka_blobs import share_blobs
        from membench.runner.grid import RunConfig, run_unit
        from membench.sandbox.registry import get_sandbox

        from membench.pipeline.stopping import StoppableSandbox

        bus, attempt, unit = self._bus(order.run_set), plan.decision.attempt, order.unit
        hosted = self._hosted(order)
        run_dir = self.settings.runs_dir / order.run_set
        config = RunConfig(order.run_set, order.agent, read_budget=order.read_budget, code_digest=self._code_digest,
                           blob_dir=run_dir / "blobs", memory_dir=run_dir / "memory" / self._name,
                           gateway=hosted and hosted.gateway, loop=hosted and hosted.loop,
                           memory_model=hosted and hosted.memory_model)
        ended: list[str] = []  # the event id of this attempt's RunEnded
        with self._lock:
            self._attempts[order.key] = (order, plan, run_id, ended)

        def publish(event, datum):
            with self._lock:  # one lock with `fence`: after it, nothing of this attempt goes out
                if self.killed.is_set():
                    return
                share_blobs(bus, config.blob_dir, event)  # the blobs it names, for every other runner
                bus.publish(event, datum)
                if event.kind == "RunEnded":
                    ended.append(event.event_id)

        try:
            run_unit(self._pack(order), unit, config, StoppableSandbox(get_sandbox(order.sandbox), self.killed),
                     publish, attempt)
        finally:
            with self._lock:
                cut = self.killed.is_set() and not ended
                if not cut:
                    self._attempts.pop(order.key, None)
        if cut:  # `_close_cut` closes it
            return
        bus.flush()  # a unit is complete only once Kafka acknowledged all of its events
        if not self._ended_by(order.key, run_id, ended[0] if ended else None):
            self._log(f"runner {self._name}: fenced {order.key} attempt {attempt} run {run_id}: another "
                      f"runner closed it as abandoned first; what it published after the close derives nothing "
                      f"and the unit's status is left to that runner")
            with self._lock:
                self.stats.fenced += 1
            return
        bus.mark_unit(unit.unit_id, "completed", run_id, attempt, claim=plan.claim)
        bus.flush()
        self._log(f"runner {self._name}: completed {order.key} attempt {attempt} run {run_id}")
        with self._lock:
            self.stats.completed += 1

    def fence(self) -> None:
        """A clean stop's kill (membench.pipeline.stopping.GridStop, before `killed` is set there): nothing more
        of the running units is published, and their sandboxes are stopped."""
        with self._lock:
            self.killed.set()

    def _close_cut(self, stop) -> None:
        """After the kill: wait up to KILL_WAIT_S for the unit threads to wind down, then close every
        attempt they left open as a take-over would (`abandoned` recorded with our claim, then
        `RunEnded{abandoned}` at the run's end on the topic, `_close`); their orders stay uncommitted,
        so the group hands them to another runner (or this one, restarted), which runs the next attempt."""
        from concurrent.futures import wait

        from membench.pipeline.stopping import KILL_WAIT_S
        from membench.bus.attempts import RunHead

        wait(list(self._running), timeout=KILL_WAIT_S)
        with self._lock:
            cut = [entry for entry in self._attempts.values() if not entry[3]]
            self._cut.update(order.key for order, _, _, _ in cut)
        for order, plan, run_id, _ in cut:
            bus = self._bus(order.run_set)
            bus.flush()
            if not self._record_claim(order, plan, "abandoned", run_id, plan.decision.attempt, run_id):
                continue  # another runner took the unit over already: the close is its
            head = read_run_head(self.topics, run_id) or RunHead(order.run_set, run_id, order.unit.unit_id)
            if head.ended:
                continue
            self._close(bus, order, head)
        self._reap_quietly()
        self._log(f"runner {self._name}: stopped; {len(cut)} attempt(s) closed as abandoned, their orders and the "
                  "ones not claimed stay queued for the group")

    def _skip(self, bus, order, reason: str, finished_run: str | None, attempt: int) -> None:
        if finished_run:
            bus.mark_unit(order.unit.unit_id, "completed", finished_run, attempt)
            bus.flush()
        self._log(f"runner {self._name}: skipped {order.key}: {reason}")
        with self._lock:
            self.stats.skipped += 1

    def _close(self, bus, order, head) -> str | None:
        """Close an earlier attempt whose runner died or stalled (its `abandoned` is recorded, and
        counted, already); returns None once our `RunEnded{abandoned}` is the run's end, or the run id
        when the attempt's own RunEnded came first (its runner resumed and finished: the unit is
        complete with it).

        The close continues the chain where we read it; if the stalled runner published more in
        between, the close lands on a seq already taken (the processors drop it), so it is published
        again at the new end until it is the run's first RunEnded or the run ended by itself."""
        from membench.bus.attempts import closing_event, describe

        while True:
            event, datum = closing_event(head)
            bus.publish(event, datum)
            bus.flush()
            after = read_run_head(self.topics, head.run_id)
            if after is None:
                raise RuntimeError(f"run {head.run_id}: its acknowledged close is not on {self.topics.trajectory}")
            if after.ended:
                if after.end_event_id == event.event_id:
                    self._log(f"runner {self._name}: {describe(event)}")
                    with self._lock:
                        self.stats.closed += 1
                    return None
                return head.run_id if after.status != "abandoned" else None
            head = after

    def _ended_by(self, key: str, run_id: str, ended_id: str | None) -> bool:
        """Whether our RunEnded (`ended_id`, acknowledged) ended `run_id`: no other runner closed it
        first. Cheap when the unit-status still names this attempt as started (a take-over records
        `abandoned` before publishing its close, so a close can only land after our RunEnded);
        otherwise the log decides, read as the processors read it."""
        if ended_id is None:
            return False
        self._status.refresh()
        record = self._status.get(key) or {}
        if record.get("status") == "started" and record.get("run_id") == run_id:
            return True
        head = read_run_head(self.topics, run_id)
        return head is not None and head.end_event_id == ended_id
