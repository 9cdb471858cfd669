"""Real agents through the model gateway, end to end: `membench run` in bubblewrap with the real
Codex and Claude Code CLIs from npm (deploy/agents/install.sh) and membench's built-in loop.

The upstream model service cannot be reached from these machines (no network but the package
registries), so the model is `membench.bench.scripted_model_server.ScriptedUpstream`, a local server that
answers in each API's real wire format from a script authored from the smoke pack's solution
templates (its slots are filled only from what reached the agent: memory in the prompt, or a
search_memory result). The CLIs, the sandbox, the gateway and the relay are the real ones. Each
agent runs once with `--model-record` against the scripted upstream, then again with
`--model-replay` and no upstream at all; both runs must pass the hidden oracles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.agents.model_agents import agents_prefix
from membench.bus.attempts import read_log
from tests.conftest import assert_run_sets_verify, skip_or_fail
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration
KEY = "sk-membench-test-5a1f0c9e77d34b21"


@pytest.fixture(scope="module")
def currency_pack(tmp_path_factory) -> Path:
    """The smoke pack cut to its smoke-currency sequence (3 sessions; S3 needs the remembered code)."""
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def events(home: Path, run_set: str) -> list:
    return [e for e, _ in read_log(home / "runs" / run_set / "events.avro")]


def outcomes(evs) -> list[str]:
    return [e.payload["outcome"] for e in evs if e.kind == "OracleVerdict"]


def run_end(evs) -> dict:
    return next(e.payload for e in evs if e.kind == "RunEnded")


def require_cli(name: str) -> None:
    if not (agents_prefix() / "bin" / name).exists():
        skip_or_fail(f"{name} is not installed under {agents_prefix()}: run deploy/agents/install.sh")


def run_args(pack: Path, agent: str, run_set: str, *more: str) -> list[str]:
    return ["run", str(pack), "--agent", agent, "--conditions", "B5", "--seeds", "1", "--run-set", run_set,
            "--workers", "1", *more]


@pytest.mark.parametrize("agent,cli_name,tool", [("codex", "codex", "shell"), ("claude-code", "claude", "Bash")])
def test_a_real_cli_fixes_the_smoke_pack_recorded_then_replayed(cli, home, bwrap_sandbox, currency_pack, agent,
                                                                cli_name, tool):
    require_cli(cli_name)
    env = {"MEMBENCH_MODEL_API_KEY": KEY, "MEMBENCH_AGENT_WALL_S": "300"}
    with ScriptedUpstream(script_from_pack(currency_pack)) as upstream:
        cli(*run_args(currency_pack, agent, "recorded", "--model-base-url", upstream.base_url, "--model-record"),
            check=True, env=env)
    recorded = events(home, "recorded")
    assert outcomes(recorded) == ["pass", "pass", "pass"] and run_end(recorded)["status"] == "completed"
    # the key reached the upstream, added by the gateway; the CLI sent a placeholder
    auth = {r["headers"].get("Authorization") or r["headers"].get("x-api-key") for r in upstream.requests}
    assert auth in ({f"Bearer {KEY}"}, {KEY})
    calls = [e for e in recorded if e.kind == "ModelCall"]
    assert len(calls) == 6 and {c.payload["status"] for c in calls} == {"ok"}
    assert all(c.payload["streamed"] and c.payload["recorded"] for c in calls)
    # the CLI loaded membench's memory tools from its MCP configuration
    first_request = (home / "runs" / "recorded" / "blobs" / calls[0].payload["request_digest"]).read_text()
    assert "search_memory" in first_request and "get_memory" in first_request
    per_session = {s: [e.payload["name"] for e in recorded if e.kind == "ToolCall" and e.session_index == s]
                   for s in (1, 2, 3)}
    assert all(names.count(tool) == 1 and "agent_process" in names for names in per_session.values())
    cited = [e.payload["memory_ids"] for e in recorded if e.kind == "MemoryCitation"]
    assert ["B5:smoke-currency-e1"] in cited  # S3's code came from that memory, and the final message said so
    # tokens of the session are the gateway's: the CLI's Turns carry none
    assert all(e.payload["input_tokens"] == 0 for e in recorded if e.kind == "Turn")
    sums = cli("sql", "SELECT sum(input_tokens), sum(output_tokens) FROM session_results "
                      "WHERE run_set = 'recorded'", check=True).stdout.split()
    assert [int(x) for x in sums] == [sum(c.payload["input_tokens"] for c in calls),
                                      sum(c.payload["output_tokens"] for c in calls)]

    # no upstream at all now: every answer comes from the recording
    cli(*run_args(currency_pack, agent, "replayed", "--model-replay", "recorded"), check=True,
        env={"MEMBENCH_AGENT_WALL_S": "300"})
    replayed = events(home, "replayed")
    assert outcomes(replayed) == ["pass", "pass", "pass"] and run_end(replayed)["status"] == "completed"
    again = [e.payload for e in replayed if e.kind == "ModelCall"]
    assert [c["mode"] for c in again] == ["replay"] * 6
    assert [c["response_digest"] for c in again] == [c.payload["response_digest"] for c in calls]
    log = str(home / "runs" / "recorded" / "events.avro")
    assert cli("replay", log, "--verify").returncode == 0
    response = home / "runs" / "recorded" / "blobs" / calls[2].payload["response_digest"]
    response.write_bytes(response.read_bytes() + b"\n")  # an edited recording is a finding, naming the call
    proc = cli("replay", log, "--verify")
    assert proc.returncode != 0 and "ModelCall m1 is recorded but its response body" in proc.stdout + proc.stderr


def test_the_builtin_loop_searches_memory_and_a_missing_recording_is_the_agents_divergence(cli, home, bwrap_sandbox,
                                                                                           currency_pack):
    script = script_from_pack(currency_pack)
    for session in script["sessions"]:
        session["search"] = "default currency code"
    with ScriptedUpstream(script) as upstream:
        cli(*run_args(currency_pack, "openai:local-model", "loop", "--model-base-url", upstream.base_url,
                      "--model-record"), check=True)
    evs = events(home, "loop")
    assert outcomes(evs) == ["pass", "pass", "pass"]
    # each search_memory call went to the condition's memory system and is a MemoryRead of its own
    searches = [e for e in evs if e.kind == "MemoryRead" and e.payload["query"]["text"].startswith("search_memory:")]
    assert [e.session_index for e in searches] == [1, 2, 3]
    assert searches[0].payload["admitted_ids"] == []  # nothing remembered before session 1 ended
    assert "B5:smoke-currency-e1" in searches[2].payload["admitted_ids"]
    results = [e.payload for e in evs if e.kind == "ToolResult" and e.payload["name"] == "search_memory"]
    assert "memory:#B5:smoke-currency-e1" in results[2]["output"]["text"]
    names = [e.payload["name"] for e in evs if e.kind == "ToolCall"]
    assert names.count("search_memory") == 3 and names.count("write_file") == 3 and names.count("finish") == 3
    # what the report weighs the pass rate against: the three searches are the agent's memory calls,
    # the harness's read before each session is not one (6 MemoryReads in all)
    assert sum(1 for e in evs if e.kind == "MemoryRead") == 6
    (b5,) = json.loads((home / "runs" / "loop" / "report.json").read_text())["conditions"]
    effort = b5["effort"]
    assert (effort["sessions"], effort["passes"], effort["memory_calls"]) == (3, 1, 3)
    assert effort["memory_calls_per_session"] == 1.0 and effort["passes_per_memory_call"] == pytest.approx(1 / 3)
    md = (home / "runs" / "loop" / "report.md").read_text(encoding="utf-8")
    assert "| 1.00 | 0.33 |" in md[md.index("## Cost and reliability"):]

    # a replay whose requests differ (another model name) misses: the agent's divergence, reported by
    # the failure taxonomy, never an exclusion (an agent could vary its prompt in the cells it chose)
    proc = cli(*run_args(currency_pack, "openai:another-model", "miss", "--model-replay", "loop"))
    assert proc.returncode == 0, proc.stderr
    missed = events(home, "miss")
    assert run_end(missed) == {"status": "completed", "error_type": None}
    assert {e.payload["status"] for e in missed if e.kind == "ModelCall"} == {"replay_miss"}
    row = cli("sql", "SELECT excluded, scored_passed FROM run_results WHERE run_set = 'miss'", check=True).stdout
    assert row.split() == ["false", "false"]
    rules = cli("sql", "SELECT DISTINCT rule FROM failures WHERE run_set = 'miss'", check=True).stdout.split()
    assert rules == ["model_replay_diverged"]
    assert_run_sets_verify(home, "loop", "miss")  # the agent's model calls, recorded and replayed, verify


def test_an_unavailable_upstream_excludes_the_unit(cli, home, bwrap_sandbox, currency_pack):
    with ScriptedUpstream(status=503) as upstream:
        proc = cli(*run_args(currency_pack, "openai:local-model", "down", "--model-base-url", upstream.base_url))
    assert proc.returncode == 0, proc.stderr
    evs = events(home, "down")
    assert run_end(evs) == {"status": "excluded", "error_type": "model_unavailable"}
    assert [e.payload["status"] for e in evs if e.kind == "ModelCall"] == ["upstream_error"]
    # the same command once the model is back: the unit is retried, and its completed run is the cell
    with ScriptedUpstream(script_from_pack(currency_pack)) as upstream:
        cli(*run_args(currency_pack, "openai:local-model", "down", "--model-base-url", upstream.base_url),
            check=True)
    ends = [e.payload for e in events(home, "down") if e.kind == "RunEnded"]
    assert ends == [{"status": "excluded", "error_type": "model_unavailable"},
                    {"status": "completed", "error_type": None}]
    report = json.loads((home / "runs" / "down" / "report.json").read_text())
    (condition,) = report["conditions"]
    assert (condition["cells"], condition["passed"], condition["excluded"]) == (1, 1, 0)


def test_a_request_too_large_in_the_scored_session_is_the_agents_failure_not_an_exclusion(cli, home, bwrap_sandbox,
                                                                                           currency_pack):
    """Attack class (a) through the real CLI: every request of the scored session is too large for
    the provider's per-minute limit (429 "Request too large", however often retried) while the
    gateway's probe of the configured model gets through. Both conditions lose their scored cell as
    the agent's failure, nothing is excluded, and the log verifies. The control — a provider that
    answers the probe 429/5xx as well, a genuine outage — excludes:
    test_an_unavailable_upstream_excludes_the_unit, and the units-level controls in
    tests/gateway/test_gateway_chosen_exclusions.py."""
    with ScriptedUpstream(script_from_pack(currency_pack), too_large="make_invoice(lines") as upstream:
        proc = cli("run", str(currency_pack), "--agent", "openai:local-model", "--conditions", "B0,B5", "--seeds", "1",
                   "--run-set", "too-large", "--workers", "1", "--model-base-url", upstream.base_url)
    assert proc.returncode == 0, proc.stderr
    evs = events(home, "too-large")
    assert [e.payload for e in evs if e.kind == "RunEnded"] == [{"status": "completed", "error_type": None}] * 2
    refused = [e.payload for e in evs if e.kind == "ModelCall" and e.payload["http_status"] == 429]
    assert refused and {(c["status"], c["purpose"]) for c in refused} == {("request_failed", "agent")}
    assert {e.session_index for e in evs if e.kind == "ModelCall" and e.payload["http_status"] == 429} == {3}
    rows = cli("sql", "SELECT condition, excluded, scored_passed FROM run_results WHERE run_set = 'too-large' "
                      "ORDER BY condition", check=True).stdout.split("\n")
    assert [r.split() for r in rows if r] == [["B0", "false", "false"], ["B5", "false", "false"]]
    rules = cli("sql", "SELECT DISTINCT rule FROM failures WHERE run_set = 'too-large' AND scored",
                check=True).stdout.split()
    assert rules == ["model_request_failed"]
    report = json.loads((home / "runs" / "too-large" / "report.json").read_text())
    assert {c["condition"]: (c["cells"], c["excluded"], c["passed"]) for c in report["conditions"]} == {
        "B0": (1, 0, 0), "B5": (1, 0, 0)}
    assert cli("replay", str(home / "runs" / "too-large" / "events.avro"), "--verify").returncode == 0


def test_model_options_are_checked_before_anything_runs(cli_inproc, home, currency_pack):
    proc = cli_inproc("run", str(currency_pack), "--agent", "codex")
    assert proc.returncode == 2 and "needs --model-base-url" in proc.stderr
    proc = cli_inproc("run", str(currency_pack), "--agent", "codex", "--model-replay", "nothing-here")
    assert proc.returncode == 2 and "run set 'nothing-here' has no log" in proc.stderr
    proc = cli_inproc("run", str(currency_pack), "--agent", "scripted:refsol", "--model-base-url", "http://127.0.0.1:1/v1")
    assert proc.returncode == 2 and "calls no model" in proc.stderr
    proc = cli_inproc("run", str(currency_pack), "--agent", "openai:m", "--model-base-url", "ftp://x")
    assert proc.returncode == 2 and "expected an http:// or https:// URL" in proc.stderr
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_doctor_starts_each_agent_cli_in_the_sandbox(cli, bwrap_sandbox):
    require_cli("codex")
    require_cli("claude")
    report = json.loads(cli("doctor", "--json", check=True).stdout)
    assert set(report["agents"]) == {"codex", "claude-code"}
    assert report["agents"]["codex"]["ok"] and "codex-cli" in report["agents"]["codex"]["reason"]
    assert report["agents"]["claude-code"]["ok"] and "Claude Code" in report["agents"]["claude-code"]["reason"]
    # the MCP memory servers, as `memory check` would find them (installed by deploy/setup-env.sh)
    from membench.memory_systems.mcp_servers import MCP_SERVERS

    assert {"MCP-KG", "MCP-BASIC"} <= set(report["mcp_servers"])
    for name, status in report["mcp_servers"].items():
        assert (status["ok"], status["reason"]) == MCP_SERVERS[name].check(), name


def test_doctor_says_why_an_agent_cli_is_missing(cli, tmp_path):
    report = json.loads(cli("doctor", "--json", env={"MEMBENCH_AGENTS_PREFIX": str(tmp_path),
                                                     "MEMBENCH_MCP_PREFIX": str(tmp_path)}).stdout)
    assert report["agents"]["codex"] == {"ok": False,
                                         "reason": f"{tmp_path}/bin/codex is missing: run deploy/agents/install.sh"}
    kg = report["mcp_servers"]["MCP-KG"]
    assert not kg["ok"] and "is missing: run deploy/mcp-memory/install.sh" in kg["reason"], kg


def test_the_gateway_reaches_into_the_docker_backend(cli, home, docker_sandbox, currency_pack):
    """The same per-session socket, bind-mounted into a podman container (network none)."""
    with ScriptedUpstream(script_from_pack(currency_pack)) as upstream:
        cli(*run_args(currency_pack, "openai:local-model", "in-docker", "--sandbox", "docker",
                      "--model-base-url", upstream.base_url), check=True)
    evs = events(home, "in-docker")
    assert outcomes(evs) == ["pass", "pass", "pass"]
    assert [e.payload["status"] for e in evs if e.kind == "ModelCall"] == ["ok"] * 6
