"""A local, scripted model server speaking the three wire APIs the gateway relays — the upstream
for the gateway's tests and for `membench bench gateway`. No model runs here: answers come from a
*script* (below), rendered in the format the request's API expects, streamed as server-sent
events when the request asks for a stream, with deterministic usage (and, on the Messages API, a
message id of each answer's own: `_answer_id`).

A script (JSON, `{"sessions": [...]}`) says what the "model" does per task session:
`{"when": TEXT, "files": {path: template}, "slots": {name: {"pattern": REGEX, "default": V}},
"say": TEXT, "search"?: QUERY}`. The entry whose `when` occurs in the request's text is used.
The answers of a session, one per request, in order: (with `search`, Chat Completions only) a
`search_memory` call; (with `"run": COMMAND`, Chat Completions only) a `run` call of that command;
(with `"mcp": [{"name": TOOL, "arguments": {...}}, ...]`, every API) one call per entry of the MCP
tool the request offers under that name (as is, or as a CLI prefixes it: `mcp__memory__TOOL`,
`memory__TOOL`), its result joining the history;
one tool call that writes `files` (a shell command
for Codex's `exec_command` and Claude Code's `Bash`; `write_file` calls for the built-in loop, or
one `run` call when a path is absolute: outside /workspace, e.g. a skill bank's /skills), each
`{{SLOT:name}}` filled from the first match of the slot's pattern in the request text (the
prompt, memory and tool results included) or else its default — so a memory that reached the
agent changes the patch. Then the answer is `say` plus the memory ids the slots were found beside,
as `Memory citations: memory:#<id> …` (or `none`). `script_from_pack` writes such a script from a
pack's solution templates.

A request from a model-driven memory policy (its system prompt opens with "membench memory
policy", membench/memory_systems/model_client.py) is answered instead by `memory_answer`, a
scripted stand-in for the memory model: `reflect` -> one lesson per evidence item, quoting it;
`consolidate` -> one typed memory per evidence item (type from its kind), quoting it; `judge` -> each
new memory whose text signals a correction supersedes the other memories that share a scope entry
with it. The script's `"memory"` key changes that: `"invalid"` answers text that is not JSON
(the policies' fallback), `"echo"` (default) as above.

Embeddings (`POST …/embeddings`, for the memory libraries behind the gateway): deterministic
vectors, not a model's — `scripted_embedding`: each lower-cased word (runs of [a-z0-9_]) adds 1 to
the dimension its SHA-256 picks, the vector is L2-normalized; `dimensions` of the request sets the
length (default 1536). Texts sharing words get a positive cosine, so retrieval by similarity is
meaningful, and the same text always gets the same vector. A Mem0 fact-extraction request (its
user prompt has a `## New Messages` section, `response_format` json_object) is answered by
`mem0_answer`: one memory per new message line, its text verbatim (a literal stand-in for the
fact-extracting model). A LangMem memory-manager request (a `<session_…>` block in its prompt, a
`Memory` tool offered) is answered by `langmem_answer`: one `Memory` tool call per line of the
session, verbatim, leaving out lines the request shows as memories already stored (a plain reply
when nothing is new).

An entry with `"reply": TEXT` instead answers every request it matches with that plain text (an
assistant message with no tool call): the simulated user's model in transfer tests.

Knobs for failure tests: `status` (answer every call with that HTTP status), `delay_s` (sleep
before answering), `chunks` (split the final text over that many stream events), and the ways a
real provider refuses a misconfigured client (the gateway's pre-flight, docs/gateway.md): `key`
(a call without `Authorization: Bearer KEY` or `x-api-key: KEY` gets 401), `apis` (the wire APIs
it speaks, e.g. `("chat_completions",)`: any other path gets 404), `models` (the model names it
knows: another gets 404 `model_not_found`). And the two ways a provider's rate limit answers:
`too_large` (a request whose body holds that text gets 429 "Request too large … tokens per min",
as a provider answers one request over the key's per-minute limit, however often it is retried)
and `fail_first` (the first N calls get 429 "Rate limit reached", then calls are served: a
transient limit).

Knobs of a provider's limits, for the gateway's front-door tests: `rpm` (the key's requests per
minute, one window for every caller as a provider keeps it: past it a call gets 429 "Rate limit
reached"; every answer states the limit in `x-ratelimit-limit-requests`), and `max_body` (a proxy's
body-size limit: a request declaring a longer body is answered 413 and the connection closed
without reading it, as nginx does). `requests` holds each arrival's raw request target (`target`)
besides the path the server saw.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MEMORY_MARKER = "membench memory policy"  # membench.memory_systems.model_client.MARKER
_CORRECTION = re.compile(r"\b(supersede[sd]?|correction|no longer|instead|now|replace[sd]?|deprecated)\b", re.I)
_KIND_TYPE = {"review": "human_feedback", "human_feedback": "human_feedback", "failure": "failure",
              "decision": "constraint"}
SLOT = re.compile(r"\{\{SLOT:([a-z0-9_]+)\}\}")
MEMORY_ID = re.compile(r"memory:#([^\s()]+?)[:.,]?(?=[\s()]|$)")


def script_from_pack(pack_dir: Path, seq_ids: list[str] | None = None) -> dict[str, Any]:
    from membench.formats.pack_format import load_pack

    pack = load_pack(Path(pack_dir))
    sessions = []
    for seq in pack.sequences:
        if seq_ids and seq.seq_id not in seq_ids:
            continue
        for session in seq.sessions:
            if session.mode != "task":
                continue
            solution = pack.solution(seq, session)
            sessions.append({
                "when": session.instruction, "files": dict(solution.files),
                "slots": {n: {"pattern": s.pattern, "default": s.default} for n, s in solution.slots.items()},
                "say": f"Done: {session.instruction.split('.')[0]}."})
    return {"sessions": sessions}


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _steps_taken(api: str, body: dict[str, Any]) -> int:
    """How many answers of this session the history already holds (tool-call turns)."""
    if api == "responses":
        return sum(1 for item in body.get("input") or [] if isinstance(item, dict)
                   and item.get("type") in ("function_call", "custom_tool_call"))
    return sum(1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant")


class ScriptedModel:
    def __init__(self, script: dict[str, Any]):
        self.sessions = script.get("sessions", [])
        self.memory_mode = script.get("memory", "echo")

    def decide(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """{"tool": {"files": {...}}} or {"text": str} ({"content": str} for a memory policy's call)."""
        texts = _texts(body.get("input") if api == "responses" else body.get("messages"))
        texts += _texts(body.get("system")) + _texts(body.get("instructions"))
        text = "\n".join(texts)
        if MEMORY_MARKER in text and api == "chat_completions":
            return {"content": memory_answer(body, self.memory_mode)}
        if api == "chat_completions" and _MEM0_NEW in text:
            return {"content": mem0_answer(text)}
        if api == "chat_completions" and _LANGMEM_SESSION.search(text) and _tool_names(body) >= {"Memory"}:
            return {"calls": langmem_answer(text)}
        # the latest session whose instruction the request holds: a later session's prompt may quote an
        # earlier one's instruction (a memory carried from it), never the other way round
        entry = next((s for s in reversed(self.sessions) if s["when"] in text), None)
        if entry is None:
            return {"text": "I have no task I recognise. Memory citations: none"}
        if "reply" in entry:
            return {"text": entry["reply"], "reply": True}
        values, cited = {}, []
        for name, slot in entry.get("slots", {}).items():
            found = re.search(slot["pattern"], text)
            values[name] = found.group(1) if found else slot["default"]
            if found:  # the memory line the value was read from
                line_start = text.rfind("\n", 0, found.start()) + 1
                for memory_id in MEMORY_ID.findall(text[line_start:found.start()] + " "):
                    cited.append(memory_id)
        chat = api == "chat_completions"
        steps: list[Any] = (["search"] if entry.get("search") and chat else []) + (["run"] if entry.get("run") and chat else []) \
            + [("mcp", call) for call in entry.get("mcp", [])] + ["write"]
        taken = _steps_taken(api, body)
        if taken < len(steps) and isinstance(steps[taken], tuple):
            call = steps[taken][1]
            return {"mcp": {"name": _offered_tool(body, call["name"]), "arguments": call.get("arguments", {})}}
        if taken < len(steps) and steps[taken] == "search":
            return {"search": entry["search"]}
        if taken < len(steps) and steps[taken] == "run":
            return {"run": entry["run"]}
        if taken < len(steps):
            files = {p: SLOT.sub(lambda m: values[m.group(1)], t) for p, t in entry["files"].items()}
            return {"tool": {"files": files}}
        citation = ("Memory citations: " + " ".join(f"memory:#{i}" for i in dict.fromkeys(cited))) if cited \
            else "Memory citations: none"
        return {"text": f"{entry.get('say', 'Done.')}\n\n{citation}"}


def memory_answer(body: dict[str, Any], mode: str = "echo") -> str:
    """The scripted memory model's answer to a memory policy's request (module docstring)."""
    if mode == "invalid":
        return "I think the lessons are: keep the marker. (not JSON)"
    messages = body.get("messages") or []
    try:
        ask = json.loads(next(m["content"] for m in messages if m.get("role") == "user"))
    except (StopIteration, ValueError, TypeError, KeyError):
        return "{}"
    evidence = ask.get("evidence") or []
    if ask.get("task") == "reflect":
        return json.dumps({"lessons": [{"text": f"Lesson ({e['kind']}): {e['text']}", "evidence": [e["id"]]}
                                       for e in evidence if e.get("kind") not in ("instruction", "agent")]})
    if ask.get("task") == "consolidate":
        return json.dumps({"memories": [{"type": _KIND_TYPE.get(e["kind"], "semantic_project"), "text": e["text"],
                                         "evidence": [e["id"]]} for e in evidence]})
    if ask.get("task") == "judge":
        shown = ask.get("memories") or []
        pairs = [{"old": old["id"], "new": new["id"]} for new in shown if new.get("new") and _CORRECTION.search(new["text"])
                 for old in shown if old["id"] != new["id"] and set(old.get("scope") or []) & set(new.get("scope") or [])]
        return json.dumps({"supersede": pairs})
    return "{}"


_MEM0_NEW = "## New Messages\n"
_WORD = re.compile(r"[a-z0-9_]+")


def mem0_answer(text: str) -> str:
    """Mem0's additive extraction answered literally: each line of `## New Messages` (up to the next
    `## ` heading), its `role: ` prefix dropped, becomes one memory."""
    section = text.rsplit(_MEM0_NEW, 1)[1].split("\n## ", 1)[0]  # the user prompt's (the system prompt has one too)
    memories = []
    for line in section.splitlines():
        line = re.sub(r"^(?:user|assistant|system):\s*", "", line.strip())
        if line and line not in memories:
            memories.append(line)
    return json.dumps({"memory": [{"id": str(i), "text": m} for i, m in enumerate(memories)]})


_LANGMEM_SESSION = re.compile(r"<session_([0-9a-f-]+)>\n(.*?)\n</session_\1>", re.S)
_LANGMEM_HEADER = re.compile(r"^=+ \w+ Message =+$")


def _offered_tool(body: dict[str, Any], name: str) -> str:
    """The name under which the request offers MCP tool NAME (a CLI prefixes its server's name;
    Codex offers a server's tools inside a `namespace` tool: "NAMESPACE/NAME")."""
    offered = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            offered += [f"{tool.get('name')}/{t.get('name')}" for t in tool.get("tools") or [] if isinstance(t, dict)]
        else:
            offered.append(tool.get("name") or (tool.get("function") or {}).get("name") or "")
    return next((o for o in offered if o == name or o.endswith((f"__{name}", f".{name}", f"/{name}"))), name)


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}


