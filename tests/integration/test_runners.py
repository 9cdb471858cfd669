"""Runners sharing a queued grid, against the real Kafka broker, real bubblewrap and real chDB: three
`membench runner` processes split a queued grid; one is killed with `kill -9` mid-unit; no unit is
completed twice, none is lost, the dead attempt is closed in the log, and the derived tables equal
the embedded path's."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from membench.pipeline.distributed.topic_reads import read_run_head
from membench.bus.topics import topics_from_dsn
from tests.conftest import run_cli
from tests.integration.conftest import SMOKE_GRID, copy_home
from tests.integration.kafka_helpers import (SINGLE, Worker, consumer_group_caught_up, membench, namespace,
                                             require_broker, topic_size, wait_for)
from tests.integration.sql_batch import sql_batch

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

# the shared smoke grid: 12 units of the smoke pack (3 sequences × B0, B5 × seeds 1, 2), whose
# embedded run (the session's `smoke_run_set`, copied into the test's home) is the reference
UNITS = 12
CLAIMED = re.compile(r"claimed (\S+) attempt (\d+) run (\S+)")
COMPLETED = re.compile(r"completed (\S+) attempt (\d+) run (\S+)")
# one row per unit: its completed run, without what identifies one execution (run and derived ids,
# event hashes, durations); an abandoned attempt is a run of its own, never a cell
RUN_SQL = ("SELECT * EXCEPT (derived_id, run_id, duration_ms, last_hash) FROM run_results WHERE run_set = '{rs}' "
           "AND status = 'completed' ORDER BY unit_id LIMIT 1 BY derived_id")
SESSION_SQL = ("SELECT * EXCEPT (derived_id, run_id, duration_ms) FROM session_results WHERE run_set = '{rs}' "
               "AND run_id IN (SELECT run_id FROM run_results WHERE status = 'completed') "
               "ORDER BY unit_id, session_index LIMIT 1 BY derived_id")


def _lines(path, pattern):
    return pattern.findall(path.read_text()) if path.exists() else []


def test_three_runners_split_a_grid_and_survive_a_kill9_mid_unit(tmp_path, smoke_run_set):
    require_broker()
    home = copy_home(smoke_run_set, tmp_path / "home")  # the embedded path, the reference
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    kafka_warehouse = f"chdb://{tmp_path / 'kafka-warehouse'}"
    queued = run_cli("run", *SMOKE_GRID, "--bus", dsn, "--enqueue", home=home, check=True)
    run_set = queued.stdout.strip().splitlines()[-1]
    assert run_set == smoke_run_set.run_set
    assert f"{UNITS} queued" in queued.stderr
    # enqueueing again adds nothing: every unit is queued already
    again = run_cli("run", *SMOKE_GRID, "--bus", dsn, "--enqueue", home=home, check=True)
    assert "0 queued" in again.stderr

    topics = topics_from_dsn(dsn)
    worker = Worker(dsn, home, tmp_path / "worker.log")
    logs = [tmp_path / f"runner{i}.log" for i in range(3)]
    handles = [open(log, "w") for log in logs]
    runners = [membench("runner", "--bus", dsn, "--until-idle", home=home, stdout=handle, stderr=handle)
               for handle in handles]
    try:
        # kill a runner whose unit (not its first: by then all three are in the group) has events on
        # the topic and no completion yet: mid-unit
        def mid_unit():
            for i, log in enumerate(logs):
                claimed, completed = _lines(log, CLAIMED), _lines(log, COMPLETED)
                if len(claimed) >= 2 and claimed[-1] not in completed:
                    head = read_run_head(topics, claimed[-1][2])
                    if head is not None and not head.ended:
                        return i, claimed[-1]
            return None

        victim = None
        deadline = time.monotonic() + 300
        while victim is None and time.monotonic() < deadline:
            victim = mid_unit()
            if victim is None:
                time.sleep(0.05)
        assert victim is not None, "no runner claimed a second unit"
        index, (unit_key, attempt, run_id) = victim
        os.killpg(runners[index].pid, signal.SIGKILL)
        runners[index].wait(30)
        killed_completed = _lines(logs[index], COMPLETED)
        assert (unit_key, attempt, run_id) not in killed_completed, "the unit completed before the kill"
        survivors = [r for i, r in enumerate(runners) if i != index]
        for survivor in survivors:
            assert survivor.wait(900) == 0, [log.read_text()[-3000:] for log in logs]
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
        for r in runners:
            if r.poll() is None:
                os.killpg(r.pid, signal.SIGKILL)
                r.wait(30)
        for handle in handles:
            handle.close()

    # the three runners split the grid: each claimed units
    claims = [_lines(log, CLAIMED) for log in logs]
    assert all(claims), [log.read_text()[-2000:] for log in logs]
    # the survivor that took the dead runner's partition closed its attempt and ran the next one
    texts = "".join(log.read_text() for log in logs)
    assert f"run {run_id} ({unit_key.split('/', 1)[1]}) closed at seq" in texts
    completions = [c for log in logs for c in _lines(log, COMPLETED)]
    assert sorted(unit for unit, _, _ in completions) == sorted({unit for unit, _, _ in completions})
    assert len(completions) == UNITS
    assert (unit_key, str(int(attempt) + 1)) in {(u, a) for u, a, _ in completions}

    sink = run_cli("sink", "--bus", dsn, "--warehouse", kafka_warehouse, "--until-idle", home=home, check=True)
    assert json.loads(sink.stdout.strip().splitlines()[-1])["raw"] == topic_size(SINGLE, f"{ns}.membench.trajectory")

    # every query on a warehouse in one subprocess (one interpreter start each, not one per query)
    tables = [template.format(rs=run_set) for template in (SESSION_SQL, RUN_SQL)]
    per_unit, ended, *distributed = sql_batch(home, [
        f"SELECT unit_id, countIf(status = 'completed'), countIf(status = 'abandoned') FROM "
        f"(SELECT * FROM run_results WHERE run_set = '{run_set}' LIMIT 1 BY derived_id) GROUP BY unit_id "
        f"ORDER BY unit_id",
        f"SELECT JSONExtractString(payload, 'status'), JSONExtractString(payload, 'error_type'), producer "
        f"FROM trajectory_events WHERE run_id = '{run_id}' AND kind = 'RunEnded' LIMIT 1 BY event_id",
        *tables], kafka_warehouse)
    # no unit completed twice, none lost
    rows = [line.split("\t") for line in per_unit.strip().splitlines()]
    assert len(rows) == UNITS and all(done == "1" for _, done, _ in rows), per_unit
    assert [unit for unit, _, abandoned in rows if abandoned != "0"] == [unit_key.split("/", 1)[1]]
    # the abandoned attempt is visible in the log: its own chain ends with RunEnded{abandoned}
    assert ended.strip().split("\t") == ["abandoned", "abandoned_attempt", "membench-attempts/0.1"]
    # the derived tables equal the embedded path's
    for embedded, kafka_table in zip(sql_batch(home, tables), distributed):
        assert embedded.strip() and embedded == kafka_table
    # every chain verifies from the topic, the closed attempt included
    replay = run_cli("replay", dsn, "--verify", "--warehouse", kafka_warehouse, home=home)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    progress = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert progress[run_set]["completed"] == UNITS and progress[run_set]["attempts_abandoned"] == 1


def test_a_runner_without_the_queued_pack_leaves_the_unit_to_others(tmp_path):
    """An order naming a pack digest this machine does not have: the runner says so in one line,
    exits 1, and the order stays uncommitted (another runner can take it); a malformed order is
    named by partition and offset and skipped."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from membench.bus.kafka import ensure_topics
    from membench.runner.unit_queue import UnitOrder

    require_broker()
    home = tmp_path / "home"
    home.mkdir()
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    topics = topics_from_dsn(dsn)
    ensure_topics(topics)
    order = UnitOrder("rs-elsewhere", "smoke", "0" * 64, "scripted:null", "bwrap", 2000, "smoke", "smoke-currency",
                      "B0", 1)
    producer = Producer({"bootstrap.servers": SINGLE})
    producer.produce(topics.units, b'{"version": 1, "seed": "x"}', b"rs-elsewhere/bad", partition=0)
    producer.produce(topics.units, order.to_json(), order.key.encode(), partition=0)
    assert producer.flush(30) == 0
    proc = run_cli("runner", "--bus", dsn, "--until-idle", "--idle-seconds", "1", home=home, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "partition 0 offset 0: unit order field 'run_set'" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"runner: unit {order.key}: pack 'smoke' here has digest") and "000000000000" in last
    consumer = Consumer({"bootstrap.servers": SINGLE, "group.id": topics.group("runner")})
    try:
        committed = consumer.committed([TopicPartition(topics.units, 0)], timeout=30)[0].offset
    finally:
        consumer.close()
    assert committed == 1  # the malformed order is done with; the unit's order is not


