"""SWE-bench predictions scored end to end through the real CLI (`membench score`, bwrap, chDB), and
`membench report --format swebench` checked against the warehouse; malformed SWE-bench files are
refused before anything is written."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.packs.test_remem_import import LATER

TASKS = ("stale-api", "stale-api-2", "stale-api-3", "stale-api-4")
MODEL = "org/model-7b"


def patch(new: str, old: str = "/v1/items") -> str:
    return (f"--- a/api/client.py\n+++ b/api/client.py\n@@ -1,2 +1,2 @@\n def endpoint():\n"
            f"-    return '{old}'\n+    return '{new}'\n")


def write_pack_source(path: Path) -> Path:
    """LATER's one task four times (ids TASKS): an imported pack whose baseline is no_memory."""
    data = copy.deepcopy(LATER)
    task = data["tasks"][0]
    data["tasks"] = [{**copy.deepcopy(task), "id": tid} for tid in TASKS]
    path.write_text(json.dumps(data))
    return path


def swe(instance_id: str, model_patch: str | None, **extra) -> dict:
    return {"instance_id": instance_id, "model_name_or_path": MODEL, "model_patch": model_patch, **extra}


# no condition field: the pack's baseline (no_memory); seed 1
PREDICTIONS = [
    swe("stale-api", patch("/v2/items")),                      # resolved
    swe("stale-api-2", patch("/v3/items")),                    # unresolved
    swe("stale-api-3", ""),                                    # empty patch
    swe("stale-api-4", patch("/v2/items", old="/v9/items")),   # does not apply: error
    swe("stale-api", patch("/v2/items"), condition="B5"),
    swe("stale-api-2", None, condition="B5"),
]


