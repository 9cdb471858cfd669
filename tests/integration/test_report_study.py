"""The report's study rules through the real CLI (bubblewrap oracles, chDB, the Avro log): the baseline is never
guessed, study files register families, and the canary proof searches the run set for its pack's
secrets — a planted leak makes it fail."""

from __future__ import annotations

import json

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.pipeline.report_inputs import find_secrets
from membench.bus.attempts import read_log
from tests.conftest import run_cli, run_cli_inprocess
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def b1_b5(tmp_path_factory):
    """smoke under B1 and B5 (neither B0 nor no_memory), seed 1, compared against B1 by --baseline."""
    home = tmp_path_factory.mktemp("study") / "home"
    run_cli("run", "smoke", "--conditions", "B1,B5", "--seeds", "1", "--baseline", "B1", "--run-set", "b1b5",
            home=home, check=True)
    return home


@pytest.fixture(scope="module")
def currency_pack(tmp_path_factory):
    """The smoke pack cut to its smoke-currency sequence, as a directory (not a built-in pack)."""
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def _report(home, run_set="b1b5"):
    return json.loads((home / "runs" / run_set / "report.json").read_text())


def test_run_without_a_baseline_is_refused_before_anything_runs(tmp_path):
    home = tmp_path / "home"
    proc = run_cli_inprocess("run", "smoke", "--conditions", "B1,B5", "--seeds", "1", home=home)
    assert proc.returncode == 2, proc.stderr
    assert "conditions (B1, B5) include neither B0 nor no_memory" in proc.stderr
    assert "--baseline" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (home / "runs").exists()


def test_report_refuses_an_ambiguous_or_unknown_baseline(b1_b5):
    assert _report(b1_b5)["comparisons"]["baseline"] == "B1"  # run --baseline B1
    ambiguous = run_cli("report", "b1b5", home=b1_b5)
    assert ambiguous.returncode == 2
    assert "conditions (B1, B5) include neither B0 nor no_memory" in ambiguous.stderr
    unknown = run_cli("report", "b1b5", "--baseline", "B0", home=b1_b5)
    assert unknown.returncode == 2 and "--baseline: condition 'B0' is not in the run set (its conditions: B1, B5)" \
        in unknown.stderr
    ok = run_cli("report", "b1b5", "--baseline", "B5", "--json", home=b1_b5, check=True)
    report = json.loads(ok.stdout)
    assert report["comparisons"]["baseline"] == "B5"
    assert [(c["a"], c["b"]) for c in report["comparisons"]["comparisons"]] == [("B1", "B5")]
    assert report["families"]["baseline_source"] == "--baseline"


def test_a_resumed_run_whose_run_set_leaves_the_baseline_open_records_the_run_but_not_the_report(b1_b5):
    root = b1_b5 / "runs" / "b1b5" / "log_root.json"
    report_file = b1_b5 / "runs" / "b1b5" / "report.json"
    before, report_before = root.stat().st_mtime_ns, report_file.read_bytes()
    proc = run_cli("run", "smoke", "--conditions", "B5", "--seeds", "1", "--run-set", "b1b5", home=b1_b5)
    assert proc.returncode == 2
    assert "conditions (B1, B5) include neither B0 nor no_memory" in proc.stderr
    assert "the run set is recorded, rebuild its report with `membench report b1b5`" in proc.stderr
    assert root.stat().st_mtime_ns > before  # the log root was written all the same
    assert report_file.read_bytes() == report_before  # the earlier report is left as it was


