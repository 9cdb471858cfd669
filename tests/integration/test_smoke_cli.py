"""The smoke run through the real CLI: bubblewrap oracles, chDB warehouse, the Avro log."""

from __future__ import annotations

import json
import shutil

import fastavro
import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration


def _report(home, run_set):
    return json.loads((home / "runs" / run_set / "report.json").read_text())


def _agent_report(results, agent):
    _, run_set, home = results[agent]
    return _report(home, run_set)




@pytest.fixture(scope="module")
def smoke(tmp_path_factory, smoke_run_set):
    """The three scripted agents on the smoke grid: memory-literal is the session's shared run set
    (read-only); refsol and null run here, into a home of this module. agent -> (stdout, run set, home)."""
    home = tmp_path_factory.mktemp("smoke") / "home"
    results = {"scripted:memory-literal": (smoke_run_set.stdout, smoke_run_set.run_set, smoke_run_set.home)}
    for agent in ("scripted:refsol", "scripted:null"):
        proc = run_cli("run", "smoke", "--conditions", "B0,B5", "--seeds", "1,2", "--agent", agent,
                       home=home, check=True)
        run_set = json.loads(_latest_report(home).read_text())["run_set"]
        results[agent] = (proc.stdout, run_set, home)
    return results


def mb(home, *args, **kwargs):
    return run_cli(*args, home=home, **kwargs)


def _latest_report(home):
    return max((home / "runs").glob("*/report.json"), key=lambda p: p.stat().st_mtime)


def _by_condition(report):
    return {c["condition"]: c for c in report["conditions"]}


def test_scripted_agents_bracket_the_memory_effect(smoke):
    results = smoke
    literal = _by_condition(_agent_report(results, "scripted:memory-literal"))
    refsol = _by_condition(_agent_report(results, "scripted:refsol"))
    null = _by_condition(_agent_report(results, "scripted:null"))
    for condition in ("B0", "B5"):
        assert refsol[condition]["passed"] == refsol[condition]["cells"] == 6
        assert null[condition]["passed"] == 0 and null[condition]["cells"] == 6
    assert literal["B5"]["passed"] > literal["B0"]["passed"]
    assert literal["B0"]["passed"] == 0 and literal["B5"]["pass_rate"] == 1.0
    # the printed table shows the same numbers
    out = results["scripted:memory-literal"][0]
    assert "B0" in out and "B5" in out and "100.0%" in out


def test_report_contract(smoke):
    _, _, home = smoke["scripted:memory-literal"]
    report = _agent_report(smoke, "scripted:memory-literal")
    assert set(report) >= {"run_set", "suite", "agent", "conditions", "inputs"}
    assert report["suite"] == "smoke" and report["agent"] == "scripted:memory-literal"
    for entry in report["conditions"]:
        assert set(entry) >= {"condition", "cells", "passed", "pass_rate", "ci95", "excluded"}
        low, high = entry["ci95"]
        assert 0.0 <= low <= entry["pass_rate"] <= high <= 1.0
    assert len(report["inputs"]["pack_digest"]) == 64
    assert (home / "runs" / report["run_set"] / "report.md").read_text().startswith("# membench report")
    # the written report has exactly the declared shape (membench/reports/model.py), key for key
    from membench.reports.model import REPORT_SCHEMA_VERSION, Report, from_json, to_json

    assert to_json(from_json(Report, report)) == report
    assert report["schema_version"] == REPORT_SCHEMA_VERSION  # the contract version it was written under
    # the renderers take the typed report: report.json read back renders the files the run wrote, byte for byte
    from membench.reports.html import render_html
    from membench.reports.markdown import render_markdown

    written = home / "runs" / report["run_set"]
    read_back = from_json(Report, report)
    assert render_markdown(read_back) == (written / "report.md").read_text(encoding="utf-8")
    assert render_html(read_back) == (written / "report.html").read_text(encoding="utf-8")


def test_log_is_plain_avro_and_matches_the_warehouse(smoke):
    _, run_set, home = smoke["scripted:memory-literal"]
    with open(home / "runs" / run_set / "events.avro", "rb") as handle:
        records = list(fastavro.reader(handle))
    counted = mb(home, "sql", f"SELECT count() FROM trajectory_events WHERE run_set = '{run_set}'", check=True)
    assert int(counted.stdout.strip()) == len(records)
    report = _report(home, run_set)
    assert report["inputs"]["events"] == len(records)
    # per run: seq 0..n-1 without gaps
    seqs = {}
    for r in records:
        seqs.setdefault(r["run_id"], []).append(r["seq"])
    assert all(s == list(range(len(s))) for s in seqs.values())


