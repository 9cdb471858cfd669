"""The scripted upstream as a Messages-API client that keeps its history the way Claude Code does
sees it: a session of several tool-call steps reaches its final answer, one request per step."""

from __future__ import annotations

import json
import urllib.request

from membench.bench.scripted_model_server import ScriptedUpstream

SCRIPT = {"sessions": [{"when": "Add parse_amount", "files": {"ledger/money.py": "def parse_amount(): ...\n"},
                        "say": "Done.", "mcp": [{"name": "create_entities", "arguments": {"entities": []}}]}]}
TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}},
         {"name": "mcp__memory__create_entities", "input_schema": {"type": "object"}}]


def ask(base_url: str, messages: list[dict]) -> dict:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "tools": TOOLS, "messages": messages}
    request = urllib.request.Request(f"{base_url}/messages", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as response:
        return json.loads(response.read())


def add_to_history(history: list[dict], ids: list[str], answer: dict) -> None:
    """Claude Code's history: an answer that carries the id of the assistant message before it is
    that message's further content (a streamed message arrives block by block), so its blocks join
    it and its tool results join the user turn after it."""
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"}
               for b in answer["content"] if b["type"] == "tool_use"]
    if ids and ids[-1] == answer["id"] and len(history) >= 2:
        history[-2]["content"] += answer["content"]
        history[-1]["content"] += results
        return
    ids.append(answer["id"])
    history.append({"role": "assistant", "content": answer["content"]})
    if results:
        history.append({"role": "user", "content": results})


def test_a_session_of_two_tool_steps_ends_after_three_answers_in_claude_codes_history():
    history: list[dict] = [{"role": "user", "content": "Add parse_amount to ledger/money.py."}]
    ids: list[str] = []
    steps = []
    with ScriptedUpstream(SCRIPT) as upstream:
        for _ in range(6):  # bounded: a script that repeats a step would otherwise never end
            answer = ask(upstream.base_url, history)
            steps.append(next((b["name"] for b in answer["content"] if b["type"] == "tool_use"), "text"))
            add_to_history(history, ids, answer)
            if answer["stop_reason"] == "end_turn":
                break
    # the memory write, the file write, the final message: no step repeated
    assert steps == ["mcp__memory__create_entities", "Bash", "text"]
    assert len(set(ids)) == 3
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user", "assistant"]