def test_study_file_registers_families_and_a_bad_one_names_file_and_field(b1_b5, tmp_path):
    study = tmp_path / "study.json"
    study.write_text(json.dumps({"baseline": "B1", "families": [
        {"name": "A", "role": "primary", "comparisons": [["B5", "B1"], ["B4", "B1"]], "tests": ["clustered"]},
        {"name": "B", "role": "sensitivity", "comparisons": [["B1", "B5"]], "tests": ["mcnemar", "per_seed"]}]}))
    report = json.loads(run_cli("report", "b1b5", "--study", str(study), "--json", home=b1_b5, check=True).stdout)
    fams = report["families"]
    assert fams["study"] == "study.json" and fams["baseline"] == "B1"
    a, b = fams["families"]
    assert (a["name"], a["role"], a["family_size"], b["role"]) == ("A", "primary", 2, "sensitivity")
    assert a["comparisons"][1]["available"] is False  # B4 did not run: its slot stays at p = 1
    unavailable = a["comparisons"][1]["tests"]["clustered"]
    assert (unavailable["p"], unavailable["p_holm"]) == (1.0, 1.0)  # raw p too, as the paper writes it
    assert a["comparisons"][0]["tests"]["clustered"]["p_holm"] == min(1.0, 2 * a["comparisons"][0]["tests"]["clustered"]["p"])
    assert set(b["comparisons"][0]["tests"]) == {"mcnemar"} and set(b["comparisons"][0]["per_seed"]) == {"1"}
    study.write_text(json.dumps({"families": [{"name": "A", "role": "main", "comparisons": [["B5", "B1"]]}]}))
    bad = run_cli("report", "b1b5", "--study", str(study), home=b1_b5)
    assert bad.returncode == 2
    assert "--study: study.json: field 'families[0].role': expected one of primary, sensitivity" in bad.stderr


def test_report_parts_outcome_matrix_provenance_cost_admission(b1_b5):
    report = _report(b1_b5)
    matrix = report["outcome_matrix"]
    assert matrix["seeds"] == ["1"] and len(matrix["traps"]) == 3
    assert set(matrix["conditions"]) == {"B1", "B5"}
    passed = {c["condition"]: c["passed"] for c in report["conditions"]}
    for condition, traps in matrix["conditions"].items():
        assert sum(v == "pass" for t in traps.values() for v in t.values()) == passed[condition]
    prov = report["provenance"]
    assert prov["agents"] == ["scripted:memory-literal"] and prov["seeds"] == [1] and prov["runs"] == 6
    assert prov["conditions"] == ["B1", "B5"] and len(prov["code_digests"]) == 1 and prov["models"] == []
    assert report["cost_usd"]["status"] == "no_model_calls"  # scripted agents call no model
    assert report["admission"] == {"status": "not_validated", "source": None, "authored": None, "valid": None,
                                   "admitted": None}
    md = (b1_b5 / "runs" / "b1b5" / "report.md").read_text()
    assert "## Outcome matrix" in md and "## Canary proof" in md and "not validated" in md


def test_validate_records_the_funnel_and_the_report_shows_it(b1_b5, tmp_path):
    run_cli("validate", "smoke", home=b1_b5, check=True)
    digest = _report(b1_b5)["inputs"]["pack_digest"]
    assert (b1_b5 / "validations" / f"{digest}.json").exists()  # the finalized pack the run used
    out = tmp_path / "rebuilt"
    report = json.loads(run_cli("report", "b1b5", "--baseline", "B1", "--json", "--output", str(out), home=b1_b5,
                                check=True).stdout)
    assert report["admission"] == {"status": "validated", "source": f"validations/{digest}.json", "authored": 3,
                                   "valid": 3, "admitted": 3}
    assert "3 authored → 3 valid → 3 admitted" in (out / "report.md").read_text()
    assert json.loads((out / "report.json").read_text()) == report


