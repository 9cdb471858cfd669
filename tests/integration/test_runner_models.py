"""Model agents and memory libraries on Kafka runners, against the real broker, real bubblewrap,
real chDB, real Mem0 (embedded Qdrant) and real LangMem; the model is `ScriptedUpstream`
(membench/bench/scripted_model_server.py), a local scripted server standing in for the provider (no model API
is reachable here), which requires the key.

Each machine is a MEMBENCH_HOME of its own: the enqueuing one (processor worker, sink, report,
replay), the embedded reference, two runners and the replaying runner. Two runners, not three: each
unit here is an agent's and a library's model calls in a sandbox, and two are enough for a kill.
The grid: one trap of the smoke pack × B0, B5-MEM0-LIT, B5-LANGMEM × seeds 1, 2, under the built-in
`openai:` agent, recorded. The runners host the gateway with the key of their own environment (it
is on no topic), check each library's admission against their own conformance records, and one is
killed with `kill -9` mid-unit. Then: every unit completed exactly once; the derived tables
(verdicts, resources incl. tokens and cost, memory reads) and each completed run's model calls and
memory events equal the same grid run embedded; the grid replayed on a runner that holds none of the
recording (`--model-replay`, the upstream stopped) gives the same verdicts from the blobs topic; and
`replay --verify` of the topic, from a home without the blobs, exits 0. The real Codex CLI runs one
unit on a runner too (skipped where it is not installed, MEMBENCH_AGENTS_PREFIX)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.pipeline.distributed.topic_reads import read_run_head
from membench.bus.topics import topics_from_dsn
from tests.conftest import REPO, run_cli
from tests.integration.kafka_helpers import (SINGLE, Worker, consumer_group_caught_up, membench, namespace,
                                             require_broker, wait_for)
from tests.integration.sql_batch import sql_batch
from tests.packs.hygiene_helpers import subset_pack

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.usefixtures("bwrap_sandbox")]

KEY = "sk-membench-runner-7c41d2e09b"
MODEL = "gpt-5-mini"
CONDITIONS = "B0,B5-MEM0-LIT,B5-LANGMEM"
UNITS = 6
CLAIMED = re.compile(r"claimed (\S+) attempt (\d+) run (\S+)")
COMPLETED = re.compile(r"completed (\S+) attempt (\d+) run (\S+)")
COMPLETED_RUNS = "SELECT run_id FROM run_results WHERE run_set = '{rs}' AND status = 'completed'"
# without what names one execution (run and derived ids, event hashes, durations)
TABLES = (
    "SELECT * EXCEPT (derived_id, run_id, duration_ms, last_hash) FROM run_results WHERE run_set = '{rs}' "
    "AND status = 'completed' ORDER BY unit_id LIMIT 1 BY derived_id",
    "SELECT * EXCEPT (derived_id, run_id, duration_ms) FROM session_results WHERE run_set = '{rs}' "
    f"AND run_id IN ({COMPLETED_RUNS}) ORDER BY unit_id, session_index LIMIT 1 BY derived_id",
    # each completed run's model calls (counted once) and memory events, by kind and purpose
    "SELECT unit_id, kind, JSONExtractString(payload, 'purpose'), JSONExtractString(payload, 'status'), count() "
    "FROM (SELECT * FROM trajectory_events WHERE run_set = '{rs}' AND kind IN ('ModelCall', 'MemoryWrite', "
    f"'MemoryRead') AND run_id IN ({COMPLETED_RUNS}) LIMIT 1 BY event_id) GROUP BY ALL ORDER BY ALL",
)
VERDICTS = ("SELECT unit_id, session_index, outcome FROM session_results WHERE run_set = '{rs}' AND run_id IN "
            f"({COMPLETED_RUNS}) ORDER BY unit_id, session_index LIMIT 1 BY derived_id")


def _grid(pack: Path, run_set: str, *more: str) -> list[str]:
    return ["run", str(pack), "--agent", "openai:local-model", "--conditions", CONDITIONS, "--seeds", "1,2",
            "--memory-model", MODEL, "--run-set", run_set, *more]


def _lines(path: Path, pattern) -> list:
    return pattern.findall(path.read_text()) if path.exists() else []


def _topic_values(dsn: str, topic: str) -> list[bytes]:
    from membench.bus.kafka_read import open_reader, read_to_end

    consumer = open_reader(topics_from_dsn(dsn), "test-scan")
    try:
        return [msg.value() or b"" for msg, _ in read_to_end(consumer, topic)]
    finally:
        consumer.close()


def test_model_agents_and_libraries_run_on_runners_survive_a_kill9_and_replay(tmp_path):
    require_broker()
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    topics = topics_from_dsn(dsn)
    warehouse = f"chdb://{tmp_path / 'kafka-warehouse'}"
    base = tmp_path / "base"  # the enqueuing machine: also the processors, the sink and the audit
    base.mkdir()
    pack = subset_pack(REPO / "fixtures" / "smoke", tmp_path / "smoke", ["smoke-client-header"], name="smoke")
    keyed = {"MEMBENCH_MODEL_API_KEY": KEY}
    worker = Worker(dsn, base, tmp_path / "worker.log")
    runners, handles = [], []
    try:
        with ScriptedUpstream(script_from_pack(pack), key=KEY) as upstream:
            for condition in ("B5-MEM0-LIT", "B5-LANGMEM"):  # admitted on the enqueuing machine
                run_cli("memory", "check", condition, "--memory-model", MODEL, "--model-base-url", upstream.base_url,
                        home=base, env=keyed, check=True)
            queued = run_cli(*_grid(pack, "grid", "--model-base-url", upstream.base_url, "--model-record",
                                    "--bus", dsn, "--enqueue"), home=base)  # no key here: none is needed
            assert queued.returncode == 0 and f"{UNITS} queued" in queued.stderr, queued.stderr[-3000:]
            # each machine holds the finalized pack and the conformance records (copies of the enqueuer's)
            homes = {name: shutil.copytree(base, tmp_path / name, ignore=shutil.ignore_patterns("runs"))
                     for name in ("embedded", "runner0", "runner1", "replayer")}
            embedded = run_cli(*_grid(pack, "grid", "--model-base-url", upstream.base_url, "--model-record",
                                      "--workers", "2"), home=homes["embedded"], env=keyed)
            assert embedded.returncode == 0, embedded.stderr[-3000:]
            logs = [tmp_path / f"runner{i}.log" for i in range(2)]
            handles = [open(log, "w") for log in logs]
            runners = [membench("runner", "--bus", dsn, "--until-idle", home=homes[f"runner{i}"],
                                stdout=handles[i], stderr=handles[i], env=keyed)
                       for i in range(2)]

            def mid_unit():  # a runner's second unit (both are in the group by then), started, not ended
                for i, log in enumerate(logs):
                    claimed, completed = _lines(log, CLAIMED), _lines(log, COMPLETED)
                    if len(claimed) >= 2 and claimed[-1] not in completed:
                        head = read_run_head(topics, claimed[-1][2])
                        if head is not None and not head.ended:
                            return i, claimed[-1]
                return None

            victim, deadline = None, time.monotonic() + 600
            while victim is None and time.monotonic() < deadline:
                victim = mid_unit()
                if victim is None:
                    time.sleep(0.05)
            assert victim is not None, [log.read_text()[-2000:] for log in logs]
            index, (unit_key, attempt, run_id) = victim
            os.killpg(runners[index].pid, signal.SIGKILL)
            runners[index].wait(30)
            assert (unit_key, attempt, run_id) not in _lines(logs[index], COMPLETED), "completed before the kill"
            survivor = runners[1 - index]
            assert survivor.wait(900) == 0, [log.read_text()[-3000:] for log in logs]
            for line in ("pre-flight", "gateway for run set grid"):
                assert line in logs[1 - index].read_text()
            upstream_requests = len(upstream.requests)
        # the upstream is gone: the replay reaches none
        completions = [c for log in logs for c in _lines(log, COMPLETED)]
        assert sorted(u for u, _, _ in completions) == sorted({u for u, _, _ in completions})  # none twice
        assert len(completions) == UNITS and (unit_key, str(int(attempt) + 1)) in {(u, a) for u, a, _ in completions}
        # the key reached the upstream from the runners' environment, and is on no topic
        assert upstream_requests > 0
        for topic in (topics.units, topics.trajectory, topics.blobs, topics.unit_status):
            assert not [v for v in _topic_values(dsn, topic) if KEY.encode() in v], topic

        # each runner kept its library stores in a directory of its own (a store is locked to one process)
        # (which runner claims which unit is the group's choice: only one that ran a Mem0 unit has a store)
        ran_mem0 = [any("/B5-MEM0-LIT/" in unit for unit, _, _ in _lines(logs[i], CLAIMED)) for i in range(2)]
        assert any(ran_mem0)
        for i in range(2):
            stores = list((homes[f"runner{i}"] / "runs" / "grid" / "memory").glob("*/B5-MEM0-LIT/qdrant"))
            if ran_mem0[i]:
                assert len(stores) == 1 and stores[0].parent.parent.name.endswith(f"-{runners[i].pid}"), stores
            else:
                assert stores == [], stores
        assert not (homes["replayer"] / "runs").exists()  # the replaying machine holds nothing of the recording
        unknown = run_cli(*_grid(pack, "grid-replay", "--model-replay", "nothing", "--bus", dsn, "--enqueue"),
                          home=base)  # refused where it is queued, not by every runner in turn
        assert unknown.returncode == 2 and "no completed unit of run set 'nothing'" in unknown.stderr, unknown.stderr
        replayed = run_cli(*_grid(pack, "grid-replay", "--model-replay", "grid", "--bus", dsn, "--enqueue"),
                           home=base)
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        handles.append(open(tmp_path / "replayer.log", "w"))
        replayer = membench("runner", "--bus", dsn, "--until-idle", home=homes["replayer"], stdout=handles[-1],
                            stderr=handles[-1])  # no key, and none of the recording's blobs on its machine
        runners.append(replayer)
        assert replayer.wait(900) == 0, (tmp_path / "replayer.log").read_text()[-3000:]
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", topics.trajectory),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
        for runner in runners:
            if runner.poll() is None:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait(30)
        for handle in handles:
            handle.close()

    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=base, check=True)
    queries = [t.format(rs="grid") for t in TABLES]
    *distributed, per_unit, verdicts, replay_verdicts, replay_calls = sql_batch(base, [
        *queries,
        "SELECT unit_id, countIf(status = 'completed'), countIf(status = 'abandoned') FROM (SELECT * FROM "
        "run_results WHERE run_set = 'grid' LIMIT 1 BY derived_id) GROUP BY unit_id ORDER BY unit_id",
        VERDICTS.format(rs="grid"), VERDICTS.format(rs="grid-replay"),
        "SELECT DISTINCT JSONExtractString(payload, 'mode'), JSONExtractString(payload, 'status') FROM "
        "trajectory_events WHERE run_set = 'grid-replay' AND kind = 'ModelCall'"], warehouse)
    rows = [line.split("\t") for line in per_unit.strip().splitlines()]
    assert len(rows) == UNITS and all(done == "1" for _, done, _ in rows), per_unit  # each completed once
    assert [unit for unit, _, abandoned in rows if abandoned != "0"] == [unit_key.split("/", 1)[1]]
    # the derived tables equal the embedded run's: verdicts, tokens, cost, memory reads, calls, memory events
    for reference, table in zip(sql_batch(homes["embedded"], queries), distributed):
        assert reference.strip() and reference == table
    assert "\tModelCall\tembed\tok\t" in distributed[2] and "\tModelCall\tagent\tok\t" in distributed[2]
    # the replay answered every call from the recording: the same verdicts, unit by unit
    assert verdicts.strip() and verdicts == replay_verdicts
    # memory reached the agent: the scored third session passes under both libraries, fails without memory
    scored = {unit.split("/")[2] for unit, session, outcome in (line.split("\t") for line in verdicts.splitlines())
              if session == "3" and outcome == "pass"}
    assert scored == {"B5-MEM0-LIT", "B5-LANGMEM"}, verdicts
    assert replay_calls.split() == ["replay", "ok"], replay_calls  # no miss, no upstream
    # the audit's machine holds no blob of the run: it reads them from the blobs topic
    assert not (base / "runs" / "grid" / "blobs").exists()
    verify = run_cli("replay", dsn, "--verify", "--warehouse", warehouse, home=base)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    assert any((base / "runs" / "grid" / "blobs").iterdir())


def test_codex_runs_on_a_runner_that_hosts_its_gateway(tmp_path):
    """The real Codex CLI on a runner: its sandboxed relay reaches the gateway the runner hosts, which
    adds the runner's key; the recorded calls and the scored sessions arrive through Kafka."""
    from membench.agents.model_agents import agents_prefix
    from tests.conftest import skip_or_fail
    from tests.integration.pack_helpers import smoke_cut_to

    require_broker()
    if not (agents_prefix() / "bin" / "codex").exists():
        skip_or_fail(f"codex is not installed under {agents_prefix()}: run deploy/agents/install.sh")
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    warehouse = f"chdb://{tmp_path / 'kafka-warehouse'}"
    base, runner_home = tmp_path / "base", tmp_path / "runner"
    base.mkdir()
    pack = smoke_cut_to(tmp_path / "smoke-currency")  # 3 sessions; the third needs the remembered code
    worker = Worker(dsn, base, tmp_path / "worker.log")
    log = open(tmp_path / "runner.log", "w")
    runner = None
    try:
        with ScriptedUpstream(script_from_pack(pack), key=KEY) as upstream:
            run_cli("run", str(pack), "--agent", "codex", "--conditions", "B5", "--seeds", "1", "--run-set", "cx",
                    "--model-base-url", upstream.base_url, "--model-record", "--bus", dsn, "--enqueue", home=base,
                    check=True)
            shutil.copytree(base, runner_home, ignore=shutil.ignore_patterns("runs"))
            runner = membench("runner", "--bus", dsn, "--until-idle", home=runner_home, stdout=log, stderr=log,
                              env={"MEMBENCH_MODEL_API_KEY": KEY, "MEMBENCH_AGENT_WALL_S": "300"})
            assert runner.wait(900) == 0, (tmp_path / "runner.log").read_text()[-3000:]
            auth = {r["headers"].get("Authorization") for r in upstream.requests}
            assert auth == {f"Bearer {KEY}"}  # the runner's key, added by its gateway
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
        if runner is not None and runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(30)
        log.close()
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=base, check=True)
    outcomes, calls = sql_batch(base, [
        "SELECT outcome FROM session_results WHERE run_set = 'cx' ORDER BY session_index LIMIT 1 BY derived_id",
        "SELECT JSONExtractString(payload, 'status'), JSONExtractBool(payload, 'recorded'), count() FROM "
        "(SELECT * FROM trajectory_events WHERE run_set = 'cx' AND kind = 'ModelCall' LIMIT 1 BY event_id) "
        "GROUP BY ALL"], warehouse)
    assert outcomes.split() == ["pass", "pass", "pass"], outcomes
    assert calls.split() == ["ok", "1", "6"], calls  # two calls a session, each recorded
    verify = run_cli("replay", dsn, "--verify", "--warehouse", warehouse, home=base)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]


