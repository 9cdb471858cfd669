"""Fencing's last window, against the real Kafka broker and real bubblewrap: two runners
read the same unit-status record and decide the same attempt, so both would publish the same run id.
Interleaved step by step in one process (no sleeps, no signals): A decides, B decides, B records
`started` and wins, A records `started` and loses. A publishes no trajectory event, the unit's run
holds one execution's events, and its status counts the unit once, whether A's lost record lands
before B completes or after."""

from __future__ import annotations

import json

import pytest

from membench.pipeline.distributed.progress import grid_progress
from membench.pipeline.distributed.group_member import UnitRunner
from membench.pipeline.distributed.topic_reads import read_run_head
from membench.pipeline.settings import Settings
from membench.bus.kafka import KafkaBus, ensure_topics, read_unit_status
from membench.packs.pack_resolver import open_pack
from membench.runner.grid import plan_grid
from membench.bus.unit_status import KeyStatus
from membench.runner.unit_queue import UnitOrder
from membench.bus.topics import topics_from_dsn
from tests.conftest import run_cli
from tests.integration.kafka_helpers import SINGLE, namespace, require_broker, topic_size

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _raw_records(topics, key: str) -> list[tuple[int, dict]]:
    """Every unit-status record of KEY, in offset order, read without the claim rule."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": topics.bootstrap, "group.id": topics.group("claims-test"),
                         "enable.auto.commit": False})
    out = []
    try:
        for partition in consumer.list_topics(topics.unit_status, timeout=30).topics[topics.unit_status].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topics.unit_status, partition), timeout=30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topics.unit_status, partition, low)])
            position = low
            while position < high:
                for msg in consumer.consume(100, 1.0):
                    if not msg.error():
                        position = msg.offset() + 1
                        if msg.key().decode() == key:
                            out.append((msg.offset(), json.loads(msg.value())))
    finally:
        consumer.close()
    return out


def _one_unit(tmp_path, condition: str, run_set: str):
    """A one-unit grid of the smoke pack on a fresh namespace: (home, dsn, settings, topics, unit, order)."""
    require_broker()
    home = tmp_path / "home"
    dsn = f"kafka://{SINGLE}/{namespace()}"
    settings = Settings(home=home, bus=dsn, warehouse=f"chdb://{tmp_path / 'warehouse'}")
    topics = topics_from_dsn(dsn)
    ensure_topics(topics)
    pack = open_pack("smoke", home)
    unit = plan_grid(pack, [condition], [1])[0]
    order = UnitOrder(run_set, "smoke", pack.digest, "scripted:memory-literal", "bwrap", 2000, unit.suite, unit.task,
                      unit.condition, unit.seed)
    return home, dsn, settings, topics, unit, order


def _close(runner: UnitRunner) -> None:
    runner._pool.shutdown(wait=True)
    for bus in runner._buses.values():
        bus.close()
    runner._consumer.close()
    runner._status.close()


@pytest.mark.parametrize("lost_after", ["started", "completed"])
def test_two_runners_deciding_on_one_record_run_the_attempt_once(tmp_path, lost_after):
    run_set = "rs-claims"
    home, dsn, settings, topics, unit, order = _one_unit(tmp_path, "B5", run_set)
    queue = KafkaBus(dsn, run_set, tmp_path / "spool-queue")
    queue.mark_unit(unit.unit_id, "queued", "", 0)  # as `run --enqueue` marks it
    queue.close()

    logs = {"A": [], "B": []}
    a = UnitRunner(settings, log=logs["A"].append)
    b = UnitRunner(settings, log=logs["B"].append)
    try:
        plan_a, plan_b = a._plan(order), b._plan(order)  # both read the queued record
        assert plan_a.base == plan_b.base is not None and plan_a.decision == plan_b.decision
        assert plan_a.decision.attempt == 1 and plan_a.claim != plan_b.claim
        run_b = b._prepare(order, plan_b)
        assert b._claim_attempt(order, plan_b, run_b)
        if lost_after == "completed":
            b._execute(order, plan_b, run_b)
        run_a = a._prepare(order, plan_a)
        assert run_a == run_b  # the same attempt, so the same run id: the window this closes
        assert not a._claim_attempt(order, plan_a, run_a)
        if lost_after == "started":
            b._execute(order, plan_b, run_b)
    finally:
        _close(a)
        _close(b)

    # A said it lost, to B, and counted it; B completed the unit
    assert (a.stats.lost_claims, a.stats.completed, b.stats.completed, b.stats.lost_claims) == (1, 0, 1, 0)
    lost = [line for line in logs["A"] if "lost claim" in line]
    assert len(lost) == 1 and f"lost claim {order.key} attempt 1 run {run_b} to {plan_b.claim}" in lost[0]
    # one execution in the log: every trajectory message is one of the run's seqs, none fenced
    head = read_run_head(topics, run_b)
    assert head.ended and head.status == "completed" and head.fenced == 0
    assert topic_size(SINGLE, topics.trajectory) == head.events
    # the unit counts once, as completed, for every reader: the claim-folding ones, and one that only
    # keeps the newest record (what compaction leaves)
    assert read_unit_status(topics, run_set)[unit.unit_id]["status"] == "completed"
    progress = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert progress == {run_set: {**grid_progress(settings, run_set)[run_set]}}
    assert {k: v for k, v in progress[run_set].items() if v} == {"units": 1, "completed": 1}
    records = _raw_records(topics, order.key)
    assert [r["claim"] for _, r in records if r["status"] == "started" and "restates" not in r] == \
        [plan_b.claim, plan_a.claim]
    newest = records[-1][1]
    assert newest["status"] == "completed" and newest["claim"] == plan_b.claim
    state = KeyStatus()
    for offset, record in records:
        state.add(offset, record)
    assert state.settled


def test_two_take_overs_of_one_open_attempt_close_it_and_run_the_next_attempt_once(tmp_path):
    """The window on a take-over: both runners read a dead runner's `started` attempt 1 (no event in
    the log), both record `abandoned` and close its run; B's `started` for attempt 2 lands first and
    wins, A's loses. Attempt 2 runs once; attempt 1 is one abandoned attempt."""
    run_set = "rs-claims-take-over"
    _, dsn, settings, topics, unit, order = _one_unit(tmp_path, "B0", run_set)
    dead = KafkaBus(dsn, run_set, tmp_path / "spool-dead")
    dead.mark_unit(unit.unit_id, "queued", "", 0)
    dead.mark_unit(unit.unit_id, "started", "run-of-the-dead-runner", 1, claim="runner-x/dead", base=None)
    dead.close()

    logs = {"A": [], "B": []}
    a = UnitRunner(settings, log=logs["A"].append)
    b = UnitRunner(settings, log=logs["B"].append)
    try:
        plan_a, plan_b = a._plan(order), b._plan(order)
        assert plan_a.decision == plan_b.decision and plan_a.decision.close == "run-of-the-dead-runner"
        run_a = a._prepare(order, plan_a)  # records abandoned, closes the dead attempt
        run_b = b._prepare(order, plan_b)  # records abandoned too; its close lands after A's and is dropped
        assert run_a == run_b
        assert b._claim_attempt(order, plan_b, run_b)
        assert not a._claim_attempt(order, plan_a, run_a)
        b._execute(order, plan_b, run_b)
    finally:
        _close(a)
        _close(b)

    assert (a.stats.lost_claims, b.stats.lost_claims, b.stats.completed) == (1, 0, 1)
    assert any(f"lost claim {order.key} attempt 2 run {run_b} to {plan_b.claim}" in line for line in logs["A"])
    head = read_run_head(topics, run_b)
    assert head.ended and head.status == "completed" and head.fenced == 0
    closed = read_run_head(topics, "run-of-the-dead-runner")
    assert (closed.status, closed.events, closed.fenced) == ("abandoned", 1, 1)  # two closes, one counts
    assert topic_size(SINGLE, topics.trajectory) == head.events + 2
    progress = grid_progress(settings, run_set)[run_set]
    assert (progress["units"], progress["completed"], progress["attempts_abandoned"]) == (1, 1, 1)
    assert read_unit_status(topics, run_set)[unit.unit_id] == {"status": "completed", "run_id": run_b, "attempt": 2,
                                                               "claim": plan_b.claim}


def test_bench_claims_measures_won_and_lost_claims(tmp_path):
    require_broker()
    proc = run_cli("bench", "claims", "--bus", f"kafka://{SINGLE}", "--units", "3", "--json", home=tmp_path / "home",
                   timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["units"], result["won"], result["lost"], result["settled"]) == (3, 3, 3, 3)
    assert all(figure["median_ms"] > 0 for figure in result["figures"].values()), result["figures"]
