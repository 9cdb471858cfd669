"""The transfer study on the distributed path: `membench transfer` publishing to the real Kafka broker, a
`membench process` worker folding, `membench sink` filling a second chDB warehouse; the transfer
results equal the embedded path's (except wall-clock times), and the report's transfer section
comes from the Kafka-filled warehouse."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_replay_verifies, run_cli
from tests.integration.conftest import copy_home
from tests.integration.kafka_helpers import SINGLE, Worker, consumer_group_caught_up, namespace, require_broker, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

# wall-clock fields: two executions of the same unit differ only here
RESULT_SQL = ("SELECT * EXCEPT (agent_time_ms, user_time_ms, evaluation_time_ms) FROM transfer_results "
              "WHERE run_set = '{rs}' ORDER BY unit_id LIMIT 1 BY derived_id")
DIMENSION_SQL = ("SELECT * FROM transfer_dimensions WHERE run_set = '{rs}' ORDER BY unit_id, dimension "
                 "LIMIT 1 BY derived_id")


def test_transfer_study_through_kafka_equals_the_embedded_path(tmp_path, transfer_study_home):
    require_broker()
    # the embedded path, the reference: the session's shared transfer study (the same finalized study
    # and agent, so the same run set), copied
    home = copy_home(transfer_study_home, tmp_path / "home")
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    other = f"chdb://{tmp_path / 'kafka-warehouse'}"
    args = ("transfer", "transfer-v1", "--agent", "scripted:memory-literal")
    worker = Worker(dsn, home, tmp_path / "worker.log")
    try:
        published = run_cli(*args, "--bus", dsn, home=home, check=True)
        run_set = published.stdout.strip().splitlines()[-1]
        wait_for(lambda: consumer_group_caught_up(SINGLE, f"{ns}.membench.processor", f"{ns}.membench.trajectory"),
                 240, "the processor worker to commit the whole trajectory topic")
    finally:
        worker.stop()
    run_cli("sink", "--bus", dsn, "--warehouse", other, "--until-idle", home=home, check=True)
    assert_replay_verifies(home, dsn, "--warehouse", other)

    def rows(query, warehouse=None):
        extra = ["--warehouse", warehouse] if warehouse else []
        out = run_cli("sql", query.format(rs=run_set), "--format", "JSONEachRow", *extra, home=home, check=True).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    embedded, kafka = rows(RESULT_SQL), rows(RESULT_SQL, other)
    assert len(embedded) == 8 and embedded == kafka
    assert rows(DIMENSION_SQL) == rows(DIMENSION_SQL, other)
    report = json.loads(run_cli("report", run_set, "--json", "--warehouse", other, home=home, check=True).stdout)
    by = {(p["project"], p["condition"]): p for p in report["transfer"]["projects"]}
    for project in ("settle", "jobqueue"):
        assert by[(project, "learned_bank")]["ccpf_micro"] == 1.0
        assert by[(project, "learned_bank")]["ccpf_micro"] > by[(project, "no_memory")]["ccpf_micro"]
    assert {b["bank"]: b["distiller"] for b in report["transfer"]["banks"]} == {
        "learned": "scripted", "ablated": "scripted", "native": None}  # a scripted agent: the scripted distiller
