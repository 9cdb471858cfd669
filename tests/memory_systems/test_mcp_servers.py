"""MCP memory servers as conditions: the real servers deploy/mcp-memory/install.sh pins
(@modelcontextprotocol/server-memory for MCP-KG, basic-memory for MCP-BASIC) pass `membench
memory check` through their own tools; a server whose store is shared between namespaces (a test
double of the MCP protocol, notes_mcp_server.py, registered by MEMBENCH_MCP_SERVERS) fails the
isolation gate while the same double with a store per namespace passes (the control); and
`scripted:memory-literal` under MCP-KG writes and looks up through the server's tools, passes the
traps B0 fails, every tool call an event, the log verifying."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from membench.bus.attempts import read_log
from membench.memory_systems.mcp_servers import MCP_SERVERS, ToolDriver, keywords, servers_from_env
from tests.conftest import assert_run_sets_verify, skip_or_fail

DOUBLE = Path(__file__).with_name("notes_mcp_server.py")


def require_server(name: str) -> None:
    ok, why = MCP_SERVERS[name].check()
    if why.startswith("blocked:"):  # the installer found this machine cannot run it (docs/memory-systems.md)
        pytest.skip(f"{name}: {why}")
    if not ok:
        skip_or_fail(f"{name}: {why}")


def _doubles(tmp_path: Path) -> dict[str, str]:
    """The notes double twice: a store per namespace (correct) and one file for all (the leak)."""
    tools = {"write": {"tool": "remember", "arguments": {"text": "{text}"}},
             "search": {"tool": "recall", "arguments": {"query": "{query}"}}}
    return {"MEMBENCH_MCP_SERVERS": json.dumps({
        "notes-own-store": {"command": [sys.executable, str(DOUBLE), "{store}/notes.json"], **tools},
        "notes-shared-store": {"command": [sys.executable, str(DOUBLE), str(tmp_path / "shared.json")], **tools}})}


def test_a_user_server_is_declared_by_json_and_bad_declarations_name_the_field() -> None:
    specs = servers_from_env(json.dumps({"mine": {"command": ["srv", "--db", "{store}/db"],
                                                  "write": {"tool": "put", "arguments": {"body": "{text}"}},
                                                  "search": {"tool": "find", "arguments": {"q": "{query}"}}}}))
    spec = specs["mine"]
    assert spec.argv(Path("/s")) == ["srv", "--db", "/s/db"]
    assert spec.driver.write_calls("id1", "the text") == [("put", {"body": "the text"})]
    assert spec.driver.search_calls("what?") == [("find", {"q": "what?"})]
    with pytest.raises(ValueError, match=r"'mine'\.search must be"):
        servers_from_env(json.dumps({"mine": {"command": ["srv"], "write": {"tool": "put"}}}))
    with pytest.raises(ValueError, match=r"'mine'\.command must be a non-empty list"):
        servers_from_env(json.dumps({"mine": {"command": "srv"}}))
    with pytest.raises(ValueError, match="MEMBENCH_MCP_SERVERS is not JSON"):
        servers_from_env("{")
    # the knowledge graph's search matches a substring: one search per keyword of the question
    assert ToolDriver("knowledge-graph").search_calls("What is the default currency of the project?") == [
        ("search_nodes", {"query": w}) for w in ("default", "currency")]
    assert keywords("the X-Ledger-Client id") == ["x-ledger-client"]


def test_a_server_sharing_its_store_between_namespaces_fails_isolation_and_its_control_passes(
        cli, home, tmp_path) -> None:
    env = _doubles(tmp_path)
    leaky = cli("memory", "check", "notes-shared-store", "--json", env=env, timeout=600)
    assert leaky.returncode == 1, leaky.stderr[-2000:]
    record = json.loads(leaky.stdout)
    assert record["configuration"]["kind"] == "mcp" and record["verdict"] == "fail"
    assert {"namespace_isolation", "empty_namespace"} <= set(record["failed"])
    assert record["gates"]["namespace_isolation"]["evidence"]["leaks"]
    control = cli("memory", "check", "notes-own-store", "--json", env=env, timeout=600)
    assert control.returncode == 0, control.stdout[-3000:] + control.stderr[-2000:]
    assert json.loads(control.stdout)["failed"] == []


@pytest.mark.integration
@pytest.mark.parametrize("condition", ["MCP-KG", "MCP-BASIC"])
def test_the_real_servers_pass_memory_check(cli, home, condition) -> None:
    require_server(condition)
    proc = cli("memory", "check", condition, "--json", timeout=1200)
    record = json.loads(proc.stdout)
    assert proc.returncode == 0 and record["verdict"] == "pass", json.dumps(record["gates"])[-3000:]
    config = record["configuration"]
    assert config["kind"] == "mcp" and config["detail"]["version"] == MCP_SERVERS[condition].version
    assert config["code"]["files"]  # pinned to the installed server's entry point
    assert "network namespace" in " ".join(record["gates"]["no_network"]["evidence"]["server_isolation"])


@pytest.mark.integration
def test_memory_literal_writes_and_reads_through_the_knowledge_graph_and_passes_what_b0_fails(cli, home,
                                                                                           bwrap_sandbox) -> None:
    require_server("MCP-KG")
    cli("memory", "check", "MCP-KG", check=True, timeout=600)
    cli("run", "smoke", "--conditions", "B0,MCP-KG", "--agent", "scripted:memory-literal", "--seeds", "1",
        "--run-set", "mcp-kg-smoke", check=True)
    events = [e for e, _ in read_log(home / "runs" / "mcp-kg-smoke" / "events.avro")]
    by_condition: dict[str, list] = {}
    started = {}
    for e in events:
        if e.kind == "RunStarted":
            started[e.run_id] = e.payload["condition"]
        by_condition.setdefault(started.get(e.run_id, "?"), []).append(e)
    verdicts = {c: [e.payload["outcome"] for e in evs if e.kind == "OracleVerdict" and e.session_index == 3]
                for c, evs in by_condition.items()}
    assert verdicts == {"B0": ["fail"] * 3, "MCP-KG": ["pass"] * 3}
    mcp = by_condition["MCP-KG"]
    writes = [e.payload for e in mcp if e.kind == "MemoryWrite"]
    reads = [e.payload for e in mcp if e.kind == "MemoryRead"]
    # the agent's own notes (create_entities, with its arguments and result) and the delivered feedback
    agent_writes = [w for w in writes if w["memory_type"] == "mcp:create_entities"]
    assert len(agent_writes) == 9 and all('"tool": "create_entities"' in w["content"]["text"] for w in agent_writes)
    filed = [w for w in writes if not w["memory_type"].startswith("mcp:create")]
    assert len(filed) == 3 and all(w["provenance_event_ids"] for w in filed)
    # no context before the session: every read is a search_nodes call of the agent, in S3
    assert reads and all('"tool": "search_nodes"' in r["query"]["text"] for r in reads)
    cited = [e.payload["memory_ids"] for e in mcp if e.kind == "MemoryCitation"]
    assert len(cited) == 3 and all(ids[0] in {w["memory_id"] for w in filed} for ids in cited)
    assert not [e for e in by_condition["B0"] if e.kind in ("MemoryRead", "MemoryWrite")]
    assert_run_sets_verify(home, "mcp-kg-smoke")


def test_a_malformed_server_declaration_is_a_usage_error_naming_the_field(cli_inproc, home) -> None:
    bad = {"MEMBENCH_MCP_SERVERS": json.dumps({"MCP-MINE": {"command": ["srv"], "driver": "vector"}})}
    proc = cli_inproc("memory", "check", "MCP-MINE", env=bad)
    assert proc.returncode == 2 and "'MCP-MINE'.driver must be knowledge-graph, notes or template" in proc.stderr
    assert not (home / "conformance").exists()
