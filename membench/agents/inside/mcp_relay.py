"""An MCP memory server's own tools, relayed (stdio, JSON-RPC 2.0, one message a line).

The condition's MCP memory server runs on the host, outside the sandbox, with its store; this
program is what Codex and Claude Code start as their MCP server. `tools/list` and `tools/call` go
to the membench gateway ($MEMBENCH_GATEWAY_URL, the loopback relay of this session's channel:
`/membench/memory/list`, `/membench/memory/call`), which calls the server and records each call as
a MemoryRead or MemoryWrite event; the server's answer comes back unchanged."""

import json
import os
import sys
import urllib.request

from jsonrpc_stdio import serve

GATEWAY = os.environ.get("MEMBENCH_GATEWAY_URL", "http://127.0.0.1:4000").rstrip("/")


def call_gateway(route, body):
    request = urllib.request.Request(f"{GATEWAY}/membench/memory/{route}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=300) as response:
        return json.loads(response.read())


def handle(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "membench-mcp-memory", "version": "1"}}
    if method == "tools/list":
        try:
            return {"tools": call_gateway("list", {}).get("tools", [])}
        except Exception as exc:  # no tools rather than a client that cannot start
            print(f"membench mcp relay: tools/list failed: {exc}", file=sys.stderr, flush=True)
            return {"tools": []}
    if method == "tools/call":
        try:
            return call_gateway("call", {"name": params.get("name"), "arguments": params.get("arguments") or {}})
        except Exception as exc:  # the agent sees the failure as a tool error, not a crash
            return {"content": [{"type": "text", "text": f"memory unavailable: {exc}"}], "isError": True}
    if method == "ping":
        return {}
    raise LookupError(f"method not found: {method}")


if __name__ == "__main__":
    serve(handle)