def langmem_answer(text: str) -> list[dict[str, Any]]:
    """LangMem's memory manager answered literally: one `Memory` tool call per line of the last
    `<session_…>` block (its message headers dropped), its text verbatim, except lines already
    stored — shown to the model as an existing instance `{'content': LINE}`."""
    *_, (_, session) = _LANGMEM_SESSION.findall(text)
    memories: list[str] = []
    for line in session.splitlines():
        line = line.strip()
        if line and not _LANGMEM_HEADER.match(line) and line not in memories and str({"content": line}) not in text:
            memories.append(line)
    return [{"name": "Memory", "arguments": {"content": m}} for m in memories]


def scripted_embedding(text: str, dimensions: int = 1536) -> list[float]:
    """A deterministic stand-in for an embedding model (module docstring): hashed bag of words."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimensions] += 1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:  # a text without words still gets a unit vector (an embedding API never answers zeros)
        vector[0], norm = 1.0, 1.0
    return [round(v / norm, 6) for v in vector]


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else [str(t) for t in (inputs or [])]
    dims: int = body["dimensions"] if isinstance(body.get("dimensions"), int) and body["dimensions"] > 0 else 1536
    tokens = sum(max(1, len(t) // 4) for t in texts)
    return {"object": "list", "model": body.get("model"),
            "data": [{"object": "embedding", "index": i, "embedding": scripted_embedding(t, dims)}
                     for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def _write_command(files: dict[str, str]) -> str:
    program = ("import json, pathlib, sys\n"
               "for path, text in json.loads(sys.argv[1]).items():\n"
               "    target = pathlib.Path(path)\n"
               "    target.parent.mkdir(parents=True, exist_ok=True)\n"
               "    target.write_text(text)\n"
               "    print('wrote', path)\n")
    return f"python3 -c {shlex.quote(program)} {shlex.quote(json.dumps(files))}"


def _usage_numbers(body_size: int, text: str) -> tuple[int, int]:
    return max(1, body_size // 4), max(1, len(text) // 4)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a keep-alive client would otherwise wait ~40 ms per call (delayed ACK)
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def end_headers(self) -> None:
        if self.server.upstream.rpm:
            self.send_header("x-ratelimit-limit-requests", str(self.server.upstream.rpm))
        super().end_headers()

    def do_POST(self) -> None:
        upstream: ScriptedUpstream = self.server.upstream
        target = self.requestline.split(" ")[1] if self.requestline.count(" ") >= 2 else self.path
        declared = int(self.headers.get("Content-Length") or 0)
        if upstream.max_body is not None and declared > upstream.max_body:
            upstream.requests.append({"path": self.path, "target": target, "headers": dict(self.headers),
                                      "body": b"", "refused": declared})
            self.close_connection = True  # the unread body: closing now resets the sender's upload
            self._send(413, b"<html><body><h1>413 Request Entity Too Large</h1></body></html>", "text/html")
            return
        raw = self.rfile.read(declared)
        upstream.requests.append({"path": self.path, "target": target, "headers": dict(self.headers), "body": raw})
        if upstream.delay_s:
            time.sleep(upstream.delay_s)
        if upstream.over_rate():
            payload = {"error": {"type": "requests", "code": "rate_limit_exceeded",
                                 "message": f"Rate limit reached for requests: limit {upstream.rpm} per min"}}
            self._send(429, json.dumps(payload).encode(), "application/json")
            return
        if upstream.status:
            self._send(upstream.status, json.dumps({"error": {"type": "server_error", "message": "scripted failure"}}
                                                   ).encode(), "application/json")
            return
        limited = upstream.rate_limited(raw)
        if limited is not None:
            self._send(429, json.dumps({"error": {"type": "tokens", "code": "rate_limit_exceeded",
                                                  "message": limited}}).encode(), "application/json")
            return
        path = self.path.split("?")[0]
        api = ("responses" if path.endswith("/responses") else "messages" if path.endswith("/messages")
               else "chat_completions" if path.endswith("/chat/completions")
               else "embeddings" if path.endswith("/embeddings") else None)
        refused = upstream.refusal(api, self.headers, raw)
        if refused is not None:
            self._send(refused[0], json.dumps(refused[1]).encode(), "application/json")
            return
        body = json.loads(raw)
        if api == "embeddings":
            self._send(200, json.dumps(_embeddings(body)).encode(), "application/json")
            return
        assert api is not None  # refusal() answered every other path
        decision = upstream.model.decide(api, body)
        n_in, n_out = _usage_numbers(len(raw), json.dumps(decision))
        render = {"responses": _responses, "messages": _messages, "chat_completions": _chat}[api]
        events, whole = render(decision, body, n_in, n_out, upstream.chunks)
        if body.get("stream"):
            data = b"".join(events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            for event in events:  # one write per event: the gateway sees them arrive apart
                self.wfile.write(event)
                self.wfile.flush()
        else:
            self._send(200, json.dumps(whole).encode(), "application/json")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _sse(doc: dict[str, Any], name: str | None = None) -> bytes:
    head = f"event: {name or doc['type']}\n" if name or "type" in doc else ""
    return f"{head}data: {json.dumps(doc)}\n\n".encode()


def _pieces(text: str, chunks: int) -> list[str]:
    if chunks <= 1 or len(text) < 2:
        return [text]
    size = max(1, -(-len(text) // chunks))
    return [text[i:i + size] for i in range(0, len(text), size)]


def _responses(decision, body, n_in, n_out, chunks):
    usage = {"input_tokens": n_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n_out,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n_in + n_out}
    if "mcp" in decision:
        namespace, _, name = decision["mcp"]["name"].rpartition("/")
        item: dict[str, Any] = {"type": "function_call", "id": "fc_1", "call_id": f"call_mcp_{_steps_taken('responses', body)}",
                "name": name, **({"namespace": namespace} if namespace else {}),
                "arguments": json.dumps(decision["mcp"]["arguments"]), "status": "completed"}
        events = [_sse({"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}})]
    elif "tool" in decision:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_write_1", "name": "exec_command",
                "arguments": json.dumps({"cmd": _write_command(decision["tool"]["files"])}), "status": "completed"}
        events = [_sse({"type": "response.output_item.added", "output_index": 0, "item": {**item, "arguments": ""}})]
    else:
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": decision["text"], "annotations": []}]}
        events = [_sse({"type": "response.output_item.added", "output_index": 0,
                        "item": {**item, "content": [], "status": "in_progress"}})]
        events += [_sse({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
                         "content_index": 0, "delta": piece}) for piece in _pieces(decision["text"], chunks)]
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": body.get("model"),
                "output": [item], "usage": usage}
    events = [_sse({"type": "response.created", "response": {**response, "status": "in_progress", "output": []}})] \
        + events + [_sse({"type": "response.output_item.done", "output_index": 0, "item": item}),
                    _sse({"type": "response.completed", "response": response})]
    return events, response


def _answer_id(body: dict[str, Any]) -> str:
    """An answer's own id, as a provider gives each message: a digest of the request, so no two
    answers of a session share one (Claude Code joins the content blocks of answers that carry the
    same message id into one assistant message: with one id for every answer, a session of two
    tool-call steps would show one step in its history, and the script would repeat the second step
    until the agent's wall clock ended the session) and a repeated run gets the same ids."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def _messages(decision, body, n_in, n_out, chunks):
    step = _steps_taken("messages", body)
    if "mcp" in decision or "tool" in decision:
        block = ({"type": "tool_use", "id": f"toolu_mcp_{step}",
                  "name": decision["mcp"]["name"], "input": decision["mcp"]["arguments"]} if "mcp" in decision else
                 {"type": "tool_use", "id": f"toolu_write_{step}", "name": "Bash",
                  "input": {"command": _write_command(decision["tool"]["files"]), "description": "Write the change"}})
        stop = "tool_use"
        deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        start_block = {**block, "input": {}}
    else:
        block = {"type": "text", "text": decision["text"]}
        stop = "end_turn"
        deltas = [{"type": "text_delta", "text": p} for p in _pieces(decision["text"], chunks)]
        start_block = {"type": "text", "text": ""}
    message = {"id": f"msg_{_answer_id(body)}", "type": "message", "role": "assistant", "model": body.get("model"),
               "content": [block], "stop_reason": stop, "stop_sequence": None,
               "usage": {"input_tokens": n_in, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                         "output_tokens": n_out}}
    events = [_sse({"type": "message_start", "message": {**message, "content": [], "stop_reason": None,
                                                         "usage": {**message["usage"], "output_tokens": 1}}}),
              _sse({"type": "content_block_start", "index": 0, "content_block": start_block})]
    events += [_sse({"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas]
    events += [_sse({"type": "content_block_stop", "index": 0}),
               _sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                     "usage": {"output_tokens": n_out}}),
               _sse({"type": "message_stop"})]
    return events, message


def _chat(decision, body, n_in, n_out, chunks):
    usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
             "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
    if "content" in decision:  # a memory policy's call: a plain message
        message = {"role": "assistant", "content": decision["content"]}
    elif "calls" in decision:  # a memory library's call of its own tools (LangMem's `Memory`); none: a plain reply
        message = {"role": "assistant", "content": "Nothing new to remember."}
        if decision["calls"]:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i}", "type": "function", "function": {"name": c["name"],
                                                                    "arguments": json.dumps(c["arguments"])}}
                for i, c in enumerate(decision["calls"], 1)]}
    elif "run" in decision:  # a command the script asks the built-in loop to run (its output joins the history)
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_run", "type": "function",
            "function": {"name": "run", "arguments": json.dumps({"command": decision["run"]})}}]}
    elif "mcp" in decision:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_mcp_{_steps_taken('chat_completions', body)}", "type": "function",
            "function": {"name": decision["mcp"]["name"], "arguments": json.dumps(decision["mcp"]["arguments"])}}]}
    elif "search" in decision:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_search", "type": "function",
            "function": {"name": "search_memory", "arguments": json.dumps({"query": decision["search"]})}}]}
    elif decision.get("reply"):
        message = {"role": "assistant", "content": decision["text"]}
    elif "tool" in decision and any(p.startswith("/") for p in decision["tool"]["files"]):
        # the loop's write_file stays inside /workspace; a path outside it (a skill bank's /skills) is
        # written by one `run` call, as for the CLIs
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "run", "arguments": json.dumps({"command": _write_command(decision["tool"]["files"])})}}]}
    elif "tool" in decision:
        calls = [{"id": f"call_{i}", "type": "function",
                  "function": {"name": "write_file", "arguments": json.dumps({"path": p, "content": t})}}
                 for i, (p, t) in enumerate(decision["tool"]["files"].items(), 1)]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
    else:
        cited = MEMORY_ID.findall(decision["text"])
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_finish", "type": "function", "function": {"name": "finish", "arguments": json.dumps(
                {"summary": decision["text"], "cited_memory_ids": cited})}}]}
    whole = {"id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model"),
             "choices": [{"index": 0, "message": message,
                          "finish_reason": "stop" if "content" in decision or decision.get("reply")
                          or decision.get("calls") == [] else "tool_calls"}],
             "usage": usage}
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": body.get("model")}
    events = [f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': message}]})}\n\n".encode()]
    text = "" if decision.get("reply") else decision.get("text", "")
    events += [f"data: {json.dumps({**base, 'choices': [{'index': 0, 'delta': {'content': p}}]})}\n\n".encode()
               for p in (_pieces(text, chunks) if chunks > 1 else [])]
    events += [f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode(), b"data: [DONE]\n\n"]
    return events, whole


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: "ScriptedUpstream"

    def handle_error(self, request, client_address) -> None:
        # a client that hung up mid-answer (a killed agent, a probe's timeout) is no fault of the
        # server's; socketserver would print its traceback into whatever stderr the process has then
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class ScriptedUpstream:
    """`with ScriptedUpstream(script) as up:` serves on up.base_url (loopback, a free port)."""

    def __init__(self, script: dict[str, Any] | None = None, status: int = 0, delay_s: float = 0.0, chunks: int = 1,
                 key: str | None = None, apis: tuple[str, ...] | None = None, models: tuple[str, ...] | None = None,
                 rpm: int | None = None, max_body: int | None = None, too_large: str | None = None,
                 fail_first: int = 0):
        self.model = ScriptedModel(script or {"sessions": []})
        self.status, self.delay_s, self.chunks = status, delay_s, chunks
        self.key, self.apis, self.models = key, apis, models
        self.rpm, self.max_body = rpm, max_body
        self._window: list[float] = []  # arrival times in the key's last minute (rpm)
        self._window_lock = threading.Lock()
        self.too_large, self.fail_first = too_large, fail_first
        self._limit_lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.upstream = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def over_rate(self) -> bool:
        """Takes a place in the key's one-minute window; True when it is full (a 429)."""
        if not self.rpm:
            return False
        with self._window_lock:
            now = time.monotonic()
            self._window = [t for t in self._window if t > now - 60.0]
            if len(self._window) >= self.rpm:
                return True
            self._window.append(now)
            return False

    def refusal(self, api: str | None, headers: Any, raw: bytes) -> tuple[int, dict[str, Any]] | None:
        """(status, body) of a misconfigured client's answer, in the order real providers check:
        the route, the key, the model; None when the call is served."""
        if api is None or (self.apis is not None and api not in self.apis):
            return 404, {"error": {"type": "invalid_request_error", "code": "unknown_url",
                                   "message": "Unknown request URL. Please check the URL for typos."}}
        if self.key is not None:
            given = headers.get("x-api-key") or (headers.get("Authorization") or "").removeprefix("Bearer ")
            if given != self.key:
                return 401, {"error": {"type": "invalid_request_error", "code": "invalid_api_key",
                                       "message": "Incorrect API key provided."}}
        if self.models is not None:
            try:
                model = json.loads(raw).get("model")
            except (ValueError, AttributeError):
                model = None
            if model not in self.models:
                return 404, {"error": {"type": "invalid_request_error", "code": "model_not_found",
                                       "message": f"The model `{model}` does not exist or you do not have access to it."}}
        return None

    def rate_limited(self, raw: bytes) -> str | None:
        """The message of a 429 this request gets (module doc: `too_large`, `fail_first`), or None."""
        if self.too_large is not None and self.too_large.encode() in raw:
            return (f"Request too large for gpt-4o-mini on tokens per min (TPM): Limit 30000, Requested "
                    f"{30000 + len(raw)}. The input or output tokens must be reduced in order to run successfully.")
        with self._limit_lock:
            if self.fail_first > 0:
                self.fail_first -= 1
                return "Rate limit reached for gpt-4o-mini on requests per min (RPM): Limit 3, Used 3, Requested 1."
        return None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedUpstream":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
