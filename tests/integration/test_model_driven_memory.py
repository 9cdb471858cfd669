"""The model-driven memory policies end to end: the real CLI runs hygiene-v1 traps under
B3-llm, DF-llm and DF-hybrid-llm with `scripted:memory-literal` (embedded bus, bubblewrap, chDB).
The memory model is `membench.bench.scripted_model_server.ScriptedUpstream`, a local server with scripted
answers (no model API is reachable here), reached from the harness through the real model gateway.

Recorded with --model-record, then replayed with --model-replay and no upstream at all: the same
verdicts. The report says which conditions are model_driven, with the memory model and the sleep and
judge calls' tokens and cost; those tokens are part of the runs' totals. An answer that is not JSON
stores nothing new and is recorded; an unavailable memory model excludes the unit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from tests.integration.sql_batch import sql_batch
from tests.packs.hygiene_helpers import FIXTURES, subset_pack

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]

TRAPS = ["c1-http-partner-key", "c3-taskq-backoff-profile"]
DRIVEN = ["B3-llm", "DF-llm", "DF-hybrid-llm"]
MODEL = "gpt-5-mini"


def _sql(cli, query: str) -> list[list[str]]:
    proc = cli("sql", query)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line.split("\t") for line in proc.stdout.splitlines() if line]


def _sql_many(home: Path, *queries: str) -> list[list[list[str]]]:
    """`_sql` of each query, in one subprocess (tests/integration/sql_batch.py)."""
    return [[line.split("\t") for line in out.splitlines() if line] for out in sql_batch(home, list(queries))]


def _run(cli, pack: Path, run_set: str, conditions: list[str], *model_args: str):
    return cli("run", str(pack), "--conditions", ",".join(conditions), "--seeds", "1",
               "--agent", "scripted:memory-literal", "--run-set", run_set, "--memory-model", MODEL, *model_args,
               timeout=1800)


def test_model_driven_conditions_record_then_replay_with_the_same_verdicts(cli, home: Path, tmp_path: Path) -> None:
    pack = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "hygiene-v1", TRAPS, name="hygiene-v1")
    conditions = ["B0", *DRIVEN]
    with ScriptedUpstream() as upstream:
        proc = _run(cli, pack, "mdrec", conditions, "--model-base-url", upstream.base_url, "--model-record")
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert upstream.requests  # the memory model was asked
    recorded = json.loads((home / "runs" / "mdrec" / "report.json").read_text())
    for entry in recorded["conditions"]:
        assert entry["cells"] == len(TRAPS) and entry["excluded"] == 0, entry

    policies = recorded["provenance"]["memory_policies"]
    assert policies["B0"] == {"policy": "model_free", "memory_model": None, "sleep_calls": 0, "judge_calls": 0,
                              "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    for condition in DRIVEN:
        p = policies[condition]
        assert p["policy"] == "model_driven" and p["memory_model"] == MODEL, p
        assert p["sleep_calls"] > 0 and p["input_tokens"] > 0 and p["output_tokens"] > 0 and p["cost_usd"] > 0, p
    assert policies["B3-llm"]["judge_calls"] == 0 and policies["DF-llm"]["judge_calls"] > 0
    markdown = (home / "runs" / "mdrec" / "report.md").read_text()
    assert f"DF-llm: model_driven ({MODEL}; {policies['DF-llm']['sleep_calls']} sleep + " in markdown
    assert "B0: model_free" in markdown
    assert "model_driven" in (home / "runs" / "mdrec" / "report.html").read_text()

    # the calls, per condition, from the log: sleep/judge purposes, recorded, and counted in the runs' tokens
    calls, totals, starts, writes, usd = _sql_many(
        home,
        "SELECT splitByChar('/', unit_id)[3] AS c, JSONExtractString(payload, 'purpose'), count(), "
        "sum(JSONExtractInt(payload, 'input_tokens')), min(JSONExtractBool(payload, 'recorded')) "
        "FROM trajectory_events WHERE run_set = 'mdrec' AND kind = 'ModelCall' GROUP BY c, 2 ORDER BY c, 2",
        "SELECT condition, sum(input_tokens) FROM run_results WHERE run_set = 'mdrec' GROUP BY condition",
        "SELECT DISTINCT splitByChar('/', unit_id)[3], JSONExtractString(payload, 'memory_model') "
        "FROM trajectory_events WHERE run_set = 'mdrec' AND kind = 'RunStarted'",
        "SELECT DISTINCT splitByChar('/', unit_id)[3] FROM trajectory_events "
        "WHERE run_set = 'mdrec' AND kind = 'MemoryWrite'",
        "SELECT splitByChar('/', unit_id)[3] AS c, sum(ifNull(JSONExtract(payload, 'cost_usd', 'Nullable(Float64)'), 0)) "
        "FROM (SELECT unit_id, run_id, payload FROM trajectory_events WHERE run_set = 'mdrec' AND kind = 'ModelCall' "
        "LIMIT 1 BY event_id) WHERE run_id IN (SELECT run_id FROM scored_cells WHERE run_set = 'mdrec' AND valid) "
        "GROUP BY c ORDER BY c")
    # cost beside the pass rate: the report's USD per cell and per pass are the valid cells' ModelCalls
    for c, total in usd:
        entry = next(e for e in recorded["conditions"] if e["condition"] == c)
        cost = entry["effort"]["cost_usd"]
        assert cost["total"] == pytest.approx(float(total)) and float(total) > 0, (c, cost)
        assert cost["per_cell"] == pytest.approx(float(total) / entry["cells"])
        assert cost["per_pass"] == (pytest.approx(float(total) / entry["passed"]) if entry["passed"] else None)
        assert f"${cost['per_cell']:.4f}" in proc.stdout  # the CLI's cost and reliability table
    assert {c for c, _ in usd} == set(DRIVEN)  # B0 made no model call: its cost is null, shown "—"
    assert next(e for e in recorded["conditions"] if e["condition"] == "B0")["effort"]["cost_usd"] is None
    assert {(c, purpose) for c, purpose, *_ in calls} == {("B3-llm", "sleep"), ("DF-llm", "sleep"), ("DF-llm", "judge"),
                                                          ("DF-hybrid-llm", "sleep"), ("DF-hybrid-llm", "judge")}
    assert all(r == "1" for *_, r in calls)
    sleep_in = {c: 0 for c in DRIVEN}
    for c, _, _, tokens, _ in calls:
        sleep_in[c] += int(tokens)
    totals = dict((c, int(n)) for c, n in totals)
    assert all(totals[c] >= sleep_in[c] > 0 for c in DRIVEN)  # TotalTokens = wake + sleep + judge
    assert dict(starts) == {"B0": "", **{c: MODEL for c in DRIVEN}}
    assert {c for (c,) in writes} == set(DRIVEN)
    assert cli("replay", str(home / "runs" / "mdrec" / "events.avro"), "--verify").returncode == 0

    # replay: no upstream at all, the memory model's answers come from the recording
    proc = _run(cli, pack, "mdrep", conditions, "--model-replay", "mdrec")
    assert proc.returncode == 0, proc.stderr[-3000:]
    replayed = json.loads((home / "runs" / "mdrep" / "report.json").read_text())
    assert replayed["outcome_matrix"]["conditions"] == recorded["outcome_matrix"]["conditions"]
    assert {c: (e["passed"], e["excluded"]) for c, e in ((e["condition"], e) for e in replayed["conditions"])} == \
        {c: (e["passed"], 0) for c, e in ((e["condition"], e) for e in recorded["conditions"])}
    modes = _sql(cli, "SELECT DISTINCT JSONExtractString(payload, 'mode'), JSONExtractString(payload, 'status') "
                      "FROM trajectory_events WHERE run_set = 'mdrep' AND kind = 'ModelCall'")
    assert modes == [["replay", "ok"]]
    assert replayed["provenance"]["memory_policies"]["DF-llm"]["policy"] == "model_driven"


def test_an_invalid_answer_stores_nothing_new_and_an_unavailable_model_excludes(cli, home: Path, tmp_path: Path) -> None:
    pack = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "hygiene-v1", TRAPS[:1], name="hygiene-v1")
    with ScriptedUpstream({"memory": "invalid"}) as upstream:
        proc = _run(cli, pack, "mdbad", ["B3-llm", "DF-hybrid-llm"], "--model-base-url", upstream.base_url,
                    "--baseline", "B3-llm")
        assert proc.returncode == 0, proc.stderr[-3000:]
    status, writes, notes = _sql_many(
        home, "SELECT condition, status FROM run_results WHERE run_set = 'mdbad' ORDER BY condition",
        "SELECT DISTINCT JSONExtractString(payload, 'memory_type') FROM trajectory_events "
        "WHERE run_set = 'mdbad' AND kind = 'MemoryWrite'",
        "SELECT count() FROM trajectory_events WHERE run_set = 'mdbad' AND kind = 'Turn' "
        "AND visibility = 'harness' AND JSONExtractString(payload, 'source_kind') = 'memory_policy_error'")
    assert status == [["B3-llm", "completed"], ["DF-hybrid-llm", "completed"]]  # never a crash
    assert writes == [["episodic"]]  # only DF-hybrid-llm's raw-evidence capsules: nothing from the model
    assert int(notes[0][0]) > 0

    with ScriptedUpstream(status=503) as upstream:
        proc = _run(cli, pack, "mddown", ["B0", "B3-llm"], "--model-base-url", upstream.base_url)
        assert proc.returncode == 0, proc.stderr[-3000:]
    status = _sql(cli, "SELECT condition, status, exclusion_reason FROM run_results WHERE run_set = 'mddown' "
                       "ORDER BY condition")
    assert status == [["B0", "completed", "\\N"], ["B3-llm", "excluded", "model_unavailable"]]


def test_a_memory_write_made_to_fail_after_the_scored_session_keeps_the_cell(cli, home: Path, tmp_path: Path) -> None:
    """Attack class (b) through the real CLI: B3-llm's reflection on the scored session is too large
    for the memory model's per-minute limit (429 "Request too large" for that request only; here
    keyed on the scored session's instruction, which only that request carries). The gateway's probe
    of --memory-model gets through, so it is the policy's failure: a harness note, the cell as
    scored, nothing excluded, and the log verifies. A failure there that the probe does reproduce
    (a genuine outage) leaves the cell as well (after_scored_verdict), while the same outage before
    the scored session excludes — both units-level, tests/gateway/test_gateway_chosen_exclusions.py."""
    pack = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "hygiene-v1", TRAPS[:1], name="hygiene-v1")
    with ScriptedUpstream(too_large="Create httpmini/partner.py") as upstream:
        proc = _run(cli, pack, "mdlate", ["B0", "B3-llm"], "--model-base-url", upstream.base_url)
        assert proc.returncode == 0, proc.stderr[-3000:]
    status, refused, notes = _sql_many(
        home, "SELECT condition, status, excluded, scored_passed FROM run_results WHERE run_set = 'mdlate' "
              "ORDER BY condition",
        "SELECT session_index, JSONExtractString(payload, 'status'), JSONExtractInt(payload, 'http_status') "
        "FROM trajectory_events WHERE run_set = 'mdlate' AND kind = 'ModelCall' "
        "AND JSONExtractInt(payload, 'http_status') != 200",
        "SELECT count() FROM trajectory_events WHERE run_set = 'mdlate' AND kind = 'Turn' "
        "AND JSONExtractString(payload, 'source_kind') = 'memory_policy_error' "
        "AND position(JSONExtractString(payload, 'text', 'text'), 'HTTP 429') > 0")
    assert refused == [["3", "request_failed", "429"]]
    assert [row[:3] for row in status] == [["B0", "completed", "false"], ["B3-llm", "completed", "false"]]
    assert int(notes[0][0]) == 1
    report = json.loads((home / "runs" / "mdlate" / "report.json").read_text())
    assert {e["condition"]: e["excluded"] for e in report["conditions"]} == {"B0": 0, "B3-llm": 0}
    assert cli("replay", str(home / "runs" / "mdlate" / "events.avro"), "--verify").returncode == 0
