"""membench's built-in coding agent: a minimal tool-calling loop over OpenAI Chat Completions.

    python3 openai_loop.py --model MODEL [--max-steps N] [--max-tokens N]

Talks to $MEMBENCH_GATEWAY_URL/v1/chat/completions (the session's gateway; any OpenAI-compatible
upstream behind it). Tools (JSON arguments): read_file {path}, write_file {path, content},
list_files {path}, run {command}, search_memory {query} (not under a no-memory condition),
finish {summary, cited_memory_ids}. With --mcp-memory (an MCP memory condition) search_memory is
replaced by the memory server's own tools, as the gateway lists them (`/membench/memory/list`),
each called through `/membench/memory/call`.
Paths are relative to /workspace and may not leave it. `run` executes a shell command in
/workspace; its output goes back to the model, cut to OUTPUT_LIMIT characters with a marker.

It reports on stdout in the command-agent protocol (membench/agents/command.py): a `turn` per
assistant message, `tool_call` / `tool_result` per tool, a `memory_citation` from `finish`. Token
usage is not reported here: the gateway records it from the calls themselves. It stops at
`finish`, at an answer without tool calls, or at a limit (steps, or total tokens as the upstream
counted them), saying which."""

import argparse
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

WORKSPACE = Path(os.environ.get("MEMBENCH_WORKSPACE", "/workspace")).resolve()
GATEWAY = os.environ.get("MEMBENCH_GATEWAY_URL", "http://127.0.0.1:4000").rstrip("/")
OUTPUT_LIMIT = 10_000
RUN_TIMEOUT_S = 300


def schema(name, description, **props):
    required = [k for k in props if k != "cited_memory_ids"]
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": required}}}


S = {"type": "string"}
TOOLS = [
    schema("read_file", "Read a file of the repository.", path=S),
    schema("write_file", "Create or replace a file of the repository.", path=S, content=S),
    schema("list_files", "List the files under a directory of the repository ('.' for all).", path=S),
    schema("run", "Run a shell command in the repository (tests, grep, ...); returns its output.", command=S),
    schema("search_memory", "Search the project's memory from earlier sessions.", query=S),
    schema("finish", "End the session: a summary of the change and the memory ids you relied on.",
           summary=S, cited_memory_ids={"type": "array", "items": S}),
]


def emit(kind, **fields):
    sys.stdout.write(json.dumps({"type": kind, **fields}) + "\n")
    sys.stdout.flush()


def cut(text):
    if len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"\n[... output truncated: {len(text) - OUTPUT_LIMIT} more characters]"


def inside(path):
    target = (WORKSPACE / str(path)).resolve()
    if target != WORKSPACE and WORKSPACE not in target.parents:
        raise ValueError(f"{path}: outside the repository")
    return target


def post(path, body):
    request = urllib.request.Request(GATEWAY + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer membench-placeholder"}, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=900) as response:
        return json.loads(response.read())


MCP_TOOLS: set[str] = set()


def mcp_tools():
    """The memory server's tools as functions (their MCP input schemas as the parameters)."""
    listed = post("/membench/memory/list", {}).get("tools", [])
    MCP_TOOLS.update(t["name"] for t in listed)
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", "")[:1000],
                                              "parameters": t.get("inputSchema") or {"type": "object"}}}
            for t in listed if t.get("name") not in {s["function"]["name"] for s in TOOLS}]


def tool(name, args):
    """(output text, exit code)."""
    if name in MCP_TOOLS:
        result = post("/membench/memory/call", {"name": name, "arguments": args})
        text = "\n".join(c.get("text", "") for c in result.get("content") or [] if c.get("type") == "text")
        return text or json.dumps(result.get("structuredContent")), 1 if result.get("isError") else 0
    if name == "read_file":
        return inside(args["path"]).read_text(encoding="utf-8", errors="replace"), 0
    if name == "write_file":
        target = inside(args["path"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args["content"], encoding="utf-8")
        return f"wrote {args['path']} ({len(args['content'])} characters)", 0
    if name == "list_files":
        root = inside(args.get("path") or ".")
        names = sorted(str(p.relative_to(WORKSPACE)) for p in root.rglob("*")
                       if p.is_file() and ".git" not in p.relative_to(WORKSPACE).parts)
        return "\n".join(names) or "(no files)", 0
    if name == "run":
        try:
            done = subprocess.run(args["command"], shell=True, cwd=WORKSPACE, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S, errors="replace")
        except subprocess.TimeoutExpired:
            return f"[killed after {RUN_TIMEOUT_S} s]", 124
        return done.stdout + done.stderr, done.returncode
    if name == "search_memory":
        items = post("/membench/memory/search", {"query": args["query"]}).get("items", [])
        return "\n\n".join(f"memory:#{i['id']}: {i['text']}" for i in items) or "No memories found.", 0
    raise KeyError(name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=1_000_000)
    parser.add_argument("--prompt-file", default="/task/prompt.md")
    parser.add_argument("--no-memory", action="store_true", help="the condition has no memory: no search_memory tool")
    parser.add_argument("--mcp-memory", action="store_true", help="the memory server's own tools instead of search_memory")
    args = parser.parse_args()
    tools = [t for t in TOOLS if not ((args.no_memory or args.mcp_memory) and t["function"]["name"] == "search_memory")]
    if args.mcp_memory:
        tools += mcp_tools()
    messages = [
        {"role": "system", "content": "You are a coding agent working in a repository at /workspace. Use the tools "
         "to inspect and change files and to run commands. Make the smallest change that fulfils the task, "
         "then call finish."},
        {"role": "user", "content": Path(args.prompt_file).read_text(encoding="utf-8")},
    ]
    used = 0
    for step in range(1, args.max_steps + 1):
        try:
            answer = post("/v1/chat/completions", {"model": args.model, "messages": messages, "tools": tools})
        except (urllib.error.URLError, OSError, ValueError) as exc:
            emit("turn", text=f"[the model call failed: {exc}]", output_tokens=0)
            return 2
        used += int((answer.get("usage") or {}).get("total_tokens") or 0)
        message = (answer.get("choices") or [{}])[0].get("message") or {}
        messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
        if message.get("content"):
            emit("turn", text=message["content"], output_tokens=0)
        calls = message.get("tool_calls") or []
        if not calls:
            return 0
        for call in calls:
            name, call_id = call["function"]["name"], call.get("id", f"step{step}")
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                arguments = {}
            emit("tool_call", name=name, call_id=call_id, arguments=arguments, is_patch=name == "write_file")
            if name == "finish":
                cited = [str(i) for i in arguments.get("cited_memory_ids") or []]
                emit("tool_result", name=name, call_id=call_id, exit_code=0, output="")
                emit("turn", text=str(arguments.get("summary", "")), output_tokens=0)
                emit("memory_citation", memory_ids=cited)
                return 0
            try:
                output, code = tool(name, arguments)
            except (KeyError, ValueError, OSError, TypeError) as exc:
                output, code = f"error: {type(exc).__name__}: {exc}", 1
            emit("tool_result", name=name, call_id=call_id, exit_code=code, output=cut(output),
                 is_patch=name == "write_file")
            messages.append({"role": "tool", "tool_call_id": call_id, "content": cut(output)})
        if used >= args.max_tokens:
            emit("turn", text=f"[stopped: the token limit ({args.max_tokens}) is reached]", output_tokens=0)
            return 0
    emit("turn", text=f"[stopped: the step limit ({args.max_steps}) is reached]", output_tokens=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
