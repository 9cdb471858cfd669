"""The stdio loop both MCP servers of the sandbox run (mcp_memory.py, mcp_relay.py): JSON-RPC 2.0,
one message a line. Imported from the directory of the program that runs (sys.path[0])."""

import json
import sys

METHOD_NOT_FOUND = -32601


def serve(handle, stdin=sys.stdin, stdout=sys.stdout):
    """Answer each request on STDIN with HANDLE(message)'s result, or an error when it raises
    LookupError (an unknown method or tool). A notification (no id) gets no answer; a line that is not
    JSON is skipped, as a client's stray output would otherwise end the server."""
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message:
            continue
        try:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": handle(message)}
        except LookupError as exc:
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": METHOD_NOT_FOUND, "message": str(exc)}}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()