def test_canary_proof_passes_and_a_planted_leak_fails(b1_b5):
    proof = _report(b1_b5)["canary"]
    assert proof["status"] == "pass" and proof["secrets"] == 3 and proof["leaks"] == 0
    assert proof["searched"]["agent_visible_events"] > 0 and proof["own_trap_hits"] > 0
    assert proof["searched"]["reports"] == ["report.json", "report.md", "report.html"]
    digest = _report(b1_b5)["inputs"]["pack_digest"]
    secrets, label, reason = find_secrets(b1_b5, [digest], None)
    assert reason == "" and len(secrets) == 3 and label.startswith("smoke-")
    report_text = "".join((b1_b5 / "runs" / "b1b5" / n).read_text() for n in ("report.json", "report.md", "report.html"))
    assert not any(s.value in report_text for s in secrets)
    # plant one trap's secret in an agent-visible event of another trap's run
    victim, other = secrets[0], next(s for s in secrets if s.trap != secrets[0].trap)
    from membench.warehouse.client import connect

    warehouse = connect(f"chdb://{b1_b5 / 'warehouse'}")
    try:
        warehouse.command(
            "INSERT INTO trajectory_events SELECT * REPLACE (generateUUIDv4() AS event_id, "
            f"concat(payload, ' {victim.value}') AS payload) FROM trajectory_events "
            f"WHERE run_set = 'b1b5' AND visibility = 'agent' AND kind = 'Turn' AND unit_id LIKE '%/{other.trap}/%' "
            "LIMIT 1")
    finally:
        warehouse.close()
    proc = run_cli("report", "b1b5", "--baseline", "B1", "--allow-mismatch", "--json", home=b1_b5, check=True)
    leaked = json.loads(proc.stdout)["canary"]
    assert leaked["status"] == "fail" and leaked["leaks"] == 1
    (hit,) = leaked["hits"]
    assert (hit["secret"], hit["trap"], hit["run_trap"]) == (victim.name, victim.trap, other.trap)
    assert hit["where"].startswith("event ") and "(Turn)" in hit["where"]
    assert victim.value not in proc.stdout  # the proof names the secret, never its value


def test_canary_not_run_without_the_pack(b1_b5, tmp_path):
    """A home without the finalized pack: the proof says why it did not run, never pass."""
    elsewhere = tmp_path / "empty"
    (elsewhere / "packs").mkdir(parents=True)
    secrets, _, reason = find_secrets(elsewhere, [_report(b1_b5)["inputs"]["pack_digest"]], None)
    assert secrets is None and "no finalized pack with digest" in reason


def test_canary_searches_a_scored_diff_stored_as_a_blob(b1_b5):
    """A diff over the inline limit is only a digest in its PatchProduced and a blob in
    runs/<run set>/blobs: a secret of another trap planted there is found by `membench report`."""
    import hashlib

    from membench.bus.blobs import put_blob
    from membench.warehouse.client import connect

    digest = _report(b1_b5)["inputs"]["pack_digest"]
    secrets, _, _ = find_secrets(b1_b5, [digest], None)
    victim, other = secrets[0], next(s for s in secrets if s.trap != secrets[0].trap)
    blob = ("+# padding\n" * 8000 + f"+LEAK = '{victim.value}'\n").encode()
    sha = put_blob(b1_b5 / "runs" / "b1b5" / "blobs", blob)
    assert sha == hashlib.sha256(blob).hexdigest()
    warehouse = connect(f"chdb://{b1_b5 / 'warehouse'}")
    try:
        (row,) = warehouse.query_dicts(
            "SELECT payload FROM trajectory_events WHERE run_set = 'b1b5' AND kind = 'PatchProduced' "
            f"AND unit_id LIKE '%/{other.trap}/%' ORDER BY seq LIMIT 1")
        payload = json.loads(row["payload"])
        payload.update(production_diff=None, production_diff_sha256=sha)
        literal = json.dumps(payload).replace("\\", "\\\\").replace("'", "\\'")
        warehouse.command(
            f"INSERT INTO trajectory_events SELECT * REPLACE (generateUUIDv4() AS event_id, '{literal}' AS payload) "
            "FROM trajectory_events WHERE run_set = 'b1b5' AND kind = 'PatchProduced' "
            f"AND unit_id LIKE '%/{other.trap}/%' ORDER BY seq LIMIT 1")
    finally:
        warehouse.close()
    proc = run_cli("report", "b1b5", "--baseline", "B1", "--allow-mismatch", "--json", home=b1_b5, check=True)
    proof = json.loads(proc.stdout)["canary"]
    assert proof["status"] == "fail" and proof["searched"]["blobs"] == 1 and proof["searched"]["blobs_missing"] == 0
    (hit,) = [h for h in proof["hits"] if "blob" in h["where"]]
    assert (hit["secret"], hit["trap"], hit["run_trap"]) == (victim.name, victim.trap, other.trap)
    assert f"(PatchProduced production_diff blob {sha[:12]})" in hit["where"]
    assert victim.value not in proc.stdout


