"""Recovery and the log root through real components: a crashed `membench run` (SIGKILL) resumed and
replayed, abandoned attempts closed in their own chains, the log root written, signed and verified,
the warehouse read-only through `membench sql`, and `membench report` refusing a warehouse that no
longer matches its log root. Real CLI, real chDB, real bubblewrap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fastavro
import pytest

from tests.conftest import run_cli
from tests.integration.conftest import SMOKE_GRID, copy_home
from tests.integration.sql_batch import sql_batch

pytestmark = pytest.mark.integration

GRID = ("--conditions", "B0,B5", "--seeds", "1,2")
UNITS = 3 * 2 * 2  # the smoke pack's 3 sequences × 2 conditions × 2 seeds


def _log_runs(path: Path) -> dict[str, dict]:
    """run_id -> {events, last_seq, last_hash, status} of a log file (complete blocks only)."""
    runs: dict[str, dict] = {}
    with open(path, "rb") as handle:
        for record in fastavro.reader(handle):
            run = runs.setdefault(record["run_id"], {"events": 0, "status": None, "unit_id": record["unit_id"]})
            run["events"] += 1
            run["last_seq"], run["last_hash"] = record["seq"], record["hash"]
            if record["kind"] == "RunEnded":
                run["status"] = record["payload"]["status"]
    return runs


def _open_runs_now(path: Path) -> tuple[set[str], int]:
    """(runs without RunEnded, runs ended) as far as the log can be read right now."""
    try:
        runs = _log_runs(path)
    except Exception:  # a block being written right now; try again
        return set(), 0
    return ({r for r, v in runs.items() if v["status"] is None},
            sum(1 for v in runs.values() if v["status"] is not None))


def _sign_keys(tmp: Path) -> tuple[Path, Path]:
    key, pub = tmp / "operator.pem", tmp / "operator.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    return key, pub


@pytest.fixture(scope="module")
def crashed(tmp_path_factory, bwrap_sandbox):
    """`membench run smoke` killed with SIGKILL while the log holds a run without RunEnded, then the
    same command again (resumed, signed). Two workers: with one, a run's events reach the log only
    at its end (the log is flushed before each warehouse batch, at a run's end), so a killed run
    would leave nothing behind to close; with two, each flush also writes the other run's first half."""
    base = tmp_path_factory.mktemp("crash")
    home = base / "home"
    key, pub = _sign_keys(base)
    args = ["run", "smoke", *GRID, "--workers", "2", "--run-set", "crash-rs"]
    log = home / "runs" / "crash-rs" / "events.avro"
    proc = subprocess.Popen([sys.executable, "-m", "membench", *args], env={**os.environ, "MEMBENCH_HOME": str(home)},
                            cwd=str(base), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    killed_with_open: set[str] = set()
    deadline = time.monotonic() + 600
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if log.exists():
                open_runs, ended = _open_runs_now(log)
                if open_runs and ended >= 1:
                    os.kill(proc.pid, signal.SIGKILL)  # the crash: no cleanup, no flush, no close
                    killed_with_open = open_runs
                    break
            time.sleep(0.02)
        proc.wait(timeout=60)
    finally:
        try:  # sandboxes the killed run had started (same session) must not outlive the test
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert killed_with_open, "the run finished before the log held an open run (nothing was killed mid-run)"
    before = _log_runs(log)
    abandoned = {r: v for r, v in before.items() if v["status"] is None}
    assert abandoned, "after the kill the log must hold at least one run without RunEnded"
    resumed = run_cli(*args, "--sign-key", str(key), home=home, check=True)
    return {"home": home, "log": log, "before": before, "abandoned": abandoned, "resumed": resumed, "pub": pub,
            "key": key, "args": args}


def test_resume_closes_each_abandoned_attempt_in_its_own_chain(crashed):
    after = _log_runs(crashed["log"])
    for run_id, was in crashed["abandoned"].items():
        now = after[run_id]
        assert now["status"] == "abandoned"
        assert now["events"] == was["events"] + 1 and now["last_seq"] == was["last_seq"] + 1
        assert f"run {run_id}" in crashed["resumed"].stderr.replace("\n", " ")
    with open(crashed["log"], "rb") as handle:
        closing = [r for r in fastavro.reader(handle) if r["kind"] == "RunEnded" and r["run_id"] in crashed["abandoned"]]
    for record in closing:
        was = crashed["abandoned"][record["run_id"]]
        assert record["prev_hash"] == was["last_hash"] and record["seq"] == was["last_seq"] + 1
        assert record["payload"] == {"status": "abandoned", "error_type": "abandoned_attempt"}
        assert record["session_index"] == -1 and record["visibility"] == "harness"


def test_replay_verify_of_the_resumed_run_set_passes_and_shows_the_abandoned_attempt(crashed):
    home = crashed["home"]
    proc = run_cli("replay", str(crashed["log"]), "--verify", "--json", "--pubkey", str(crashed["pub"]), home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] and result["compared"] == result["derived"] > 0
    (run_set,) = result["run_sets"]
    assert {a["run_id"] for a in run_set["abandoned"]} == set(crashed["abandoned"])
    assert result["log_root_files"][0]["matches"] and result["log_root_files"][0]["signature"] == "verified"
    human = run_cli("replay", str(crashed["log"]), "--verify", home=home, check=True).stdout
    assert "abandoned attempt: run" in human


def test_every_unit_is_complete_once_and_abandoned_runs_are_no_cells(crashed):
    home = crashed["home"]
    report = json.loads((home / "runs" / "crash-rs" / "report.json").read_text())
    by_condition = {c["condition"]: c for c in report["conditions"]}
    assert by_condition["B0"]["cells"] == by_condition["B5"]["cells"] == UNITS // 2  # one cell per unit, not per attempt
    assert all(c["excluded"] == 0 for c in report["conditions"])  # the unit's completed attempt is its cell
    completed = run_cli("sql", "SELECT unit_id, count() FROM run_results WHERE run_set = 'crash-rs' AND status = "
                        "'completed' GROUP BY unit_id", home=home, check=True).stdout.splitlines()
    assert len(completed) == UNITS and all(line.endswith("\t1") for line in completed)
    rows = run_cli("sql", "SELECT run_id, status, error_type FROM run_results WHERE run_set = 'crash-rs' "
                   "AND status = 'abandoned' ORDER BY run_id", home=home, check=True).stdout.splitlines()
    assert {line.split("\t")[0] for line in rows} == set(crashed["abandoned"])
    assert all(line.endswith("\tabandoned\tabandoned_attempt") for line in rows)
    # the next attempt of an abandoned unit has a new run id, and a third run adds nothing
    again = run_cli(*crashed["args"], home=home, check=True)
    assert "0 to run" in again.stderr.replace("\n", " ") and "closed at seq" not in again.stderr


def test_log_root_is_in_report_log_root_json_and_replay_alike(crashed):
    home = crashed["home"]
    record = json.loads((home / "runs" / "crash-rs" / "log_root.json").read_text())
    report = json.loads((home / "runs" / "crash-rs" / "report.json").read_text())
    replayed = json.loads(run_cli("replay", str(crashed["log"]), "--json", home=home, check=True).stdout)
    assert len(record["log_root"]) == 64 and int(record["log_root"], 16) >= 0
    assert report["inputs"]["log_root"] == record["log_root"] == replayed["log_root"]
    assert {r["run_id"] for r in record["runs"]} == set(_log_runs(crashed["log"]))
    assert record["signature"]["algorithm"] == "ed25519"
    assert record["log_root"] in (home / "runs" / "crash-rs" / "report.md").read_text()
    assert record["log_root"] in (home / "runs" / "crash-rs" / "report.html").read_text()
    # stable across replays: a second replay of the same log prints the same root
    again = json.loads(run_cli("replay", "warehouse:crash-rs", "--json", home=home, check=True).stdout)
    assert again["log_root"] == record["log_root"]


def test_replay_refuses_a_signature_by_another_key_and_an_edited_root(crashed, tmp_path):
    home, log = crashed["home"], crashed["log"]
    _, other_pub = _sign_keys(tmp_path)
    wrong = run_cli("replay", str(log), "--pubkey", str(other_pub), home=home)
    assert wrong.returncode == 1 and "does not verify" in wrong.stderr
    record = json.loads((log.parent / "log_root.json").read_text())
    forged = tmp_path / "log_root.json"
    record["log_root"] = "0" * 64
    forged.write_text(json.dumps(record))
    proc = run_cli("replay", str(log), "--log-root", str(forged), "--pubkey", str(crashed["pub"]), home=home)
    assert proc.returncode == 1 and f"{forged}: field 'log_root' {'0' * 64} differs" in proc.stderr
    # the signature is checked against the root recomputed from the log, so it still verifies
    assert "does not verify" not in proc.stderr
    missing = run_cli("replay", str(log), "--log-root", str(tmp_path / "none.json"), "--pubkey",
                      str(crashed["pub"]), home=home)
    assert missing.returncode == 1 and "no log_root.json" in missing.stderr


def test_an_edited_log_changes_the_root_and_fails_the_signature(crashed, tmp_path):
    home, log = crashed["home"], crashed["log"]
    data = bytearray(log.read_bytes())
    at = data.find(b"build_headers")
    data[at] ^= 0x20
    copy = tmp_path / "events.avro"
    copy.write_bytes(bytes(data))
    (tmp_path / "log_root.json").write_text((log.parent / "log_root.json").read_text())
    proc = run_cli("replay", str(copy), "--json", "--pubkey", str(crashed["pub"]), home=home)
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    record = json.loads((log.parent / "log_root.json").read_text())
    assert result["log_root"] != record["log_root"]
    reasons = " ".join(f["reason"] for f in result["findings"])
    assert "the event was edited" in reasons and "does not verify" in reasons and "differs from the root" in reasons


# ------------------------------------------------------------------- the warehouse, read-only


@pytest.fixture(scope="module")
def small(tmp_path_factory, smoke_run_set):
    """A writable copy of the session's shared smoke run set (B0, B5 × seeds 1, 2): its home and run set."""
    return copy_home(smoke_run_set, tmp_path_factory.mktemp("small") / "home"), smoke_run_set.run_set


UNWRITTEN = ["SELECT count(), sum(scored_passed) FROM run_results", "EXISTS TABLE failures",
             "SELECT count() FROM trajectory_events", "SELECT count() FROM session_results"]


@pytest.fixture(scope="module")
def unwritten(tmp_path_factory, smoke_run_set):
    """Another copy of the shared run set, which only refused writes reach, and its rows' counts."""
    home = copy_home(smoke_run_set, tmp_path_factory.mktemp("unwritten") / "home")
    before = sql_batch(home, UNWRITTEN)
    assert before[1] == "1\n" and int(before[0].split()[0]) > 0
    return home, smoke_run_set.run_set, before


@pytest.mark.parametrize("query", [
    "INSERT INTO run_results (run_id, run_set) VALUES ('forged', 'small-rs')",
    "ALTER TABLE run_results UPDATE scored_passed = 1 WHERE 1",
    "ALTER TABLE trajectory_events DELETE WHERE seq = 0",
    "DROP TABLE failures",
    "TRUNCATE TABLE session_results",
    "SELECT count() FROM run_results SETTINGS readonly = 0",
])
def test_sql_refuses_every_write_with_one_line_exit_2(unwritten, query):
    home, run_set, before = unwritten
    proc = run_cli("sql", query.replace("small-rs", run_set), home=home)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "read-only" in proc.stderr and "--allow-write" in proc.stderr
    assert sql_batch(home, UNWRITTEN) == before  # nothing changed, nothing dropped


def test_report_refuses_a_warehouse_edited_with_allow_write_and_names_run_and_table(small):
    home, run_set = small
    assert run_cli("report", run_set, home=home).returncode == 0
    b0 = run_cli("sql", f"SELECT run_id FROM run_results WHERE run_set = '{run_set}' AND condition = 'B0' "
                 "ORDER BY run_id LIMIT 1", home=home, check=True).stdout.strip()
    edit = run_cli("sql", "--allow-write", f"ALTER TABLE run_results UPDATE scored_passed = 1 WHERE run_id = '{b0}' "
                   "SETTINGS mutations_sync = 1", home=home)
    assert edit.returncode == 0 and "breaks the audit trail" in edit.stderr.replace("\n", " ")
    report_json = home / "runs" / run_set / "report.json"
    written = report_json.stat().st_mtime_ns
    proc = run_cli("report", run_set, home=home)
    assert proc.returncode == 1
    assert f"run {b0}: its rows in run_results differ" in proc.stderr.replace("\n", " ")
    assert report_json.stat().st_mtime_ns == written  # nothing written
    forced = run_cli("report", run_set, "--allow-mismatch", home=home)
    assert forced.returncode == 0 and "WARNING" in forced.stderr
    # a resumed run refuses too, instead of writing a new log root over the edited rows
    resumed = run_cli("run", *SMOKE_GRID, home=home)
    assert resumed.returncode == 1 and f"run {b0}" in resumed.stderr.replace("\n", " ")


def test_report_refuses_deleted_rows(tmp_path, smoke_run_set):
    home, rs = copy_home(smoke_run_set, tmp_path / "home"), smoke_run_set.run_set  # a copy: this test edits it
    victim = run_cli("sql", f"SELECT run_id FROM session_results WHERE run_set = '{rs}' ORDER BY run_id LIMIT 1",
                     home=home, check=True).stdout.strip()
    run_cli("sql", "--allow-write", f"DELETE FROM session_results WHERE run_id = '{victim}'", home=home, check=True)
    proc = run_cli("report", rs, home=home)
    assert proc.returncode == 1 and f"run {victim}: its rows in session_results differ" in proc.stderr.replace("\n", " ")
    # without the recorded file the raw log still catches a summary that contradicts it
    (home / "runs" / rs / "log_root.json").unlink()
    assert run_cli("report", rs, home=home).returncode == 0  # session rows are not checkable without it
    run_cli("sql", "--allow-write", f"ALTER TABLE run_results UPDATE last_hash = '{'f' * 64}' WHERE run_id = "
            f"'{victim}' SETTINGS mutations_sync = 1", home=home, check=True)
    proc = run_cli("report", rs, home=home)
    assert proc.returncode == 1
    assert f"run {victim}: run_results.last_hash differs from the hash of its last raw event" in proc.stderr.replace(
        "\n", " ")


# --------------------------------------------------- recovery when the warehouse lags the log


def _recover(log, warehouse):
    """`recover` on a fresh pipeline, as a resumed run set starts."""
    from membench.pipeline.embedded import EmbeddedPipeline

    pipeline = EmbeddedPipeline(log, warehouse)
    recovery = pipeline.recover("rs")
    pipeline.close()
    return recovery


def test_recover_copies_what_the_warehouse_lacks_and_closes_the_open_run(tmp_path):
    """A crash after the log's fsync but before the warehouse insert: the log holds a finished run
    and the first half of another that the warehouse never saw. `recover` copies both in and closes
    the open one; replay of the log against the warehouse then agrees."""
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.audit.file_source import events_from_file
    from membench.audit.replayer import replay
    from membench.schemas.chain import seal
    from membench.schemas.registry import default_registry
    from tests.processors.test_verdicts import build_run
    from membench.warehouse import queries
    from membench.warehouse.client import connect

    schema = default_registry().latest("event")
    log = tmp_path / "runs" / "rs" / "events.avro"
    done, cut = build_run(run_id="run-done"), build_run(run_id="run-cut")[:9]
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    pipeline = EmbeddedPipeline(log, warehouse)
    for event in done[:5]:
        pipeline.publish(event, seal(schema, event)[1])
    pipeline.sink.flush()  # the warehouse holds run-done's first five events
    for event in done[5:] + cut:
        pipeline.publish(event, seal(schema, event)[1])
    pipeline.bus.flush()  # ... the log holds everything, then the process dies before the insert
    pipeline.bus.close()
    warehouse.close()

    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        assert queries.events_per_run(warehouse, "rs") == {"run-done": 5}
        recovery = _recover(log, warehouse)
        assert recovery.raw_rows == len(done) - 5 + len(cut)
        assert [(e.run_id, e.seq, e.prev_hash) for e in recovery.closed] == [("run-cut", 9, cut[-1].hash)]
        assert queries.events_per_run(warehouse, "rs") == {"run-done": len(done), "run-cut": 10}
        statuses = dict(warehouse.query_rows("SELECT run_id, status FROM run_results"))
        assert statuses == {"run-done": "completed", "run-cut": "abandoned"}
        assert queries.attempts_started(warehouse, "rs") == {"suite/task/B5/1": 2}
        findings = []
        result = replay(events_from_file(log, findings), findings, warehouse)
        assert result.ok, [str(f) for f in result.findings]
        assert result.run_sets["rs"].abandoned == [("run-cut", "suite/task/B5/1", 9)]
        # recovering again finds nothing left to do
        again = _recover(log, warehouse)
        assert (again.raw_rows, again.derived_rows, again.closed) == (0, 0, [])
    finally:
        warehouse.close()


class _Killed(Exception):
    """Stands for the process dying at this insert (nothing after it runs)."""


class _DiesAtTable:
    """The real warehouse, except that the process 'dies' when a batch reaches `table`."""

    def __init__(self, warehouse, table: str):
        self._warehouse, self._table = warehouse, table

    def insert(self, table, rows, columns, dedup_token):
        if table == self._table:
            raise _Killed(table)
        self._warehouse.insert(table, rows, columns, dedup_token)

    def __getattr__(self, name):
        return getattr(self._warehouse, name)


# the batch's first derived insert; one that sorts after run_results (the summary row must not land
# before it); the last
@pytest.mark.parametrize("dies_at", ["failures", "session_results", "run_results"])
def test_recover_derives_a_finished_run_whose_raw_rows_landed_without_its_derived_rows(tmp_path, dies_at):
    """A crash inside a batch write: the raw rows of a finished run (and of half of another) are in
    the warehouse, its derived rows are not, or all but its summary row are. The run's raw count
    matches the log, so only its missing summary row gives it away; `recover` derives what is
    missing once, and replay of the log against the warehouse agrees (CI saw this after a kill -9)."""
    from membench.audit.file_source import events_from_file
    from membench.audit.log_root_record import warehouse_state
    from membench.audit.replayer import replay
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.schemas.chain import seal
    from membench.schemas.registry import default_registry
    from tests.processors.test_verdicts import build_run
    from membench.warehouse import queries
    from membench.warehouse.client import connect
    from membench.warehouse.tables import derived_columns, table_for_kind

    schema = default_registry().latest("event")
    log = tmp_path / "runs" / "rs" / "events.avro"
    done, cut = build_run(run_id="run-done"), build_run(run_id="run-cut")[:9]
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    pipeline = EmbeddedPipeline(log, _DiesAtTable(warehouse, dies_at))
    for event in cut[:4] + done + cut[4:]:
        pipeline.publish(event, seal(schema, event)[1])
    with pytest.raises(_Killed):
        pipeline.sink.flush()
    pipeline.bus.close()
    warehouse.close()

    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        assert queries.events_per_run(warehouse, "rs") == {"run-done": len(done), "run-cut": len(cut)}
        assert any("run_results has no row" in line for line in warehouse_state(warehouse, "rs").problems["run-done"])
        recovery = _recover(log, warehouse)
        assert recovery.raw_rows == 0 and recovery.derived_rows > 0
        assert warehouse_state(warehouse, "rs").problems == {}
        statuses = dict(warehouse.query_rows("SELECT run_id, status FROM run_results"))
        assert statuses == {"run-done": "completed", "run-cut": "abandoned"}
        for kind in derived_columns():  # nothing derived twice (the tables keep every insert)
            total, distinct = warehouse.query_rows(
                f"SELECT count(), uniqExact(derived_id) FROM {table_for_kind(kind)}")[0]
            assert total == distinct, kind
        findings = []
        result = replay(events_from_file(log, findings), findings, warehouse)
        assert result.ok, [str(f) for f in result.findings]
        again = _recover(log, warehouse)
        assert (again.raw_rows, again.derived_rows, again.closed) == (0, 0, [])
    finally:
        warehouse.close()
