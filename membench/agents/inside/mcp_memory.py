"""The session's memory as an MCP server (stdio, JSON-RPC 2.0, one message a line).

Tools: `search_memory {query}` and `get_memory {id}`. Each call goes to the membench gateway
($MEMBENCH_GATEWAY_URL, the loopback relay of this session's channel), which asks the condition's
memory system and records a MemoryRead event with what it returned."""

import json
import os
import urllib.request

from jsonrpc_stdio import serve

GATEWAY = os.environ.get("MEMBENCH_GATEWAY_URL", "http://127.0.0.1:4000").rstrip("/")
TOOLS = [
    {"name": "search_memory", "description": "Search the project's memory (notes kept from earlier sessions). "
     "Returns matching memories with their ids; cite the ones you use as memory:#<id>.",
     "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "get_memory", "description": "Get one memory you were shown, by id.",
     "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
]
ROUTES = {"search_memory": ("search", "query"), "get_memory": ("get", "id")}


def call_gateway(route, args):
    request = urllib.request.Request(f"{GATEWAY}/membench/memory/{route}", data=json.dumps(args).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=60) as response:
        return json.loads(response.read())


def render(items):
    if not items:
        return "No memories found."
    return "\n\n".join(f"memory:#{i['id']} ({i['type']})\n{i['text']}" for i in items)


def handle(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "membench-memory", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        name, args = params.get("name"), params.get("arguments") or {}
        if name not in ROUTES:
            raise LookupError(f"unknown tool {name}")
        route, key = ROUTES[name]
        try:
            answer = call_gateway(route, {key: args.get(key)})
        except Exception as exc:  # the agent sees the failure as a tool error, not a crash
            return {"content": [{"type": "text", "text": f"memory unavailable: {exc}"}], "isError": True}
        return {"content": [{"type": "text", "text": render(answer.get("items", []))}], "isError": False}
    if method == "ping":
        return {}
    raise LookupError(f"method not found: {method}")


if __name__ == "__main__":
    serve(handle)
