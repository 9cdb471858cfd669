"""`membench rederive RUN_SET|--all`: derived rows corrupted or deleted in a real chDB
warehouse are rebuilt from trajectory_events equal to what the embedded path wrote; other run sets
are untouched; a bad RUN_SET is one line, exit 2; nothing is replaced when the raw log cannot be
re-derived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from membench.audit.rederive import derived_tables
from membench.schemas.codec import encode_datum
from membench.schemas.registry import default_registry
from tests.audit.test_log_root import rechain
from tests.processors.test_verdicts import build_run

SCHEMA = default_registry().latest("event")
RUN_SETS = ("rs-a", "rs-b")


def _snapshot(warehouse, run_set):
    return {table: warehouse.query_rows(f"SELECT * FROM {table} WHERE run_set = {{rs:String}} ORDER BY tuple(*)",
                                        {"rs": run_set}) for table in derived_tables()}


@pytest.fixture()
def home(tmp_path):
    """Two run sets (five and four runs) through the embedded pipeline into a real chDB warehouse;
    the derived rows it wrote, per run set."""
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.warehouse.client import connect

    dsn = f"chdb://{tmp_path / 'wh'}"
    warehouse = connect(dsn)
    for n, run_set in zip((5, 4), RUN_SETS):
        pipeline = EmbeddedPipeline(tmp_path / run_set / "events.avro", warehouse)
        for i in range(n):
            outcomes = ("pass", "fail") if i % 2 else ("fail", "pass", "pass")
            for event in rechain(build_run(outcomes, run_id=f"{run_set}-run-{i}"), run_set=run_set):
                pipeline.publish(event, encode_datum(SCHEMA, event.to_record()))
        pipeline.close()
    written = {run_set: _snapshot(warehouse, run_set) for run_set in RUN_SETS}
    warehouse.close()
    assert all(written[rs]["run_results"] and written[rs]["failures"] for rs in RUN_SETS)
    return {"dsn": dsn, "written": written, "env": {**os.environ, "MEMBENCH_HOME": str(tmp_path / "home")}}


def _corrupt(dsn, run_set):
    from membench.warehouse.client import connect

    with connect(dsn) as warehouse:
        sync = {"mutations_sync": 2}
        warehouse.command(f"ALTER TABLE session_results UPDATE passed = NOT passed WHERE run_set = '{run_set}'", sync)
        warehouse.command(f"ALTER TABLE failures DELETE WHERE run_set = '{run_set}' AND run_id LIKE '%-run-1'", sync)
        warehouse.command(f"ALTER TABLE run_results DELETE WHERE run_set = '{run_set}'", sync)
        warehouse.command(f"ALTER TABLE hygiene_observations UPDATE numerator = numerator + 7 "
                          f"WHERE run_set = '{run_set}'", sync)
        assert _snapshot(warehouse, run_set) != {}


def _tables(dsn):
    from membench.warehouse.client import connect

    with connect(dsn) as warehouse:
        return {run_set: _snapshot(warehouse, run_set) for run_set in RUN_SETS}


def _cli(home, *args):
    return subprocess.run([sys.executable, "-m", "membench", "rederive", *args, "--warehouse", home["dsn"]],
                          capture_output=True, text=True, env=home["env"])


def test_rederive_rebuilds_corrupted_and_deleted_rows_of_one_run_set(home):
    _corrupt(home["dsn"], "rs-a")
    _corrupt(home["dsn"], "rs-b")
    assert _tables(home["dsn"])["rs-a"] != home["written"]["rs-a"]
    proc = _cli(home, "rs-a")
    assert proc.returncode == 0, proc.stderr
    assert "run set rs-a: 5 runs" in proc.stdout and "rederive rs-a: 5/5 runs" in proc.stderr
    now = _tables(home["dsn"])
    assert now["rs-a"] == home["written"]["rs-a"]
    assert now["rs-b"] != home["written"]["rs-b"]  # another run set is not touched


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_rederive_all_over_two_run_sets(home, jobs):
    for run_set in RUN_SETS:
        _corrupt(home["dsn"], run_set)
    proc = _cli(home, "--all", "--jobs", jobs, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(r["run_set"], r["runs"]) for r in out["run_sets"]] == [("rs-a", 5), ("rs-b", 4)]
    assert _tables(home["dsn"]) == home["written"]
    from membench.warehouse.client import connect

    with connect(home["dsn"]) as warehouse:  # no staging table is left behind
        assert not warehouse.query_rows("SELECT name FROM system.tables WHERE name LIKE 'rederive_%'")


@pytest.mark.parametrize("args, needle", [(["no-such-set"], "no-such-set"), (["../x"], "../x"),
                                          ([], "--all"), (["rs-a", "--all"], "--all")])
def test_a_bad_run_set_is_one_line_exit_2(home, args, needle):
    proc = _cli(home, *args)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _tables(home["dsn"]) == home["written"]


def test_an_undecodable_raw_row_replaces_nothing(home):
    from membench.warehouse.client import connect

    _corrupt(home["dsn"], "rs-b")
    with connect(home["dsn"]) as warehouse:
        before = _snapshot(warehouse, "rs-b")
        warehouse.command("ALTER TABLE trajectory_events UPDATE datum = 'garbage' WHERE run_set = 'rs-b' AND seq = 3",
                          {"mutations_sync": 2})
    proc = _cli(home, "rs-b")
    assert proc.returncode == 1 and "does not decode" in proc.stderr and "nothing of run set 'rs-b'" in proc.stderr
    assert _tables(home["dsn"])["rs-b"] == before


def test_log_root_json_is_refreshed_only_while_the_raw_log_is_the_recorded_one(home):
    from membench.audit.log_root_record import check_warehouse, read_record, record_path, warehouse_state, write_record
    from membench.warehouse.client import connect

    runs_dir = Path(home["env"]["MEMBENCH_HOME"]) / "runs"
    path = record_path(runs_dir, "rs-a")
    with connect(home["dsn"]) as warehouse:
        write_record(path, warehouse_state(warehouse, "rs-a").record(None, home["dsn"]))
        # a derived table changed by hand: the file no longer matches the rows, so a report would refuse
        warehouse.command("ALTER TABLE failures DELETE WHERE run_set = 'rs-a'", {"mutations_sync": 2})
        assert check_warehouse(warehouse_state(warehouse, "rs-a"), read_record(path))
    proc = _cli(home, "rs-a")
    assert proc.returncode == 0 and "derived row digests recorded anew" in proc.stdout, proc.stdout + proc.stderr
    with connect(home["dsn"]) as warehouse:
        assert check_warehouse(warehouse_state(warehouse, "rs-a"), read_record(path)) == []
        before = path.read_text()
        warehouse.command("ALTER TABLE trajectory_events UPDATE producer = 'edited' WHERE run_set = 'rs-a' AND seq = 2",
                          {"mutations_sync": 2})
    proc = _cli(home, "rs-a")
    assert proc.returncode == 0 and "not rewritten: the raw log in the warehouse is not the one it records" in \
        proc.stdout, proc.stdout
    assert path.read_text() == before
