"""Session resolution on the real embedded path (bwrap scoring, chDB): one verdict per session.

The same correct patch, submitted by an agent that timed out, is scored under both resolution
policies: an imported A/B pack (`agent_must_finish`) and the same pack declared
`patch_as_submitted`. session_results, run_results, failures and the report must agree in both;
`remem`, the A/B bench's condition name, is accepted as a label of scored predictions, and keeps the
memory contract its pack declares: a citation of an id that memory never held fails it."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration.test_remem_pack import diff, report
from tests.packs.test_remem_import import LATER

pytestmark = pytest.mark.integration

FIXED = "def endpoint():\n    return '/v2/items'\n"


def rows(cli, query: str) -> list[list[str]]:
    return [line.split("\t") for line in cli("sql", query, check=True).stdout.strip().splitlines()]


def verdicts(cli, run_set: str) -> dict[str, tuple[str, str, str, str]]:
    """condition -> (session_results.passed, run_results.scored_passed, failures.resolved, failure_reason)."""
    out = rows(cli, "SELECT s.condition, s.passed, r.scored_passed, f.resolved, ifNull(f.failure_reason, '-') "
                    "FROM (SELECT * FROM session_results WHERE run_set = '{0}' AND scored) AS s "
                    "JOIN (SELECT * FROM run_results WHERE run_set = '{0}') AS r ON r.run_id = s.run_id "
                    "JOIN (SELECT * FROM failures WHERE run_set = '{0}' AND scored) AS f ON f.run_id = s.run_id "
                    "ORDER BY s.condition".format(run_set))
    return {r[0]: tuple(r[1:]) for r in out}


def test_a_timed_out_agent_with_a_passing_patch_gets_one_verdict_per_policy(cli, home, tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    ab = tmp_path / "ab"
    cli("import", "remem", str(source), str(ab), check=True)
    native = tmp_path / "native"
    shutil.copytree(ab, native)
    manifest = json.loads((native / "manifest.json").read_text())
    assert manifest["resolution_policy"] == "agent_must_finish"
    manifest["resolution_policy"] = "patch_as_submitted"
    (native / "manifest.json").write_text(json.dumps(manifest))

    patch = diff(LATER["repo"]["files"], "api/client.py", FIXED)
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in [
        # remem: the source benchmark's condition, scored as a label; the agent timed out after a
        # correct patch, and cited a memory id membench never saw injected
        {"unit": "stale-api", "condition": "remem", "seed": 1, "patch": patch, "status": "timeout",
         "cited_memory_ids": ["remem:obs-17"]},
        {"unit": "stale-api", "condition": "no_memory", "seed": 1, "patch": patch},
    ]))
    for pack, run_set in ((ab, "ab"), (native, "native")):
        cli("score", str(pack), "--predictions", str(preds), "--run-set", run_set, check=True)

    # agent_must_finish: the timeout fails the session everywhere
    assert verdicts(cli, "ab") == {"no_memory": ("true", "true", "true", "-"),
                                   "remem": ("false", "false", "false", "timeout")}
    ab_report = report(home, "ab")
    assert (ab_report["remem"]["passed"], ab_report["remem"]["pass_rate"]) == (0, 0.0)
    assert ab_report["remem"]["failure_counts"] == {"timeout": 1}
    assert ab_report["no_memory"]["passed"] == 1 and ab_report["no_memory"]["failure_counts"] == {}

    # patch_as_submitted: the oracle's verdict on the patch decides everywhere; the timeout stays in the log
    assert verdicts(cli, "native") == {"no_memory": ("true", "true", "true", "-"),
                                       "remem": ("true", "true", "true", "-")}
    native_report = report(home, "native")
    assert (native_report["remem"]["passed"], native_report["remem"]["pass_rate"]) == (1, 1.0)
    assert native_report["remem"]["failure_counts"] == {}
    assert rows(cli, "SELECT JSONExtractString(payload, 'status') FROM trajectory_events WHERE run_set = 'native' "
                     "AND kind = 'SessionEnded' AND unit_id LIKE '%/remem/%' AND JSONExtractString(payload, 'status') "
                     "!= 'history'") == [["timeout"]]
    assert rows(cli, "SELECT DISTINCT JSONExtractString(payload, 'resolution_policy') FROM trajectory_events "
                     "WHERE kind = 'RunStarted' ORDER BY 1") == [["agent_must_finish"], ["patch_as_submitted"]]

    for scored in (ab_report, native_report):
        # remem had memory — the pack declares what it held — so its contract applies: citing an id that
        # memory never held fails the contract, a runtime failure apart from the task's verdict (timeout under
        # agent_must_finish, resolved under patch_as_submitted), so no memory failure reason is counted
        assert scored["remem"]["memory_failure_counts"] == {}
        contract = scored["remem"]["memory_contract"]
        assert contract["status_counts"] == {"failed": 1} and contract["citations_without_memory"] == 0
        assert scored["no_memory"]["memory_contract"]["citations_without_memory"] == 0
