"""Read-only commands while another process owns the embedded warehouse (chDB has one owner): `sql`,
the exports and `membench.frames` answer from a snapshot rebuilt from the logs, saying so;
`report` refuses with the commands that work. The owner here is a real second process holding
the warehouse, as `membench run` does for a whole grid."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.integration

COUNTS = "SELECT condition, sum(passed), sum(valid) FROM scored_cells WHERE run_set = 'held' GROUP BY condition " \
         "ORDER BY condition"


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A finished run set `held`, then a second process holding its warehouse until the module ends:
    (home, the counts read before, the owner process)."""
    home = tmp_path_factory.mktemp("held") / "home"
    run_cli("run", "smoke", "--conditions", "B0,B5", "--seeds", "1", "--run-set", "held", home=home, check=True)
    before = run_cli("sql", COUNTS, home=home, check=True).stdout
    owner = subprocess.Popen(
        [sys.executable, "-c", "import sys; from membench.warehouse.client import connect; "
         f"w = connect('chdb://{home / 'warehouse'}'); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    assert owner.stdout.readline().strip() == "held"
    yield home, before, owner
    owner.stdin.close()
    owner.wait(timeout=30)
    run_cli("replay", str(home / "runs" / "held" / "events.avro"), "--verify", home=home, check=True)


def cli(held, *args):
    return run_cli(*args, home=held[0])


def test_sql_answers_from_the_logs_while_the_warehouse_is_owned(held):
    _, before, owner = held
    proc = cli(held, "sql", COUNTS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == before  # the same cells as the warehouse itself holds
    assert f"the warehouse is owned by pid {owner.pid}" in proc.stderr
    assert "answered from a snapshot rebuilt from the logs" in proc.stderr and "held (" in proc.stderr
    write = cli(held, "sql", "INSERT INTO run_results SELECT * FROM run_results LIMIT 0", "--allow-write")
    assert write.returncode == 2 and "owned by another process" in write.stderr  # a write never goes to a snapshot


def test_an_export_and_frames_work_while_the_warehouse_is_owned(tmp_path, held):
    home = held[0]
    out = tmp_path / "parquet"
    proc = cli(held, "export", "parquet", "held", str(out))
    assert proc.returncode == 0, proc.stderr
    tables = json.loads((out / "manifest.json").read_text())["tables"]
    assert "answered from a snapshot rebuilt from the logs" in proc.stderr
    assert tables["run_results"]["rows"] == 6 and tables["session_results"]["rows"] == 18  # 6 units × 3 sessions
    frames = subprocess.run(
        [sys.executable, "-W", "always", "-c",
         f"from membench import frames; print(len(frames.runs('held', home=r'{home}')))"],
        capture_output=True, text=True, cwd=str(REPO), timeout=120)
    assert frames.returncode == 0, frames.stderr
    assert frames.stdout.strip() == "6" and "snapshot rebuilt from the logs" in frames.stderr


def test_report_refuses_with_the_commands_that_work(held):
    proc = cli(held, "report", "held")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "owned by another process" in line and "Run `membench report held` again once it has ended" in line
    assert "membench sql" in line and "membench view" in line


def test_a_block_still_being_written_is_left_out(held):
    home, before, _ = held
    path = home / "runs" / "held" / "events.avro"
    size = path.stat().st_size
    try:
        with open(path, "ab") as log:
            log.write(b"\x0c\x80\x10partial")  # a block header and the start of its data: a write in progress
        proc = cli(held, "sql", COUNTS)
    finally:
        with open(path, "r+b") as log:  # the run "finishes" its block: the log is whole again
            log.truncate(size)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == before
    assert "held: read up to its last complete block" in proc.stderr


def test_replay_verify_refuses_with_the_replay_that_works(held):
    """`replay LOG --verify` compares with the warehouse, which the run owns: refused (exit 2) naming
    the replay that works now (the chains, scored diffs and folds, without the warehouse), which does."""
    home = held[0]
    log = home / "runs" / "held" / "events.avro"
    proc = cli(held, "replay", str(log), "--verify")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "owned by another process" in line and "again once it has ended" in line
    works = line.split("meanwhile `")[1].split("`")[0]
    assert works == f"membench replay {log}"
    proc = cli(held, *works.split()[1:])
    assert proc.returncode == 0, proc.stderr
