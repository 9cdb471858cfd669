"""The replay scenario: a recorded run whose agent runs `ls -la`, `id`, `ps`, `date` and `env`
in every session (their output shows the sandbox's per-session uid, pids and the clock) replays with
no upstream at all and no miss, under the divergence rule (docs/gateway.md). The model is membench's
scripted local upstream (no model API is reachable here); the sandbox, gateway and loop are real."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.bus.attempts import read_log
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration
COMMANDS = "ls -la; id; ps; date; env"


@pytest.fixture(scope="module")
def currency_pack(tmp_path_factory) -> Path:
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def model_calls(home: Path, run_set: str) -> list[dict]:
    return [e.payload for e, _ in read_log(home / "runs" / run_set / "events.avro") if e.kind == "ModelCall"]


def test_a_run_that_lists_files_and_reads_the_clock_replays_without_a_miss(cli, home, bwrap_sandbox, currency_pack):
    script = script_from_pack(currency_pack)
    for session in script["sessions"]:
        session["run"] = COMMANDS
    grid = ["run", str(currency_pack), "--agent", "openai:local-model", "--conditions", "B5", "--seeds", "1",
            "--workers", "1"]
    with ScriptedUpstream(script) as upstream:
        cli(*grid, "--run-set", "rec", "--model-base-url", upstream.base_url, "--model-record", check=True)
    recorded = model_calls(home, "rec")
    outputs = [e.payload["output"]["text"] for e, _ in read_log(home / "runs" / "rec" / "events.avro")
               if e.kind == "ToolResult" and e.payload["name"] == "run"]
    assert len(outputs) == 3 and all("uid=" in o for o in outputs)  # the commands ran in every session

    proc = cli(*grid, "--run-set", "rep", "--model-replay", "rec", check=True)
    replayed = model_calls(home, "rep")
    assert [c["status"] for c in replayed] == ["ok"] * len(recorded), proc.stderr  # no replay_miss
    ends = [e.payload for e, _ in read_log(home / "runs" / "rep" / "events.avro") if e.kind == "RunEnded"]
    assert ends == [{"status": "completed", "error_type": None}]
    # control: the requests really differed (uid, pids, clock), so exact matching alone would have missed
    assert {c["match_digest"] for c in replayed} - {c["match_digest"] for c in recorded}
