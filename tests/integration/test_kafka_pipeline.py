"""The Kafka pipeline against the real Apache Kafka broker started by deploy/kafka/start.sh:
equality with the embedded path, crash recovery, poison messages, interoperability — for each
processor engine (`membench process --engine kafka|faust`) where the engine is what is
under test: the derived tables (by two workers sharing the partitions), dead letters and kill -9
recovery run on both engines (`engine_run`); what only the runner, the topics, the sink and replay
do runs once (`kafka_run`, the kafka engine).

The embedded path, the reference, is the session's shared smoke run set (`smoke_run_set`: the same
pack, agent and grid), copied into each pipeline's home, so the published run has the same run set
and run ids without the grid being run embedded again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import fastavro
import io
import json
import pytest

from tests.conftest import run_cli
from tests.integration.conftest import SMOKE_GRID, copy_home
from tests.integration.kafka_helpers import (CONSOLE_CONSUMER, ENGINES, SINGLE, Worker, consumer_group_caught_up,
                                             membench, namespace, require_broker, topic_size, wait_for)
from tests.integration.sql_batch import sql_batch

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

SESSION_SQL = ("SELECT * EXCEPT (duration_ms) FROM session_results WHERE run_set = '{rs}' "
               "ORDER BY run_id, session_index LIMIT 1 BY derived_id")
# last_hash and durations identify one execution (event ids, timestamps), not its outcome
RUN_SQL = ("SELECT * EXCEPT (duration_ms, last_hash) FROM run_results WHERE run_set = '{rs}' "
           "ORDER BY run_id LIMIT 1 BY derived_id")


def _wait_worker(ns: str, timeout: float = 180) -> None:
    wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
             timeout, "the processor worker to commit the whole trajectory topic")


def _pipeline_run(engine: str, tmp_path_factory, smoke_run_set) -> dict:
    """The smoke grid on both paths: embedded (a copy of the session's shared run set), and Kafka →
    two workers (of the engine under test) → sink into a second warehouse. The second worker joins
    while the first processes the run, so the group splits the partitions mid-run. Same finalized
    pack and grid, so the same run set and run ids."""
    require_broker()
    root = tmp_path_factory.mktemp(f"kafka-{engine}")
    home = copy_home(smoke_run_set, root / "home")
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    other = f"chdb://{root / 'kafka-warehouse'}"
    group = f"{ns}.membench.processor"
    workers = [Worker(dsn, home, root / "worker1.log", engine)]
    runner = None
    try:
        runner = membench("run", *SMOKE_GRID, "--bus", dsn, home=home)
        wait_for(lambda: topic_size(SINGLE, f"{ns}.membench.trajectory") > 50, 120, "events to flow")
        workers.append(Worker(dsn, home, root / "worker2.log", engine))
        out, err = runner.communicate(timeout=600)
        assert runner.returncode == 0, err
        run_set = out.strip().splitlines()[-1]
        # two members, each owning partitions: a member that has just joined holds none until the
        # group's rebalance completes, which a short run can end before
        wait_for(lambda: (lambda found: len(found) == 2 and all(found.values()))(_group_assignment(group)), 120,
                 "both workers to own partitions of the group")
        _wait_worker(ns)
        assignment = _group_assignment(group)
    finally:
        if runner is not None and runner.poll() is None:  # a failed wait: the run must not outlive the test
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(30)
        for worker in workers:
            worker.stop()
    sink = run_cli("sink", "--bus", dsn, "--warehouse", other, "--until-idle", home=home, check=True)
    return {"home": home, "ns": ns, "dsn": dsn, "warehouse": other, "run_set": run_set,
            "shared_run_set": smoke_run_set.run_set, "assignment": assignment,
            "sink": json.loads(sink.stdout.strip().splitlines()[-1]), "root": root, "engine": engine}


@pytest.fixture(scope="module")
def kafka_run(tmp_path_factory, smoke_run_set):
    """The pipeline with the kafka engine, for the tests whose subject does not depend on the engine."""
    return _pipeline_run("kafka", tmp_path_factory, smoke_run_set)


@pytest.fixture(scope="module", params=ENGINES)
def engine_run(request, tmp_path_factory, smoke_run_set):
    """The pipeline with each processor engine (the kafka one is `kafka_run` itself, built once)."""
    if request.param == "kafka":
        return request.getfixturevalue("kafka_run")
    return _pipeline_run(request.param, tmp_path_factory, smoke_run_set)


def _sql(run, query, warehouse=None):
    return sql_batch(run["home"], [query], warehouse)[0]


def _tables(run, warehouse=None) -> list[str]:
    """The run set's session and run tables (SESSION_SQL, RUN_SQL) from WAREHOUSE, in one
    subprocess; the embedded path's (WAREHOUSE None) read once per pipeline run and kept: the
    embedded run is the fixture's, and nothing later writes that run set into the embedded warehouse
    (the later runs of these tests publish to Kafka)."""
    queries = [template.format(rs=run["run_set"]) for template in (SESSION_SQL, RUN_SQL)]
    if warehouse is not None:
        return sql_batch(run["home"], queries, warehouse)
    if "embedded_tables" not in run:
        run["embedded_tables"] = sql_batch(run["home"], queries)
    return run["embedded_tables"]


def test_kafka_path_derives_the_same_tables_as_the_embedded_path(engine_run):
    """Two workers of one consumer group derived the published run (the second joined mid-run): the
    group split the partitions, each worker owned some, and the tables equal the embedded path's."""
    rs = engine_run["run_set"]
    assert rs == engine_run["shared_run_set"]  # the same run set as the embedded reference
    assignment = engine_run["assignment"]
    assert sorted(p for parts in assignment.values() for p in parts) == [0, 1, 2, 3]
    assert len(assignment) == 2 and all(assignment.values()), assignment  # each worker owns partitions
    for embedded, distributed in zip(_tables(engine_run), _tables(engine_run, engine_run["warehouse"])):
        assert embedded.strip() and embedded == distributed
    report = run_cli("report", rs, "--json", "--warehouse", engine_run["warehouse"], home=engine_run["home"],
                     check=True)
    conditions = {c["condition"]: c["passed"] for c in json.loads(report.stdout)["conditions"]}
    assert conditions == {"B0": 0, "B5": 6}


def test_every_raw_event_lands_once(kafka_run):
    topic_events = topic_size(SINGLE, f"{kafka_run['ns']}.membench.trajectory")
    count, unique = _sql(kafka_run, "SELECT count(), uniqExact(event_id) FROM trajectory_events",
                         kafka_run["warehouse"]).split()
    assert int(count) == int(unique) == topic_events == kafka_run["sink"]["raw"]


def test_replay_from_the_topic_verifies_against_the_warehouse(kafka_run):
    proc = run_cli("replay", kafka_run["dsn"], "--verify", "--warehouse", kafka_run["warehouse"],
                   home=kafka_run["home"])
    assert proc.returncode == 0, proc.stderr
    assert "all derived events agree" in proc.stdout


def _unescape(text: str) -> bytes:
    """Kafka's Bytes.toString escapes non-printable bytes (and backslash) as \\xHH."""
    out = bytearray()
    for escaped, char in re.findall(r"\\x([0-9A-Fa-f]{2})|(.)", text, flags=re.S):
        out += bytes([int(escaped, 16)]) if escaped else char.encode("latin-1")
    return bytes(out)


def test_kafkas_own_console_consumer_reads_decodable_events(kafka_run):
    ns = kafka_run["ns"]
    common = ["--bootstrap-server", SINGLE, "--from-beginning", "--timeout-ms", "20000",
              "--property", "print.key=true", "--property", "key.separator=|"]
    schemas_out = subprocess.run(["bash", str(CONSOLE_CONSUMER), "--topic", f"{ns}.membench.schemas", *common],
                                 capture_output=True, text=True, timeout=120)
    schemas = {}
    for line in schemas_out.stdout.splitlines():
        key, _, value = line.partition("|")
        if value.startswith("{"):
            schemas[key] = json.loads(value)
    assert schemas, schemas_out.stderr[-2000:]
    proc = subprocess.run(
        ["bash", str(CONSOLE_CONSUMER), "--topic", f"{ns}.membench.trajectory", "--max-messages", "50", *common,
         "--property", "value.deserializer=org.apache.kafka.common.serialization.BytesDeserializer"],
        capture_output=True, text=True, timeout=120)
    lines = [l for l in proc.stdout.splitlines() if "|" in l]
    assert len(lines) == 50, proc.stderr[-2000:]
    for line in lines:
        key, _, value = line.partition("|")
        message = _unescape(value)
        assert message[:2] == b"\xc3\x01"
        schema = fastavro.parse_schema(schemas[message[2:10].hex()])
        record = fastavro.schemaless_reader(io.BytesIO(message[10:]), schema, None)
        assert record["run_id"] == key and record["run_set"] == kafka_run["run_set"]


def test_garbage_and_schema_violations_go_to_the_dead_letter_topic(engine_run, tmp_path):
    from confluent_kafka import Consumer, Producer

    from membench.schemas.registry import default_registry

    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    home = engine_run["home"]
    fingerprint = default_registry().latest("event").fingerprint
    # the topics exist once a run has published; publish one unit first, then poison, then more. The
    # runs' outcomes are not the subject (only that both are processed): `scripted:null` changes no
    # file, so nothing is scored and each run costs the bus's work alone
    run_cli("run", "smoke", "--seeds", "7", "--conditions", "B5", "--agent", "scripted:null", "--bus", dsn,
            home=home, check=True)
    producer = Producer({"bootstrap.servers": SINGLE})
    producer.produce(f"{ns}.membench.trajectory", b"this is not avro", b"poison-1")
    producer.produce(f"{ns}.membench.trajectory", b"\xc3\x01" + fingerprint + b"\x02\x04\xff\xff", b"poison-2")
    producer.flush(30)
    run_cli("run", "smoke", "--seeds", "8", "--conditions", "B5", "--agent", "scripted:null", "--bus", dsn,
            home=home, check=True)
    worker = Worker(dsn, home, tmp_path / "worker.log", engine_run["engine"])
    try:
        _wait_worker(ns)
    finally:
        worker.stop()
    consumer = Consumer({"bootstrap.servers": SINGLE, "group.id": f"{ns}-dlq-reader", "auto.offset.reset": "earliest"})
    consumer.subscribe([f"{ns}.membench.deadletter"])
    letters, deadline = [], time.monotonic() + 60
    while len(letters) < 2 and time.monotonic() < deadline:
        letters += [m for m in consumer.consume(10, 1.0) if not m.error()]
    consumer.close()
    reasons = {m.key(): dict(m.headers())["reason"].decode() for m in letters}
    assert set(reasons) == {b"poison-1", b"poison-2"}
    assert "undecodable" in reasons[b"poison-1"] and "undecodable" in reasons[b"poison-2"]
    warehouse = f"chdb://{tmp_path / 'wh'}"
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=home, check=True)
    rows = run_cli("sql", "SELECT seed, count() FROM run_results GROUP BY seed ORDER BY seed", "--warehouse",
                   warehouse, home=home, check=True).stdout
    assert rows == "7\t3\n8\t3\n"  # the runs before and after the poison were both processed


