"""On the three-broker cluster (replication factor 3, min.insync.replicas 2),
stopping one broker while runners produce loses no event and duplicates none in the warehouse;
an outage that leaves no writable replica set delays events (the spool) instead of losing them."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer

from membench.bus.kafka import KafkaBus
from membench.bus.emitter import RunEmitter
from membench.schemas.codec import decode
from membench.schemas.events import bounded_text
from tests.conftest import REPO, run_cli, skip_or_fail
from tests.integration.kafka_helpers import (CLUSTER, Worker, consumer_group_caught_up, membench, namespace,
                                             reachable, topic_size, wait_for)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

CLUSTER_SH = REPO / "deploy" / "kafka" / "cluster.sh"
BROKERS = CLUSTER.split(",")


@pytest.fixture(scope="module")
def cluster():
    if shutil.which("java") is None:
        skip_or_fail("java is needed for the Kafka cluster")
    started = not all(reachable(b) for b in BROKERS)
    if started:
        subprocess.run(["bash", str(CLUSTER_SH), "start"], check=True, timeout=600, capture_output=True)
    yield CLUSTER
    for n in ("2", "3"):
        subprocess.run(["bash", str(CLUSTER_SH), "start-broker", n], timeout=300, capture_output=True)
    if started:
        subprocess.run(["bash", str(CLUSTER_SH), "stop"], timeout=600, capture_output=True)


def test_losing_a_broker_mid_run_loses_and_duplicates_nothing(cluster, home, tmp_path):
    ns = namespace()
    dsn = f"kafka://{cluster}/{ns}?replication=3&min_insync=2"
    trajectory = f"{ns}.membench.trajectory"
    runner = membench("run", "smoke", "--seeds", "1,2,3,4", "--bus", dsn, home=home)
    try:
        wait_for(lambda: topic_size(cluster, trajectory) > 20, 180, "the runner to produce")
        subprocess.run(["bash", str(CLUSTER_SH), "stop-broker", "2"], check=True, timeout=300, capture_output=True)
        assert not reachable(BROKERS[1])
        at_stop = topic_size(cluster, trajectory)
        # runners keep producing with 2 of 3 replicas in sync (acks=all, min.insync.replicas=2)
        wait_for(lambda: runner.poll() is not None or topic_size(cluster, trajectory) > at_stop + 100, 180,
                 "events produced while a broker is down")
        assert topic_size(cluster, trajectory) > at_stop
        subprocess.run(["bash", str(CLUSTER_SH), "start-broker", "2"], check=True, timeout=300, capture_output=True)
        _, err = runner.communicate(timeout=900)
        assert runner.returncode == 0, err
    finally:
        if runner.poll() is None:
            runner.kill()
    worker = Worker(dsn, home, tmp_path / "worker.log")
    try:
        wait_for(lambda: consumer_group_caught_up(cluster, f"{ns}.membench.processor", trajectory), 240,
                 "the worker to process the trajectory topic")
    finally:
        worker.stop()
    warehouse = f"chdb://{tmp_path / 'wh'}"
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=home, check=True)
    count, unique, runs = run_cli("sql", "SELECT count(), uniqExact(event_id), uniqExact(run_id) FROM trajectory_events",
                                  "--warehouse", warehouse, home=home, check=True).stdout.split()
    assert int(count) == int(unique) == topic_size(cluster, trajectory)
    assert int(runs) == 24
    # every run's chain is complete (no gap in seq, every run ended) and the derived tables agree
    proc = run_cli("replay", dsn, "--verify", "--warehouse", warehouse, home=home)
    assert proc.returncode == 0, proc.stderr


def _read_all(bootstrap: str, topic: str, expected: int, timeout: float = 120.0) -> list[dict]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"outage-check-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < expected and time.monotonic() < deadline:
            records += [decode(m.value())[1] for m in consumer.consume(500, 1.0) if not m.error()]
        records += [decode(m.value())[1] for m in consumer.consume(500, 3.0) if not m.error()]  # any extra
    finally:
        consumer.close()
    return records


def test_an_outage_spools_events_and_the_next_flush_delivers_each_once(cluster, tmp_path):
    ns = namespace()
    dsn = f"kafka://{cluster}/{ns}?replication=3&min_insync=2"
    bus = KafkaBus(dsn, "outage", tmp_path / "spool", message_timeout_ms=4000)
    emitter = RunEmitter("outage", str(uuid.uuid4()), "outage/t/B0/1", bus.publish)
    for i in range(20):
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(f"turn {i}"), "input_tokens": i})
    bus.flush(timeout=120)
    for n in ("2", "3"):  # two of three down: no in-sync pair for acks=all, and no controller quorum
        subprocess.run(["bash", str(CLUSTER_SH), "stop-broker", n], check=True, timeout=300, capture_output=True)
    for i in range(20, 50):
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(f"turn {i}"), "input_tokens": i})
    wait_for(lambda: bus.poll(0.5) or bus.spooled == 30, 60, "the undeliverable events to reach the spool")
    assert (tmp_path / "spool" / "undelivered.bin").stat().st_size > 0  # on disk, not only in memory
    for n in ("3", "2"):
        subprocess.run(["bash", str(CLUSTER_SH), "start-broker", n], check=True, timeout=300, capture_output=True)
    bus.flush(timeout=300)  # re-sends the spool
    assert bus.spooled == 0
    records = _read_all(cluster, f"{ns}.membench.trajectory", 50)
    assert sorted(r["seq"] for r in records) == list(range(50))  # nothing lost, nothing twice
    assert {r["run_id"] for r in records} == {emitter.run_id}