def test_canary_not_run_on_a_kafka_report_says_why_in_one_line(b1_b5, tmp_path):
    """A report built for a Kafka bus on a machine that has not the finalized pack: not_run, and the
    report says why (the runners hold the pack) in one line, in report.json and report.md."""
    elsewhere = tmp_path / "reporter" / "home"
    elsewhere.mkdir(parents=True)
    out = tmp_path / "out"
    proc = run_cli("report", "b1b5", "--baseline", "B1", "--allow-mismatch", "--json", "--output", str(out), "--bus",
                   "kafka://127.0.0.1:9092/canary-reason", "--warehouse", f"chdb://{b1_b5 / 'warehouse'}",
                   home=elsewhere, check=True)
    proof = json.loads(proc.stdout)["canary"]
    assert proof["status"] == "not_run" and proof["searched"] is None
    reason = proof["reason"]
    assert "\n" not in reason and "no finalized pack with digest" in reason and "on a Kafka bus" in reason
    md = (out / "report.md").read_text()
    assert f"**NOT_RUN** — {reason}\n" in md


def test_usd_cost_from_model_calls_and_the_canary_of_a_pack_given_by_path(tmp_path, bwrap_sandbox, currency_pack):
    """The built-in loop against the local scripted upstream, priced by a --model-prices table: the
    report's USD is the sum of the log's ModelCall cost_usd; the pack is a directory, so `run` knows
    its skeleton and `report` needs --pack for the canary proof."""
    home = tmp_path / "home"
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"local-model": {"input": 1.0, "cached_input": 0.5, "output": 2.0}}}))
    with ScriptedUpstream(script_from_pack(currency_pack)) as upstream:
        run_cli("run", str(currency_pack), "--agent", "openai:local-model", "--conditions", "B5", "--seeds", "1",
                "--run-set", "priced", "--workers", "1", "--model-base-url", upstream.base_url, "--model-prices",
                str(prices), home=home, check=True)
    calls = [e.payload for e, _ in read_log(home / "runs" / "priced" / "events.avro") if e.kind == "ModelCall"]
    expected = sum(c["cost_usd"] for c in calls)
    report = _report(home, "priced")
    cost = report["cost_usd"]
    assert calls and expected > 0 and all(c["price"] == "local-model" for c in calls)
    assert (cost["status"], cost["model_calls"], cost["priced_calls"]) == ("recorded", len(calls), len(calls))
    assert cost["cost_usd"] == pytest.approx(expected)
    b5 = cost["conditions"]["B5"]
    (condition,) = report["conditions"]
    assert b5["successes"] == condition["passed"] == 1
    assert b5["cost_per_success_usd"] == pytest.approx(expected / condition["passed"])
    assert report["provenance"]["agents"] == ["openai:local-model"] and report["provenance"]["agent_kinds"] != ["scripted"]
    assert report["canary"]["status"] == "pass" and report["canary"]["secrets"] == 1
    without = json.loads(run_cli("report", "priced", "--json", home=home, check=True).stdout)["canary"]
    assert without["status"] == "not_run" and "give it with --pack" in without["reason"]
    given = json.loads(run_cli("report", "priced", "--pack", str(currency_pack), "--json", home=home,
                               check=True).stdout)["canary"]
    assert given["status"] == "pass" and given["leaks"] == 0 and given["own_trap_hits"] > 0
