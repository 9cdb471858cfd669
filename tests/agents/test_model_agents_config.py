"""How each model agent is configured for a session: the gateway as its model endpoint, a
placeholder key, and memory tools only where the condition has memory."""

from __future__ import annotations

import json
from pathlib import Path

from membench.agents.base import AgentTask
from membench.agents.model_agents import (GATEWAY_URL, PLACEHOLDER_KEY, ClaudeCodeAgent, CodexAgent,
                                           OpenAILoopAgent, make_model_agent, prompt_for)
from membench.memory_systems.base import MemoryContext, MemoryItem
from membench.formats.pack_format import Solution


def task(memory: bool) -> AgentTask:
    items = (MemoryItem("B5:e1", "review", "Use the header X-Client."),) if memory else ()
    return AgentTask("Add build_request.", Path("/nonexistent"), MemoryContext(items, (), 500), Solution({}, {}),
                     memory_search=(lambda q: MemoryContext((), (), 500)) if memory else None)


def test_codex_names_the_gateway_as_its_provider_and_loads_memory_tools_only_with_memory(tmp_path):
    agent = CodexAgent("gpt-5-codex")
    for memory in (True, False):
        home = tmp_path / str(memory)
        home.mkdir()
        agent.prepare_home(home, task(memory))
        config = (home / ".codex" / "config.toml").read_text()
        assert f'base_url = "{GATEWAY_URL}/v1"' in config and 'wire_api = "responses"' in config
        assert ("[mcp_servers.membench_memory]" in config) == memory
    assert agent.environment()["OPENAI_API_KEY"] == PLACEHOLDER_KEY


def test_claude_code_gets_the_gateway_and_an_mcp_config_only_with_memory():
    agent = ClaudeCodeAgent("claude-sonnet-4-5")
    assert agent.environment()["ANTHROPIC_BASE_URL"] == GATEWAY_URL
    for memory in (True, False):
        argv = agent.command(task(memory), "do it")
        config = json.loads(argv[argv.index("--mcp-config") + 1])
        assert bool(config["mcpServers"]) == memory
        assert argv[-2:] == ["--", "do it"]  # the prompt can never be read as an option's value


def test_the_builtin_loop_drops_search_memory_without_memory_and_specs_parse():
    agent = OpenAILoopAgent("m")
    assert "--no-memory" in agent.command(task(False), "") and "--no-memory" not in agent.command(task(True), "")
    assert make_model_agent("codex").name == "codex:gpt-5-codex"
    assert make_model_agent("claude-code:claude-opus-4-1").model == "claude-opus-4-1"
    assert make_model_agent("scripted:null") is None


def test_the_prompt_carries_memory_ids_and_the_citation_rule():
    with_memory = prompt_for(task(True))
    assert "memory:#B5:e1 (review): Use the header X-Client." in with_memory
    assert "Memory citations: memory:#<id>" in with_memory
    assert "Memory citations: none" in prompt_for(task(False))
