"""Tables out: `membench sql --format NAME [--output FILE]`, `membench export parquet RUN_SET OUT_DIR`
and the `membench.frames` API, each read back (pyarrow, pandas, csv, json) and compared with
`membench sql`'s plain TSV. Every warehouse access runs in its own process (one chDB owner)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli
from tests.integration.sql_batch import sql_batch
from tests.membench.test_score_swebench import PREDICTIONS, write_pack_source

from membench.warehouse.tables import derived_columns, table_for_kind

# every table the warehouse defines: the raw log and one per derived kind (a new kind adds a table;
# the transfer tables exist, empty, for a run set that is no transfer study)
TABLES = ("trajectory_events", *(table_for_kind(kind) for kind in derived_columns()))
CORE_TABLES = ("trajectory_events", "failures", "hygiene_observations", "memory_contracts", "run_results",
               "session_results")
IDENT = {t: "event_id" if t == "trajectory_events" else "derived_id" for t in TABLES}


def tsv(home: Path, query: str) -> list[list[str]]:
    return [line.split("\t") for line in run_cli("sql", query, home=home, check=True).stdout.splitlines()]


def tsv_many(home: Path, queries: list[str]) -> list[list[list[str]]]:
    """`tsv` of each query, all in one subprocess (tests/integration/sql_batch.py): what `membench
    sql` prints, without an interpreter start per query."""
    return [[line.split("\t") for line in out.splitlines()] for out in sql_batch(home, queries)]


@pytest.fixture(scope="module")
def warehouse_home(tmp_path_factory, bwrap_sandbox):
    """Two run sets scored from SWE-bench predictions: `tbl` (6 units) and `other` (1 unit)."""
    root = tmp_path_factory.mktemp("tables")
    home = root / "membench-home"
    run_cli("import", "remem", str(write_pack_source(root / "tasks.json")), str(root / "pack"), home=home, check=True)
    for run_set, preds in (("tbl", PREDICTIONS), ("other", PREDICTIONS[:1])):
        path = root / f"{run_set}.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in preds))
        run_cli("score", str(root / "pack"), "--predictions", str(path), "--run-set", run_set, home=home, check=True)
    return home


@pytest.fixture
def empty_home(tmp_path) -> Path:
    """A warehouse with its tables and no rows (created in a process of its own)."""
    home = tmp_path / "membench-home"
    subprocess.run([sys.executable, "-c", "import sys; from membench.warehouse.client import connect; "
                    "connect('chdb://' + sys.argv[1]).close()", str(home / "warehouse")], check=True, cwd=tmp_path)
    return home


# ---------------------------------------------------------------------------------------------- sql


def test_sql_formats_on_a_plain_query(empty_home):
    query = "SELECT number AS n, toString(number * 2) AS s FROM numbers(3)"
    assert run_cli("sql", query, home=empty_home, check=True).stdout == "0\t0\n1\t2\n2\t4\n"  # TSV, as before
    assert run_cli("sql", query, "--format", "TSVWithNames", home=empty_home, check=True).stdout.startswith("n\ts\n0")
    rows = list(csv.DictReader(io.StringIO(run_cli("sql", query, "--format", "CSVWithNames", home=empty_home,
                                                   check=True).stdout)))
    assert rows == [{"n": "0", "s": "0"}, {"n": "1", "s": "2"}, {"n": "2", "s": "4"}]
    lines = run_cli("sql", query, "--format", "jsoneachrow", home=empty_home, check=True).stdout.splitlines()
    assert [json.loads(line) for line in lines] == [{"n": 0, "s": "0"}, {"n": 1, "s": "2"}, {"n": 2, "s": "4"}]
    pretty = run_cli("sql", query, "--format", "Pretty", home=empty_home, check=True).stdout
    assert " n " in pretty and " s " in pretty and "┃" in pretty


def test_an_unknown_format_is_exit_2_naming_it(empty_home, tmp_path):
    out = tmp_path / "x.out"
    proc = run_cli("sql", "SELECT 1", "--format", "NoSuchFormat", "--output", str(out), home=empty_home)
    assert proc.returncode == 2 and "--format: unknown ClickHouse output format 'NoSuchFormat'" in proc.stderr
    assert proc.stdout == "" and not out.exists()


def test_a_failed_query_writes_no_output_file(empty_home, tmp_path):
    out = tmp_path / "x.tsv"
    proc = run_cli("sql", "SELECT nope FROM run_results", "--output", str(out), home=empty_home)
    assert proc.returncode == 2 and "query failed" in proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".x.tsv*"))


def test_parquet_goes_to_a_pipe_or_a_file_but_not_to_a_terminal(empty_home, tmp_path):
    query = "SELECT number AS n FROM numbers(5)"
    piped = subprocess.run([sys.executable, "-m", "membench", "sql", query, "--format", "Parquet"],
                           capture_output=True, env={**os.environ, "MEMBENCH_HOME": str(empty_home)}, cwd=tmp_path)
    assert piped.returncode == 0 and pq.read_table(io.BytesIO(piped.stdout)).column("n").to_pylist() == [0, 1, 2, 3, 4]
    out = tmp_path / "n.parquet"
    run_cli("sql", query, "--format", "Parquet", "--output", str(out), home=empty_home, check=True)
    assert pq.read_table(out).num_rows == 5
    leader, follower = pty.openpty()
    try:
        tty = subprocess.run([sys.executable, "-m", "membench", "sql", query, "--format", "Parquet"], stdout=follower,
                             stderr=subprocess.PIPE, env={**os.environ, "MEMBENCH_HOME": str(empty_home)}, cwd=tmp_path,
                             timeout=120)
    finally:
        os.close(follower)
        os.close(leader)
    assert tty.returncode == 2 and b"a binary format is not printed to a terminal" in tty.stderr


def test_the_format_does_not_lift_read_only(empty_home):
    proc = run_cli("sql", "INSERT INTO run_results (run_id) VALUES ('x')", "--format", "JSONEachRow", home=empty_home)
    assert proc.returncode == 2 and "read-only" in proc.stderr


@pytest.mark.integration
def test_sql_parquet_of_a_table_matches_its_tsv(warehouse_home, tmp_path):
    out = tmp_path / "runs.parquet"
    query = "SELECT run_id, task, condition, scored_passed FROM run_results WHERE run_set = 'tbl' ORDER BY run_id"
    run_cli("sql", query, "--format", "Parquet", "--output", str(out), home=warehouse_home, check=True)
    table = pq.read_table(out).to_pylist()
    rows = tsv(warehouse_home, query)
    assert len(table) == len(rows) == 6
    assert [[r["run_id"], r["task"], r["condition"], str(r["scored_passed"]).lower()] for r in table] == rows


# ------------------------------------------------------------------------------------- export parquet


@pytest.mark.integration
def test_export_parquet_writes_every_table_of_the_run_set(warehouse_home, tmp_path):
    out = tmp_path / "out"
    run_cli("export", "parquet", "tbl", str(out), home=warehouse_home, check=True)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_set"] == "tbl" and sorted(manifest["tables"]) == sorted(TABLES)
    assert set(CORE_TABLES) <= set(TABLES)
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{t}.parquet" for t in TABLES] + ["manifest.json"])
    queries = []
    for table in TABLES:
        ident = IDENT[table]
        queries += [f"SELECT uniqExact({ident}) FROM {table} WHERE run_set = 'tbl'",
                    f"SELECT DISTINCT {ident} FROM {table} WHERE run_set = 'tbl' ORDER BY 1",
                    f"SELECT name FROM system.columns WHERE table = '{table}' AND database = currentDatabase() "
                    "ORDER BY position"]
    *per_table, passed = tsv_many(warehouse_home, queries + [
        "SELECT condition, task FROM run_results WHERE run_set = 'tbl' AND scored_passed ORDER BY condition, task"])
    for index, table in enumerate(TABLES):
        path = out / f"{table}.parquet"
        data = pq.read_table(path)
        ident = IDENT[table]
        ((count,),), distinct, columns = per_table[3 * index:3 * index + 3]
        assert data.num_rows == int(count) == manifest["tables"][table]["rows"], table
        assert manifest["tables"][table]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert set(data.column("run_set").to_pylist()) <= {"tbl"}
        ids = sorted(data.column(ident).to_pylist())
        assert ids == [r[0] for r in distinct], table
        assert data.column_names == [r[0] for r in columns], table
    events = pq.read_table(out / "trajectory_events.parquet").to_pandas()
    assert int(events["kind"].eq("RunStarted").sum()) == 6
    assert list(events.groupby("run_id")["seq"].apply(lambda s: s.is_monotonic_increasing)) == [True] * 6
    runs = pq.read_table(out / "run_results.parquet").to_pandas()
    assert sorted(runs.loc[runs["scored_passed"], ["condition", "task"]].values.tolist()) == passed


@pytest.mark.integration
def test_export_parquet_of_an_unknown_run_set_writes_nothing(warehouse_home, tmp_path):
    proc = run_cli("export", "parquet", "nope", str(tmp_path / "out"), home=warehouse_home)
    assert proc.returncode == 2 and "run set 'nope' has no events" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = run_cli("export", "parquet", "../x", str(tmp_path / "out"), home=warehouse_home)
    assert proc.returncode == 2 and "RUN_SET: invalid run-set id" in proc.stderr


# --------------------------------------------------------------------------------------------- frames

FRAMES_SCRIPT = """
import json, sys
from membench import frames
home = sys.argv[1]
runs = frames.runs("tbl", home=home)
every = frames.runs(home=home, all_attempts=True)
sessions = frames.sessions("tbl", home=home)
events = frames.events("tbl", home=home)
calls = frames.events("tbl", home=home, kinds=["ToolResult"])
print(json.dumps({
    "runs": sorted(runs["unit_id"].tolist()), "passed": int(runs["scored_passed"].sum()),
    "run_sets": sorted(set(every["run_set"])), "every": len(every),
    "sessions": len(sessions), "session_keys": sorted(zip(sessions["run_id"], sessions["session_index"].astype(int))),
    "events": len(events), "event_ids": sorted(events["event_id"]), "has_datum": "datum" in events.columns,
    "ts": str(events["ts"].dtype), "calls": sorted(set(calls["kind"])), "n_calls": len(calls),
    "failures": len(frames.failures("tbl", home=home)), "contracts": len(frames.memory_contracts("tbl", home=home)),
    "hygiene": len(frames.hygiene("tbl", home=home)),
}))
"""


@pytest.mark.integration
def test_frames_api_returns_the_tables_as_sql_sees_them(warehouse_home):
    proc = subprocess.run([sys.executable, "-c", FRAMES_SCRIPT, str(warehouse_home)], capture_output=True, text=True,
                          cwd=warehouse_home.parent, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    contract_tables = (("failures", "failures"), ("contracts", "memory_contracts"), ("hygiene", "hygiene_observations"))
    units, keys, ids, ((n_calls,),), *counts = tsv_many(warehouse_home, [
        "SELECT DISTINCT unit_id FROM run_results WHERE run_set = 'tbl' ORDER BY 1",
        "SELECT DISTINCT run_id, session_index FROM session_results WHERE run_set = 'tbl' ORDER BY 1, 2",
        "SELECT DISTINCT event_id FROM trajectory_events WHERE run_set = 'tbl' ORDER BY 1",
        "SELECT uniqExact(event_id) FROM trajectory_events WHERE run_set = 'tbl' AND kind = 'ToolResult'",
        *(f"SELECT uniqExact(derived_id) FROM {table} WHERE run_set = 'tbl'" for _, table in contract_tables)])
    assert got["runs"] == [r[0] for r in units]
    assert got["passed"] == 2 and got["run_sets"] == ["other", "tbl"] and got["every"] == 7
    assert got["sessions"] == len(keys) and got["session_keys"] == [[r, int(i)] for r, i in keys]
    ids = [r[0] for r in ids]
    assert got["events"] == len(ids) and got["event_ids"] == ids and not got["has_datum"]
    assert got["ts"].startswith("datetime64") and got["calls"] == ["ToolResult"]
    assert got["n_calls"] == int(n_calls)
    for (key, table), ((count,),) in zip(contract_tables, counts):
        assert got[key] == int(count), table
