"""The misconfiguration scenarios, end to end with a real `membench run`: a key the upstream
refuses and Codex against a server without the Responses API are refused by the pre-flight before
anything is written; with the pre-flight skipped, the refused calls exclude the unit
(`model_misconfigured`, shown with its reason in the CLI's table) instead of scoring 0 %, and the
same command once the key is set retries it.

No model API is reachable from these machines: the upstream is membench's scripted local server
(membench.bench.scripted_model_server.ScriptedUpstream) told to answer as a misconfigured provider would (a key
it requires, the wire APIs it speaks). The sandbox, the gateway and the built-in agent loop are real."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.bus.attempts import read_log
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration
KEY = "sk-membench-test-misconfig-91c2"
WIDE = {"COLUMNS": "200"}


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("MEMBENCH_MODEL_API_KEY", "MEMBENCH_OPENAI_API_KEY", "MEMBENCH_ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def currency_pack(tmp_path_factory) -> Path:
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def run_args(pack: Path, agent: str, run_set: str, url: str, *more: str) -> list[str]:
    return ["run", str(pack), "--agent", agent, "--conditions", "B5", "--seeds", "1", "--run-set", run_set,
            "--workers", "1", "--model-base-url", url, *more]


def test_the_preflight_refuses_a_misconfigured_model_before_anything_is_written(cli, home, currency_pack):
    with ScriptedUpstream(key=KEY) as upstream:
        proc = cli(*run_args(currency_pack, "openai:gpt-4o-mini", "nokey", upstream.base_url))
        assert [r["path"] for r in upstream.requests] == ["/v1/chat/completions"]  # one probe, no agent
    assert proc.returncode == 2, proc.stderr
    for expected in ("pre-flight failed", "openai", upstream.base_url, "HTTP 401", "MEMBENCH_OPENAI_API_KEY",
                     "--no-preflight"):
        assert expected in proc.stderr, (expected, proc.stderr)
    with ScriptedUpstream(apis=("chat_completions",)) as upstream:
        proc = cli(*run_args(currency_pack, "codex", "chatonly", upstream.base_url))
    assert proc.returncode == 2
    assert "codex needs the Responses API; this endpoint answered 404 on /v1/responses" in proc.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())  # no run set, no log


def test_a_misconfiguration_met_during_the_run_excludes_and_is_retried_once_fixed(cli, home, bwrap_sandbox,
                                                                                currency_pack):
    with ScriptedUpstream(script_from_pack(currency_pack), key=KEY) as upstream:
        proc = cli(*run_args(currency_pack, "openai:gpt-4o-mini", "mis", upstream.base_url, "--no-preflight"),
                   env=WIDE)
        assert proc.returncode == 0, proc.stderr
        evs = [e for e, _ in read_log(home / "runs" / "mis" / "events.avro")]
        ends = [e.payload for e in evs if e.kind == "RunEnded"]
        assert ends == [{"status": "excluded", "error_type": "model_misconfigured"}]
        assert not [e for e in evs if e.kind == "OracleVerdict"]  # never scored as the agent's failure
        assert [e.payload["status"] for e in evs if e.kind == "ModelCall"] == ["misconfigured"]
        assert "1 (model_misconfigured 1)" in proc.stdout, proc.stdout
        reason = next(e.payload["text"]["text"] for e in evs if e.kind == "Turn" and e.payload["role"] == "system")
        assert "MEMBENCH_OPENAI_API_KEY" in reason and KEY not in reason
        # the reason, in the harness's own words, is in the report too
        report = json.loads((home / "runs" / "mis" / "report.json").read_text())
        example = report["validity_gates"]["exclusions"]["B5"]["examples"]["model_misconfigured"]
        assert "HTTP 401" in example and "MEMBENCH_OPENAI_API_KEY" in example
        # and names the unit it came from, which report.html links to in the viewer
        unit = report["validity_gates"]["exclusions"]["B5"]["example_units"]["model_misconfigured"]
        assert unit == evs[0].unit_id
        assert f'href="../../index.html#/unit/mis/{quote(unit, safe="")}" class="example"' in \
            (home / "runs" / "mis" / "report.html").read_text()
        assert "model_misconfigured: " in (home / "runs" / "mis" / "report.md").read_text()

        # the user sets the key and runs the same command: pre-flight passes, the unit is retried
        proc = cli(*run_args(currency_pack, "openai:gpt-4o-mini", "mis", upstream.base_url),
                   env={**WIDE, "MEMBENCH_MODEL_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert "pre-flight: --agent openai:gpt-4o-mini: openai Chat Completions API" in proc.stderr
    assert "1 to run" in proc.stderr
    evs = [e for e, _ in read_log(home / "runs" / "mis" / "events.avro")]
    assert [e.payload["status"] for e in evs if e.kind == "RunEnded"] == ["excluded", "completed"]
    assert [e.payload["outcome"] for e in evs if e.kind == "OracleVerdict"] == ["pass", "pass", "pass"]
    assert all(e.payload["purpose"] == "agent" for e in evs if e.kind == "ModelCall")  # no probe in the log

    # --model-record on a grid already complete runs nothing, and says so
    with ScriptedUpstream(script_from_pack(currency_pack), key=KEY) as upstream:
        again = cli(*run_args(currency_pack, "openai:gpt-4o-mini", "mis", upstream.base_url, "--model-record"),
                    env={**WIDE, "MEMBENCH_MODEL_API_KEY": KEY})
    assert again.returncode == 0, again.stderr
    assert "--model-record: nothing was recorded: every unit of run set mis is already complete" in again.stderr
    assert not (home / "runs" / "mis" / "blobs").exists() or not any((home / "runs" / "mis" / "blobs").iterdir())