FENCED = re.compile(r"fenced (\S+) attempt (\d+) run ([^\s:]+)")


def test_a_stalled_runner_is_fenced_when_it_resumes_after_another_ran_its_unit(tmp_path):
    """Runner A is stopped (SIGSTOP) while it holds a unit mid-run, past the
    group's timeouts; runner B takes the unit over, closes A's attempt and runs attempt 2; A resumes
    (SIGCONT) and finishes its attempt. The unit is completed once in the derived tables, A's attempt
    ends with B's RunEnded{abandoned} in the log (A's own later events stay there, fenced), A records
    nothing, and the tables equal the embedded path's."""
    require_broker()
    home = tmp_path / "home"
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    kafka_warehouse = f"chdb://{tmp_path / 'kafka-warehouse'}"
    run_cli("run", "smoke", "--seeds", "1", home=home, check=True)  # 6 units: the embedded reference
    queued = run_cli("run", "smoke", "--seeds", "1", "--bus", dsn, "--enqueue", home=home, check=True)
    run_set = queued.stdout.strip().splitlines()[-1]
    topics = topics_from_dsn(dsn)
    worker = Worker(dsn, home, tmp_path / "worker.log")
    logs = {name: tmp_path / f"runner-{name}.log" for name in "AB"}
    handles = {name: open(log, "w") for name, log in logs.items()}
    # the rebalance B's join starts waits this long for the stopped A (its rebalance timeout), and a
    # runner finishing its running unit during a rebalance must do so within it: at 10 s a smoke unit
    # under CI's load outran it, B was put out of the group while finishing its own unit and the two
    # runners passed a second unit back and forth (stop 36); 30 s is three times that unit's time
    runner_args = ("runner", "--bus", dsn, "--until-idle", "--max-poll-interval", "30")
    procs = {"A": membench(*runner_args, home=home, stdout=handles["A"], stderr=handles["A"])}
    try:
        # stop A while a unit's run has events on the topic and no RunEnded (checked again once stopped)
        victim, deadline = None, time.monotonic() + 300
        while victim is None and time.monotonic() < deadline and procs["A"].poll() is None:
            claimed, completed = _lines(logs["A"], CLAIMED), _lines(logs["A"], COMPLETED)
            if claimed and claimed[-1] not in completed:
                head = read_run_head(topics, claimed[-1][2])
                if head is not None and not head.ended:
                    os.killpg(procs["A"].pid, signal.SIGSTOP)
                    head = read_run_head(topics, claimed[-1][2])
                    if head.ended:
                        os.killpg(procs["A"].pid, signal.SIGCONT)
                    else:
                        victim = claimed[-1]
                        continue
            time.sleep(0.05)
        assert victim is not None, logs["A"].read_text()[-3000:]
        unit_key, attempt, run_id = victim
        procs["B"] = membench(*runner_args, home=home, stdout=handles["B"], stderr=handles["B"])
        # B receives A's partitions after A's session timeout, closes attempt 1 and completes attempt 2
        wait_for(lambda: any(unit == unit_key and a == str(int(attempt) + 1) for unit, a, _ in
                             _lines(logs["B"], COMPLETED)), 300, "runner B to complete the stalled unit")
        os.killpg(procs["A"].pid, signal.SIGCONT)
        for name, proc in procs.items():
            assert proc.wait(600) == 0, {n: log.read_text()[-3000:] for n, log in logs.items()}
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        for handle in handles.values():
            handle.close()

    a_text, b_text = logs["A"].read_text(), logs["B"].read_text()
    # A finished its attempt late and was fenced: it said so and recorded nothing
    assert (unit_key, attempt, run_id) in _lines(logs["A"], FENCED), a_text[-3000:]
    assert json.loads(a_text.strip().splitlines()[-1])["fenced"] == 1
    assert f"run {run_id} ({unit_key.split('/', 1)[1]}) closed at seq" in b_text
    completions = _lines(logs["A"], COMPLETED) + _lines(logs["B"], COMPLETED)
    assert len(completions) == 6 and len({unit for unit, _, _ in completions}) == 6

    run_cli("sink", "--bus", dsn, "--warehouse", kafka_warehouse, "--until-idle", home=home, check=True)

    tables = [template.format(rs=run_set) for template in (SESSION_SQL, RUN_SQL)]
    status_sql = f"SELECT status FROM run_results WHERE run_id = '{run_id}' LIMIT 1 BY derived_id"
    # every query on a warehouse in one subprocess (one interpreter start each, not one per query);
    # the embedded tables are read once: only the Kafka warehouse is re-derived below
    per_unit, status, ends, *distributed = sql_batch(home, [
        f"SELECT unit_id, countIf(status = 'completed'), countIf(status = 'abandoned') FROM "
        f"(SELECT * FROM run_results WHERE run_set = '{run_set}' LIMIT 1 BY derived_id) GROUP BY unit_id "
        f"ORDER BY unit_id",
        status_sql,
        f"SELECT producer, JSONExtractString(payload, 'status') FROM trajectory_events WHERE run_id = "
        f"'{run_id}' AND kind = 'RunEnded' LIMIT 1 BY event_id",
        *tables], kafka_warehouse)
    embedded_tables = sql_batch(home, tables)
    rows = [line.split("\t") for line in per_unit.strip().splitlines()]
    assert len(rows) == 6 and all(done == "1" for _, done, _ in rows), per_unit
    assert [unit for unit, _, abandoned in rows if abandoned != "0"] == [unit_key.split("/", 1)[1]]
    assert status.split() == ["abandoned"]
    # in the log: B's close, then A's own RunEnded published after it (fenced: it derived nothing)
    producers_ = sorted(line.split("\t")[0] for line in ends.strip().splitlines())
    assert len(producers_) == 2 and "membench-attempts/0.1" in producers_, ends
    for embedded, kafka_table in zip(embedded_tables, distributed):
        assert embedded.strip() and embedded == kafka_table
    progress = json.loads(run_cli("runner", "--bus", dsn, "--progress", "--json", home=home, check=True).stdout)
    assert progress[run_set]["completed"] == 6 and progress[run_set]["attempts_abandoned"] == 1
    # the audit reads the run by the same rule: A's late events are fenced (listed, not a break), the
    # re-derived tables match, and the root is the one the warehouse's summaries give
    replay = run_cli("replay", dsn, "--verify", "--warehouse", kafka_warehouse, "--json", home=home)
    assert replay.returncode == 0, replay.stdout[-3000:] + replay.stderr[-3000:]
    audited = json.loads(replay.stdout)
    summary = next(s for s in audited["run_sets"] if s["run_set"] == run_set)
    fenced = [f for f in summary["fenced"] if f["run_id"] == run_id]
    assert fenced and fenced[-1]["kind"] == "RunEnded", summary["fenced"]
    # re-deriving from the warehouse's raw rows keeps the verdict: they are read in partition order,
    # so the close still comes before the stalled attempt's events at the same seqs
    run_cli("rederive", run_set, "--warehouse", kafka_warehouse, home=home, check=True)
    status, *rederived = sql_batch(home, [f"SELECT status FROM run_results WHERE run_id = '{run_id}'", *tables],
                                   kafka_warehouse)
    assert status.split() == ["abandoned"]
    assert rederived == embedded_tables
    from_table = run_cli("replay", f"warehouse:{run_set}", "--warehouse", kafka_warehouse, "--json", home=home)
    assert from_table.returncode == 0, from_table.stdout[-3000:] + from_table.stderr[-3000:]