def sql(home: Path, query: str) -> list[list[str]]:
    out = run_cli("sql", query, home=home, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


@pytest.fixture(scope="module")
def scored(tmp_path_factory, bwrap_sandbox):
    root = tmp_path_factory.mktemp("swebench")
    home = root / "membench-home"
    run_cli("import", "remem", str(write_pack_source(root / "tasks.json")), str(root / "pack"), home=home, check=True)
    predictions = root / "preds.jsonl"
    predictions.write_text("".join(json.dumps(p) + "\n" for p in PREDICTIONS))
    proc = run_cli("score", str(root / "pack"), "--predictions", str(predictions), "--run-set", "swe", home=home,
                   check=True)
    return home, root, proc


@pytest.mark.integration
def test_swebench_predictions_are_scored_as_the_mapping_says(scored):
    home, _, _ = scored
    rows = sql(home, "SELECT task, condition, seed, agent, status FROM run_results WHERE run_set = 'swe' "
                     "ORDER BY condition, task")
    assert rows == [["stale-api", "B5", "1", "predictions:org-model-7b", "completed"],
                    ["stale-api-2", "B5", "1", "predictions:org-model-7b", "completed"]] + \
        [[t, "no_memory", "1", "predictions:org-model-7b", "completed"] for t in TASKS]
    passed = sql(home, "SELECT condition, task FROM run_results WHERE run_set = 'swe' AND scored_passed "
                       "ORDER BY condition, task")
    assert passed == [["B5", "stale-api"], ["no_memory", "stale-api"]]


@pytest.mark.integration
def test_report_format_swebench_per_condition_agrees_with_the_warehouse(scored):
    home, _, _ = scored
    proc = run_cli("report", "swe", "--format", "swebench", home=home, check=True)
    out = json.loads(proc.stdout)
    assert out["run_set"] == "swe" and list(out["reports"]) == ["B5", "no_memory"]
    base, b5 = out["reports"]["no_memory"], out["reports"]["B5"]
    assert (base["resolved_ids"], base["unresolved_ids"], base["empty_patch_ids"], base["error_ids"]) == \
        (["stale-api"], ["stale-api-2"], ["stale-api-3"], ["stale-api-4"])
    assert {k: base[k] for k in ("total_instances", "submitted_instances", "completed_instances",
                                 "resolved_instances", "unresolved_instances", "empty_patch_instances",
                                 "error_instances")} == \
        {"total_instances": 4, "submitted_instances": 4, "completed_instances": 2, "resolved_instances": 1,
         "unresolved_instances": 1, "empty_patch_instances": 1, "error_instances": 1}
    assert base["schema_version"] == 2 and base["membench"] == {
        "run_set": "swe", "condition": "no_memory", "seed": 1, "agent": "predictions:org-model-7b"}
    assert (b5["resolved_ids"], b5["empty_patch_ids"], b5["incomplete_ids"], b5["total_instances"]) == \
        (["stale-api"], ["stale-api-2"], ["stale-api-3", "stale-api-4"], 4)
    for condition, summary in out["reports"].items():
        where = f"run_set = 'swe' AND condition = '{condition}'"
        resolved = [r[0] for r in sql(home, f"SELECT task FROM run_results WHERE {where} AND scored_passed "
                                            "AND status = 'completed' AND NOT excluded ORDER BY task")]
        submitted = [r[0] for r in sql(home, f"SELECT DISTINCT task FROM run_results WHERE {where} ORDER BY task")]
        empty = [r[0] for r in sql(home, f"SELECT DISTINCT JSONExtractString(e.payload, 'task') FROM "
                                         "trajectory_events e WHERE e.run_set = 'swe' AND e.kind = 'RunStarted' AND "
                                         f"JSONExtractString(e.payload, 'condition') = '{condition}' AND e.run_id IN "
                                         "(SELECT run_id FROM trajectory_events WHERE run_set = 'swe' AND kind = "
                                         "'PatchProduced' AND length(JSONExtractArrayRaw(payload, 'files')) = 0) "
                                         "AND e.run_id NOT IN (SELECT run_id FROM trajectory_events WHERE "
                                         "run_set = 'swe' AND kind = 'ToolResult' AND "
                                         "JSONExtractInt(payload, 'exit_code') != 0) ORDER BY 1")]
        assert summary["resolved_ids"] == resolved and summary["submitted_ids"] == submitted
        assert summary["empty_patch_ids"] == empty
        assert sorted(summary["resolved_ids"] + summary["unresolved_ids"] + summary["empty_patch_ids"]
                      + summary["error_ids"]) == submitted  # a partition of the submitted ids


@pytest.mark.integration
def test_report_format_swebench_one_condition_to_a_file(scored):
    home, root, _ = scored
    out = root / "b5.json"
    proc = run_cli("report", "swe", "--format", "swebench", "--condition", "B5", "--output", str(out), home=home,
                   check=True)
    assert proc.stdout == ""
    summary = json.loads(out.read_text())
    assert summary["resolved_ids"] == ["stale-api"] and summary["membench"]["condition"] == "B5"
    missing = run_cli("report", "swe", "--format", "swebench", "--condition", "B0", home=home)
    assert missing.returncode == 2 and "has no runs of B0 (it has B5/1, no_memory/1)" in missing.stderr


def test_malformed_swebench_predictions_write_nothing(cli, cli_inproc, home, tmp_path):
    source = write_pack_source(tmp_path / "tasks.json")
    cli("import", "remem", str(source), str(tmp_path / "pack"), check=True)
    bad = tmp_path / "preds.jsonl"
    bad.write_text(json.dumps(swe("stale-api", "")) + "\n" + json.dumps({"instance_id": "stale-api-2",
                                                                         "model_patch": ""}) + "\n")
    proc = cli_inproc("score", str(tmp_path / "pack"), "--predictions", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:2: missing required field 'model_name_or_path'" in proc.stderr
    native = tmp_path / "native.jsonl"
    native.write_text(json.dumps({"unit": "stale-api", "condition": "B5", "seed": 1, "patch": ""}) + "\n")
    proc = cli_inproc("score", str(tmp_path / "pack"), "--predictions", str(native), "--condition", "B5")
    assert proc.returncode == 2 and "--condition: applies to SWE-bench records only" in proc.stderr
    proc = cli_inproc("score", str(tmp_path / "pack"), "--predictions", str(native), "--condition", "B77")
    assert proc.returncode == 2 and "--condition: unknown condition 'B77'" in proc.stderr
    assert not (home / "warehouse").exists() and not (home / "runs").exists() and not (home / "packs").exists()


def test_report_format_options_are_checked(cli_inproc):
    proc = cli_inproc("report", "whatever", "--format", "swebench", "--json")
    assert proc.returncode == 2 and "--json" in proc.stderr
    proc = cli_inproc("report", "whatever", "--condition", "B5")
    assert proc.returncode == 2 and "--condition: only with --format swebench" in proc.stderr