def test_the_transfer_study_model_user_records_and_replays_on_kafka(tmp_path):
    """`membench transfer --bus kafka://… --user model:MODEL`: the gateway runs in that process with its
    key, the recorded bodies go to the blobs topic, and a replay on another machine, which holds none of
    them, reads the recording from the topics and holds the same conversation."""
    from membench.bus.kafka import read_run_events, read_unit_status
    from tests.integration.test_transfer_model_user import REPLIES, SCRIPT, transfer_args

    require_broker()
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    topics = topics_from_dsn(dsn)
    warehouse = f"chdb://{tmp_path / 'kafka-warehouse'}"
    recorder, replayer = tmp_path / "recorder", tmp_path / "replayer"
    recorder.mkdir()
    replayer.mkdir()
    worker = Worker(dsn, recorder, tmp_path / "worker.log")
    try:
        with ScriptedUpstream(SCRIPT, key=KEY) as upstream:
            run_cli(*transfer_args("recorded", "--model-base-url", upstream.base_url, "--model-record", "--bus", dsn),
                    home=recorder, env={"MEMBENCH_MODEL_API_KEY": KEY}, check=True)
        run_cli(*transfer_args("replayed", "--model-replay", "recorded", "--bus", dsn), home=replayer, check=True)
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", topics.trajectory),
                 180, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()

    def conversation(run_set: str) -> dict[str, list]:
        runs = {r["run_id"] for r in read_unit_status(topics, run_set).values() if r.get("status") == "completed"}
        out: dict[str, list] = {}
        for e in read_run_events(topics, runs, {"Turn", "ModelCall", "OracleVerdict"}):
            if e.kind == "Turn" and e.payload["role"] == "simulated_user":
                out.setdefault(e.unit_id, []).append(e.payload["text"]["text"])
            elif e.kind == "ModelCall":
                out.setdefault(e.unit_id, []).append((e.payload["mode"], e.payload["status"]))
            elif e.kind == "OracleVerdict":
                out.setdefault(e.unit_id, []).append(e.payload["outcome"])
        return out

    recorded, replayed = conversation("recorded"), conversation("replayed")
    assert len(recorded) == 2 and all(REPLIES["plan_handoff"] in turns for turns in recorded.values()), recorded
    assert {u: [t for t in turns if not isinstance(t, tuple)] for u, turns in recorded.items()} == \
        {u: [t for t in turns if not isinstance(t, tuple)] for u, turns in replayed.items()}
    assert {t for turns in recorded.values() for t in turns if isinstance(t, tuple)} == {("forward", "ok")}
    assert {t for turns in replayed.values() for t in turns if isinstance(t, tuple)} == {("replay", "ok")}
    run_cli("sink", "--bus", dsn, "--warehouse", warehouse, "--until-idle", home=replayer, check=True)
    verify = run_cli("replay", dsn, "--verify", "--warehouse", warehouse, home=replayer)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