def test_kill9_of_worker_and_sink_mid_run_loses_and_duplicates_nothing(engine_run, tmp_path):
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    home = engine_run["home"]
    warehouse = f"chdb://{tmp_path / 'wh'}"
    worker = Worker(dsn, home, tmp_path / "worker1.log", engine_run["engine"])
    sink_log = open(tmp_path / "sink1.log", "w")
    # 18 units; the crash comes once about two units' events are on the topic (a smoke unit publishes
    # 30-40) and the worker has derived from them, so most of the grid is still to run when the worker
    # and the sink die (a smoke unit scores in well under a second now: no fixed wait is short enough)
    runner = membench("run", "smoke", "--seeds", "11,12,13", "--bus", dsn, home=home)
    sink = None
    try:
        wait_for(lambda: _topic_exists(ns), 60, "the runner to create its topics")
        sink = membench("sink", "--bus", dsn, "--warehouse", warehouse, home=home, stdout=sink_log,
                        stderr=subprocess.STDOUT)
        wait_for(lambda: topic_size(SINGLE, f"{ns}.membench.trajectory") > 60, 120, "events to flow")
        wait_for(lambda: topic_size(SINGLE, f"{ns}.membench.derived") > 0, 60, "the worker to derive")
        worker.kill9()
        os.killpg(sink.pid, signal.SIGKILL)
        sink.wait(30)
        assert runner.poll() is None, "the runner finished before the crash; the test needs a longer grid"
        worker = Worker(dsn, home, tmp_path / "worker2.log", engine_run["engine"])
        out, err = runner.communicate(timeout=600)
        assert runner.returncode == 0, err
        _wait_worker(ns)
    finally:
        worker.stop()
        sink_log.close()
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=home, check=True)
    count, unique, runs = run_cli("sql", "SELECT count(), uniqExact(event_id), uniqExact(run_id) FROM "
                                  "trajectory_events", "--warehouse", warehouse, home=home, check=True).stdout.split()
    assert int(count) == int(unique) == topic_size(SINGLE, f"{ns}.membench.trajectory")
    assert int(runs) == 18
    proc = run_cli("replay", dsn, "--verify", "--warehouse", warehouse, home=home)
    assert proc.returncode == 0, proc.stderr


