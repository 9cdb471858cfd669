"""An MCP memory condition reaches a sandboxed agent through the gateway: codex, claude-code and the
built-in loop are declared the relay (inside/mcp_relay.py) instead of membench's search_memory;
the relay, run as the sandbox runs it, lists the real knowledge-graph server's own tools and calls
them, each call a MemoryWrite or MemoryRead with its arguments and result."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from membench.agents.base import AgentTask
from membench.agents.model_agents import ClaudeCodeAgent, CodexAgent, OpenAILoopAgent
from membench.gateway.server import GatewaySettings
from membench.memory_systems.base import MemoryContext, Namespace
from membench.memory_systems.mcp_servers import MCP_SERVERS, McpMemory, McpSessionTools
from membench.formats.pack_format import Solution
from tests.conftest import skip_or_fail
from tests.gateway.test_server import INSIDE, open_channel


def _task(tools) -> AgentTask:
    return AgentTask("Add build_request.", Path("/nonexistent"), MemoryContext((), (), 500), Solution({}, {}),
                     memory_tools=tools)


def test_each_agent_is_given_the_relay_of_the_servers_tools(tmp_path):
    task = _task(object())
    CodexAgent("m").prepare_home(tmp_path, task)
    config = (tmp_path / ".codex" / "config.toml").read_text()
    assert "[mcp_servers.memory]" in config and "/membench/inside/mcp_relay.py" in config
    assert "membench_memory" not in config
    argv = ClaudeCodeAgent("m").command(task, "p")
    servers = json.loads(argv[argv.index("--mcp-config") + 1])["mcpServers"]
    assert list(servers) == ["memory"] and servers["memory"]["args"] == ["/membench/inside/mcp_relay.py"]
    loop = OpenAILoopAgent("m").command(task, "p")
    assert "--mcp-memory" in loop and "--no-memory" not in loop


def test_the_relay_calls_the_real_knowledge_graph_and_every_call_is_an_event(tmp_path):
    ok, why = MCP_SERVERS["MCP-KG"].check()
    if not ok:
        skip_or_fail(f"MCP-KG: {why}")
    memory = McpMemory(MCP_SERVERS["MCP-KG"], Namespace("rs", "MCP-KG", 1, "seq"))
    try:
        tools = McpSessionTools(memory, 500, provenance=lambda: ["instruction-event"])
        channel, events = open_channel(GatewaySettings({"*": "http://127.0.0.1:9/v1"}), tmp_path, memory=tools)
        tools.emit = channel.emit
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        fact = {"name": "ledger-currency", "entityType": "decision", "observations": ["default currency ZORKMIDS"]}
        messages = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"name": "create_entities", "arguments": {"entities": [fact]}}},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
             "params": {"name": "search_nodes", "arguments": {"query": "currency"}}},
            {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
        ]
        with channel:
            done = subprocess.run(
                [sys.executable, str(INSIDE / "launch.py"), "--listen", str(port), "--socket",
                 str(channel.socket_path), "--", sys.executable, str(INSIDE / "mcp_relay.py")],
                input="".join(json.dumps(m) + "\n" for m in messages), capture_output=True, text=True, timeout=60,
                env={"MEMBENCH_GATEWAY_URL": f"http://127.0.0.1:{port}", "PATH": "/usr/bin:/bin"})
    finally:
        memory.close()
    assert done.returncode == 0, done.stderr
    replies = {r["id"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert {"create_entities", "search_nodes", "read_graph"} <= {t["name"] for t in replies[2]["result"]["tools"]}
    assert "ZORKMIDS" in replies[4]["result"]["content"][0]["text"]
    assert replies[5]["result"]["isError"] is True  # an unknown tool is the agent's error, nothing recorded
    [write] = events.of("MemoryWrite")
    assert write["memory_id"] == "ledger-currency" and write["memory_type"] == "mcp:create_entities"
    assert write["provenance_event_ids"] == ["instruction-event"]
    assert json.loads(write["content"]["text"])["arguments"] == {"entities": [fact]}
    [read] = events.of("MemoryRead")
    assert read["admitted_ids"] == ["ledger-currency"] and "ZORKMIDS" in read["context"]["text"]
    assert json.loads(read["query"]["text"]) == {"tool": "search_nodes", "arguments": {"query": "currency"}}