def test_rerun_is_resumable_and_adds_no_rows(smoke):
    _, _, home = smoke["scripted:refsol"]  # this module's home: the shared one is read-only
    total = mb(home, "sql", "SELECT count() FROM trajectory_events", check=True).stdout.strip()
    again = mb(home, "run", "smoke", "--conditions", "B0,B5", "--seeds", "1,2", "--agent", "scripted:refsol",
               check=True)
    assert "0 to run" in again.stderr.replace("\n", " ")
    assert mb(home, "sql", "SELECT count() FROM trajectory_events", check=True).stdout.strip() == total


def test_sql_prints_tsv_without_header(smoke):
    _, _, home = smoke["scripted:memory-literal"]
    out = mb(home, "sql", "SELECT 'a', 1 UNION ALL SELECT 'b', 2 ORDER BY 1", check=True).stdout
    assert out == "a\t1\nb\t2\n"


def test_replay_verify_passes_on_an_intact_log(smoke):
    _, run_set, home = smoke["scripted:memory-literal"]
    log = home / "runs" / run_set / "events.avro"
    proc = mb(home, "replay", str(log), "--verify")
    assert proc.returncode == 0, proc.stderr
    assert "all derived events agree" in proc.stdout


def test_replay_names_run_and_seq_of_a_flipped_payload_byte(smoke, tmp_path):
    _, run_set, home = smoke["scripted:memory-literal"]
    log = home / "runs" / run_set / "events.avro"
    data = bytearray(log.read_bytes())
    at = data.find(b"build_headers")  # inside the first session's instruction payload
    data[at] ^= 0x20  # 'b' -> 'B': still valid UTF-8, so it decodes and must fail the chain
    tampered = tmp_path / "tampered.avro"
    tampered.write_bytes(bytes(data))
    with open(tampered, "rb") as handle:
        victim = next(r for r in fastavro.reader(handle) if "Build_headers" in json.dumps(r["payload"]))
    proc = mb(home, "replay", str(tampered), "--verify")
    assert proc.returncode == 1
    assert f"run {victim['run_id']} seq {victim['seq']}" in proc.stderr


def test_replay_names_run_and_seq_of_a_deleted_event(smoke, tmp_path):
    _, run_set, home = smoke["scripted:memory-literal"]
    log = home / "runs" / run_set / "events.avro"
    with open(log, "rb") as handle:
        reader = fastavro.reader(handle)
        schema = reader.writer_schema
        records = list(reader)
    victim = records[5]
    kept = [r for r in records if r is not victim]
    shorter = tmp_path / "shorter.avro"
    with open(shorter, "wb") as handle:
        fastavro.writer(handle, schema, kept)
    proc = mb(home, "replay", str(shorter), "--verify")
    assert proc.returncode == 1
    assert f"run {victim['run_id']} seq {victim['seq'] + 1}" in proc.stderr


@pytest.mark.parametrize("args,needle", [
    (("run", "no-such-pack"), "unknown pack 'no-such-pack'"),
    (("run", "smoke", "--conditions", "B0,B99"), "unknown condition 'B99'"),
    (("run", "smoke", "--agent", "scripted:oracle-peeker"), "unknown agent 'scripted:oracle-peeker'"),
    (("run", "smoke", "--seeds", "1,x"), "'x' is not an integer"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli_inproc, home, args, needle):
    proc = cli_inproc(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not home.exists()


def test_malformed_manifest_names_file_sequence_and_field(cli, home, tmp_path):
    from tests.conftest import REPO

    pack = tmp_path / "broken"
    shutil.copytree(REPO / "fixtures" / "smoke", pack)
    manifest = json.loads((pack / "manifest.json").read_text())
    del manifest["sequences"][1]["sessions"][0]["oracle_id"]
    (pack / "manifest.json").write_text(json.dumps(manifest))
    proc = cli("run", str(pack))
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "manifest.json" in line and "smoke-currency" in line and "'oracle_id'" in line
    assert len(line.splitlines()) == 1
    assert not home.exists()