def _topic_exists(ns: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return f"{ns}.membench.trajectory" in AdminClient({"bootstrap.servers": SINGLE}).list_topics(timeout=10).topics


def test_several_runner_processes_share_one_bus(kafka_run, tmp_path):
    """Two `membench run` processes publish at once (different run sets); one worker and one sink
    serve both, and each run set's report is complete. The agent is `scripted:null` (nothing to
    score): what is under test is two producers on one bus, not the units' outcomes."""
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    home = kafka_run["home"]
    runners = [membench("run", "smoke", "--seeds", seeds, "--agent", "scripted:null", "--bus", dsn, home=home)
               for seeds in ("21", "22")]
    outputs = [runner.communicate(timeout=600) for runner in runners]
    assert [r.returncode for r in runners] == [0, 0], [err for _, err in outputs]
    run_sets = [out.strip().splitlines()[-1] for out, _ in outputs]
    assert len(set(run_sets)) == 2
    worker = Worker(dsn, home, tmp_path / "worker.log", kafka_run["engine"])
    try:
        _wait_worker(ns)
    finally:
        worker.stop()
    warehouse = f"chdb://{tmp_path / 'wh'}"
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=home, check=True)
    for run_set, cells in zip(run_sets, (6, 6)):
        report = json.loads(run_cli("report", run_set, "--json", "--warehouse", warehouse, home=home,
                                    check=True).stdout)
        assert sum(c["cells"] for c in report["conditions"]) == cells
    count, unique = run_cli("sql", "SELECT count(), uniqExact(event_id) FROM trajectory_events", "--warehouse",
                            warehouse, home=home, check=True).stdout.split()
    assert int(count) == int(unique) == topic_size(SINGLE, f"{ns}.membench.trajectory")


def _group_assignment(group: str) -> dict[str, list[int]]:
    """member id -> partitions assigned to it, as the broker's group coordinator reports them
    ({} while the group rebalances and the coordinator does not answer in time)."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": SINGLE})
    try:
        description = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=30)
    except (KafkaException, FutureTimeout):
        return {}
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in description.members}
