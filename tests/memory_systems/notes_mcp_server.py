"""A test double of an MCP memory *server* (stdio MCP, the protocol), not of any real server: tools
`remember {text}` and `recall {query}` over a JSON file, `recall` answering every stored text
that shares a word with the query, in written order.

    notes_mcp_server.py FILE

FILE is where it keeps its notes. Given the namespace's store ({store}/notes.json) it is a correct
server; given one fixed file for every namespace it is the broken server whose reads return other
namespaces' facts (the leak the conformance gate must catch)."""

import json
import re
import sys
from pathlib import Path

FILE = Path(sys.argv[1])
TOOLS = [{"name": "remember", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
         {"name": "recall", "annotations": {"readOnlyHint": True},
          "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}}}]


def words(text):
    return {w for w in re.findall(r"[a-z0-9]{4,}", text.lower())}


def call(name, args):
    notes = json.loads(FILE.read_text()) if FILE.exists() else []
    if name == "remember":
        notes.append(args["text"])
        FILE.parent.mkdir(parents=True, exist_ok=True)
        FILE.write_text(json.dumps(notes))
        return "stored"
    return "\n".join(n for n in notes if words(n) & words(args["query"]))


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                  "serverInfo": {"name": "notes-double", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    else:
        result = {"content": [{"type": "text", "text": call(params["name"], params["arguments"])}], "isError": False}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
    sys.stdout.flush()
