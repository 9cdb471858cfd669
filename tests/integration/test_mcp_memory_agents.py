"""Agents that call a model drive an MCP memory server through the gateway: under MCP-KG, the real
knowledge-graph server runs on the host, the agent in bubblewrap reaches its own tools through the
relay (inside/mcp_relay.py) — the real Claude Code and Codex CLIs from their MCP configuration, the
built-in loop as functions. The model is the scripted upstream (membench.bench.scripted_model_server): in S1
it calls `create_entities`, in S3 `search_nodes` and fills the default currency from what the search
returned (the decision the harness filed after S1); no memory is in any prompt. Every call is a
MemoryWrite or MemoryRead, the scored session passes, the log verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.memory_systems.mcp_servers import MCP_SERVERS
from tests.conftest import assert_run_sets_verify, skip_or_fail
from tests.integration.pack_helpers import smoke_cut_to
from tests.integration.test_model_agents import KEY, events, outcomes, require_cli, run_end

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def currency_pack(tmp_path_factory) -> Path:
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def mcp_script(pack: Path) -> dict:
    script = script_from_pack(pack)
    first, _, scored = script["sessions"]
    first["mcp"] = [{"name": "create_entities", "arguments": {"entities": [
        {"name": "parse_amount", "entityType": "function",
         "observations": ["ledger/money.py parse_amount parses '12.34' into 1234 cents"]}]}}]
    scored["mcp"] = [{"name": "search_nodes", "arguments": {"query": "currency"}}]
    return script


@pytest.mark.parametrize("agent,cli_name", [("openai:local-model", None), ("claude-code", "claude"),
                                            ("codex", "codex")])
def test_an_agent_writes_in_s1_and_reads_in_s3_through_the_knowledge_graph(cli, home, bwrap_sandbox, currency_pack,
                                                                          agent, cli_name):
    if cli_name:
        require_cli(cli_name)
    ok, why = MCP_SERVERS["MCP-KG"].check()
    if not ok:
        skip_or_fail(f"MCP-KG: {why}")
    cli("memory", "check", "MCP-KG", check=True, timeout=600)
    run_set = f"mcp-{agent.split(':')[0]}"
    with ScriptedUpstream(mcp_script(currency_pack)) as upstream:
        proc = cli("run", str(currency_pack), "--agent", agent, "--conditions", "MCP-KG", "--seeds", "1",
                   "--run-set", run_set, "--workers", "1", "--model-base-url", upstream.base_url, "--model-record",
                   env={"MEMBENCH_MODEL_API_KEY": KEY, "MEMBENCH_AGENT_WALL_S": "300"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    evs = events(home, run_set)
    assert outcomes(evs) == ["pass", "pass", "pass"] and run_end(evs)["status"] == "completed"
    # every session's agent ended on its own: none ran until the wall clock killed it (a session whose
    # files were written before it looped on would still pass, and take the whole wall clock)
    assert [e.payload["status"] for e in evs if e.kind == "SessionEnded"] == ["completed"] * 3
    # nothing was put into a prompt: the first request of S3 carries no currency code
    writes = [e for e in evs if e.kind == "MemoryWrite"]
    reads = [e for e in evs if e.kind == "MemoryRead"]
    agent_writes = [e for e in writes if e.payload["memory_type"] == "mcp:create_entities"]
    assert [(e.session_index, e.payload["memory_id"]) for e in agent_writes] == [(1, "parse_amount")]
    filed = [e for e in writes if e.payload["memory_type"] == "mcp:decision"]
    assert len(filed) == 1 and "default currency" in filed[0].payload["content"]["text"]
    assert [e.session_index for e in reads] == [3]
    assert json.loads(reads[0].payload["query"]["text"]) == {"tool": "search_nodes", "arguments": {"query": "currency"}}
    assert filed[0].payload["memory_id"] in reads[0].payload["admitted_ids"]
    assert_run_sets_verify(home, run_set)
