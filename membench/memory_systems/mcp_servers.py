"""MCP memory servers as conditions: the memory people attach to Claude Code or Codex (docs/memory-systems.md,
"MCP memory servers").

A condition here is a stdio MCP server, started on the host once per namespace (run set, condition,
seed, sequence) with its own store directory, so the store stays outside the agent's sandbox and no
namespace sees another's. The server runs in a network namespace of its own (bwrap
`--unshare-net`: loopback only), so it cannot reach anything but itself whatever it tries.

It is agent-driven: membench puts nothing into the agent's prompt (`agent_driven`). During a
session the agent has the server's own tools — relayed through the gateway to codex and claude-code
(membench/agents/inside/mcp_relay.py), as functions to the built-in `openai:` loop, and directly
to the scripted agents — and each call is recorded by McpSessionTools as a MemoryRead (a tool that
only reads) or a MemoryWrite (any other), with its arguments and result. What arrives after a
session (a review, a decision, a failure: the pack's delivered events) is filed by the harness
through the server's own write tool, as a user's hook would, each a MemoryWrite whose provenance is
the delivered event.

`write(events)` and `read(query, budget)` go through the server's tools too (a ToolDriver says
which tools and how): they are what the harness files and what the conformance suite
(`membench memory check`) drives.

Servers are registered by name (MCP_SERVERS): MCP-KG and MCP-BASIC are built in; a user adds any
stdio server with `register_mcp_server` or the JSON of MEMBENCH_MCP_SERVERS (the CLI reads it at
start-up), naming the command, its store and the tools to write and search with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace, count_tokens
from membench.memory_systems.mcp_client import McpError, StdioMcpClient, result_text
from membench.memory_systems.text import pieces
from membench.schemas.events import Event, bounded_text

# the prefix deploy/mcp-memory/install.sh fills (the pinned servers), or $MEMBENCH_MCP_PREFIX
DEFAULT_PREFIX = Path(__file__).resolve().parents[2] / "deploy" / "mcp-memory" / ".work" / "prefix"
STOPWORDS = frozenset("""a an and are as at be by does for from has have how in into is it its of on or that the
their them then there these this to was what when where which who why will with your you project""".split())
READ_WORDS = re.compile(r"(^|_)(search|read|open|get|list|find|fetch|view|cat|grep|ls|tail|recent|build|man|"
                        r"diagnostics)(_|$)")


def mcp_prefix() -> Path:
    return Path(os.environ.get("MEMBENCH_MCP_PREFIX") or DEFAULT_PREFIX)


def keywords(query: str) -> list[str]:
    """The words of QUERY a substring search can find: lower case, three characters or more, no stop words."""
    words = [w.lower() for w in re.findall(r"[A-Za-z0-9_-]{3,}", query)]
    return [w for w in dict.fromkeys(words) if w not in STOPWORDS]


def note_id(text: str) -> str:
    return "note-" + hashlib.sha256(text.encode()).hexdigest()[:12]


# ------------------------------------------------------------------------------------ tool drivers
@dataclass(frozen=True)
class ToolDriver:
    """How a memory fact is written and a query searched with a server's own tools.

    kind `knowledge-graph` (the reference server): create_entities, then search_nodes once per
    keyword of the query (its search is a substring match of the whole query), entities ranked by
    the keywords they match. kind `notes` (basic-memory): write_note, search_notes, then read_note
    of each hit. kind `template`: a write tool and a search tool whose arguments are templates
    ({id}, {title}, {text}, {query}); each search result is one item."""

    kind: str
    write_tool: str = ""
    write_arguments: Mapping[str, Any] = field(default_factory=dict)
    search_tool: str = ""
    search_arguments: Mapping[str, Any] = field(default_factory=dict)

    def write_calls(self, memory_id: str, text: str, title: str = "") -> list[tuple[str, dict[str, Any]]]:
        if self.kind == "knowledge-graph":
            return [("create_entities", {"entities": [{"name": memory_id, "entityType": title or "note",
                                                       "observations": [text]}]})]
        if self.kind == "notes":
            return [("write_note", {"title": memory_id, "content": text, "directory": "memory"})]
        return [(self.write_tool, _fill(self.write_arguments, id=memory_id, title=title or memory_id, text=text))]

    def search_calls(self, query: str) -> list[tuple[str, dict[str, Any]]]:
        if self.kind == "knowledge-graph":
            return [("search_nodes", {"query": word}) for word in keywords(query)]
        if self.kind == "notes":
            # any-term text search (OR): a full question rarely shares every word with a note
            terms = keywords(query)
            return [("search_notes", {"query": " OR ".join(terms), "search_type": "text"})] if terms else []
        return [(self.search_tool, _fill(self.search_arguments, query=query))]

    def items(self, call: Callable[[str, dict[str, Any]], dict[str, Any]], query: str) -> list[MemoryItem]:
        """The memories QUERY finds, best first, every tool call made through CALL."""
        if self.kind == "knowledge-graph":
            hits: dict[str, list[Any]] = {}
            for tool, args in self.search_calls(query):
                for entity in _graph(call(tool, args)).get("entities", []):
                    name = str(entity.get("name"))
                    entry = hits.setdefault(name, [0, entity])
                    entry[0] += 1
            # ties keep the server's own order (its file's): a name may differ between two stores
            ranked = sorted(hits.items(), key=lambda kv: -kv[1][0])
            return [MemoryItem(name, str(e.get("entityType") or "entity"), "\n".join(map(str, e.get("observations") or [])))
                    for name, (_, e) in ranked]
        if self.kind == "notes":
            found = []
            for tool, args in self.search_calls(query):
                text = result_text(call(tool, args))
                for permalink in re.findall(r"^- permalink: (\S+)", text, flags=re.M):
                    body = result_text(call("read_note", {"identifier": permalink}))
                    found.append(MemoryItem(permalink.rsplit("/", 1)[-1], "note", _note_body(body)))
            return found
        return [MemoryItem(note_id(text), "mcp", text)
                for tool, args in self.search_calls(query)
                if (text := result_text(call(tool, args)).strip())]


def _fill(template: Any, **values: str) -> Any:
    if isinstance(template, str):
        return template.format(**values)
    if isinstance(template, Mapping):
        return {k: _fill(v, **values) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, **values) for v in template]
    return template


def _graph(result: dict[str, Any]) -> dict[str, Any]:
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    try:
        graph = json.loads(result_text(result) or "{}")
    except ValueError:
        return {}
    return graph if isinstance(graph, dict) else {}


def _note_body(text: str) -> str:
    """A note read back by basic-memory, less its front matter and the project footer it appends."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)
    return re.sub(r"\n*\[Project: [^\n]*\]\s*\Z", "", text).strip()


# ------------------------------------------------------------------------------------ the registry
@dataclass(frozen=True)
class McpServerSpec:
    """A stdio MCP memory server: its argv and environment ({store} is the namespace's store
    directory, {prefix} the install prefix), the tools it is driven with, and what it is (package
    and version, recorded with its conformance configuration)."""

    name: str
    command: tuple[str, ...]
    driver: ToolDriver
    env: Mapping[str, str] = field(default_factory=dict)
    package: str = ""
    version: str = ""
    start_timeout_s: float = 120.0
    timeout_s: float = 60.0
    # why the server cannot run on this machine (its check says so); the installer says it in
    # {prefix}/<name>.unavailable when it cannot install the server here
    blocked: str | None = None

    def argv(self, store: Path) -> list[str]:
        return [part.format(store=store, prefix=mcp_prefix()) for part in self.command]

    def environment(self, store: Path) -> dict[str, str]:
        return {k: v.format(store=store, prefix=mcp_prefix()) for k, v in self.env.items()}

    def check(self) -> tuple[bool, str]:
        """Whether the server can start here: its program exists (a blocked server says why not)."""
        if self.blocked:
            return False, self.blocked
        marker = mcp_prefix() / f"{self.name}.unavailable"  # the installer found this machine cannot run it
        if marker.is_file():
            return False, marker.read_text(encoding="utf-8").strip()
        program = self.argv(Path("/nonexistent"))
        missing = [p for p in program[:2] if p.startswith("/") and not Path(p).exists()]
        if missing or shutil.which(program[0]) is None:
            return False, f"{missing[0] if missing else program[0]} is missing: run deploy/mcp-memory/install.sh"
        return True, f"ok ({self.package} {self.version})".replace(" )", ")")

    def record(self) -> dict[str, Any]:
        return {"server": self.name, "library": self.package or self.name, "command": list(self.command),
                "env": dict(self.env), "package": self.package, "version": self.version, "driver": self.driver.kind,
                "start_timeout_s": self.start_timeout_s,
                "tools": {"write": self.driver.write_tool, "search": self.driver.search_tool} if self.driver.kind == "template" else None}


KG_VERSION = "2026.8.31"
BASIC_MEMORY_VERSION = "0.24.1"
MCP_SERVERS: dict[str, McpServerSpec] = {
    # the reference knowledge-graph server (npm): one JSONL file
    "MCP-KG": McpServerSpec(
        "MCP-KG", ("node", "{prefix}/kg/node_modules/@modelcontextprotocol/server-memory/dist/index.js"),
        ToolDriver("knowledge-graph"), env={"MEMORY_FILE_PATH": "{store}/memory.jsonl"},
        package="@modelcontextprotocol/server-memory", version=KG_VERSION),
    # basic-memory (PyPI): Markdown notes and a SQLite index; text search (its semantic search would
    # download an embedding model); its config, database and home all in the store
    "MCP-BASIC": McpServerSpec(
        "MCP-BASIC", ("{prefix}/basic-memory/bin/basic-memory", "mcp", "--transport", "stdio"),
        ToolDriver("notes"), env={"HOME": "{store}", "BASIC_MEMORY_HOME": "{store}/notes",
                                  "BASIC_MEMORY_CONFIG_DIR": "{store}/config",
                                  "BASIC_MEMORY_DEFAULT_SEARCH_TYPE": "text", "BASIC_MEMORY_AUTO_UPDATE": "false",
                                  "BASIC_MEMORY_LOGFIRE_ENABLED": "false", "FASTMCP_CHECK_FOR_UPDATES": "off"},
        # its start imports a web framework and builds its index: 10-20 s idle, over a minute on a busy machine
        package="basic-memory", version=BASIC_MEMORY_VERSION, start_timeout_s=300.0),
}
BUILT_IN_SERVERS = frozenset(MCP_SERVERS)


def spec_from_json(name: str, value: Any, where: str = "MEMBENCH_MCP_SERVERS") -> McpServerSpec:
    """A user's server: {"command": [...], "env": {...}, "write": {"tool", "arguments"},
    "search": {"tool", "arguments"}} (templates: module docstring of ToolDriver), or "driver":
    "knowledge-graph" | "notes" for a server with the tools of MCP-KG or MCP-BASIC."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: '{name}' must be an object with command, write and search")
    command = value.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise ValueError(f"{where}: '{name}'.command must be a non-empty list of strings")
    kind = value.get("driver", "template")
    if kind in ("knowledge-graph", "notes"):
        driver = ToolDriver(kind)
    elif kind == "template":
        parts = {}
        for key in ("write", "search"):
            part = value.get(key)
            if not isinstance(part, dict) or not isinstance(part.get("tool"), str) or \
                    not isinstance(part.get("arguments", {}), dict):
                raise ValueError(f"{where}: '{name}'.{key} must be {{\"tool\": NAME, \"arguments\": {{...}}}}")
            parts[key] = part
        driver = ToolDriver("template", parts["write"]["tool"], parts["write"].get("arguments", {}),
                            parts["search"]["tool"], parts["search"].get("arguments", {}))
    else:
        raise ValueError(f"{where}: '{name}'.driver must be knowledge-graph, notes or template, not {kind!r}")
    env = value.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ValueError(f"{where}: '{name}'.env must be an object of strings")
    return McpServerSpec(name, tuple(command), driver, env, package=str(value.get("package", "")),
                         version=str(value.get("version", "")), timeout_s=float(value.get("timeout_s", 60)),
                         start_timeout_s=float(value.get("start_timeout_s", 120)))


def servers_from_env(value: str | None) -> dict[str, McpServerSpec]:
    if not value:
        return {}
    try:
        config = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"MEMBENCH_MCP_SERVERS is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError("MEMBENCH_MCP_SERVERS must be a JSON object {name: {command, write, search}}")
    return {name: spec_from_json(name, spec) for name, spec in config.items()}


# ------------------------------------------------------------------------------------ a namespace's server
def isolated(argv: list[str]) -> list[str]:
    """ARGV in a network namespace of its own (loopback only); the file system as it is."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise McpError("bwrap is missing: MCP memory servers run without network inside it (apt install bubblewrap)")
    return [bwrap, "--dev-bind", "/", "/", "--unshare-net", "--die-with-parent", "--", *argv]


def namespace_dir(namespace: Namespace) -> str:
    digest = hashlib.sha256(str(namespace).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", f"{namespace.condition}-s{namespace.seed}-{namespace.sequence}")[:80]
    return f"{safe}-{digest}"


class McpMemory:
    """One namespace's MCP memory server (module docstring)."""

    uses_memory = True
    accepts_setup = True
    agent_driven = True
    network_isolation = "the server runs in a network namespace of its own, loopback only (bwrap --unshare-net)"

    def __init__(self, spec: McpServerSpec, namespace: Namespace, setup: MemorySetup | None = None):
        ok, why = spec.check()
        if not ok:
            raise RuntimeError(f"MCP memory server {spec.name}: {why}")
        self.spec = spec
        self.condition = namespace.condition
        self.namespace = namespace
        setup = setup or MemorySetup()
        self._scopes = setup.event_scopes
        if setup.store_dir is not None:
            self.store = Path(setup.store_dir) / "mcp" / namespace_dir(namespace)
            self._temporary = False
            # the namespace starts empty with its unit: a retried unit never reads its earlier attempt
            shutil.rmtree(self.store, ignore_errors=True)
        else:
            self.store = Path(tempfile.mkdtemp(prefix="membench-mcp-"))
            self._temporary = True
        self.store.mkdir(parents=True, exist_ok=True)
        try:
            self.client = self._start()
        except McpError as first:
            # a server that died before its first answer is started once more (seen once in ~50
            # starts of MCP-KG on a busy machine, cause not found); a second failure names both
            try:
                self.client = self._start()
            except McpError as second:
                raise McpError(f"{second} (and at the first start: {first})") from None
        self._tools: list[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def _start(self) -> StdioMcpClient:
        return StdioMcpClient(isolated(self.spec.argv(self.store)), self.spec.environment(self.store),
                              cwd=str(self.store), timeout_s=self.spec.timeout_s,
                              start_timeout_s=self.spec.start_timeout_s)

    # ------------------------------------------------------------------ the server's tools
    def tools(self) -> list[dict[str, Any]]:
        with self._lock:
            if self._tools is None:
                self._tools = self.client.list_tools()
            return self._tools

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return self.client.call_tool(tool, arguments)

    def reads_only(self, tool: str) -> bool:
        """Whether TOOL only reads: its annotation says so, else its name (search_*, read_*, open_*, ...)."""
        for entry in self.tools():
            if entry.get("name") == tool and (entry.get("annotations") or {}).get("readOnlyHint") is not None:
                return bool(entry["annotations"]["readOnlyHint"])
        return bool(READ_WORDS.search(tool))

    # ------------------------------------------------------------------ the memory-system protocol
    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        """File the session's delivered events (a review, a decision, a failure) through the server's
        write tool; the session's own text (instruction, replies) is the agent's to keep or not."""
        written = []
        for piece in pieces(events):
            if piece.source_event_id is None:
                continue  # only what arrived after the session is filed; the rest the agent saw, and keeps or not
            memory_id = note_id(f"{self.namespace}\0{piece.event_id}\0{piece.text}")
            for tool, args in self.spec.driver.write_calls(memory_id, piece.text, piece.label or "note"):
                result = self.call(tool, args)
                if result.get("isError"):
                    raise McpError(f"{self.spec.name}: {tool} failed: {result_text(result)[:300]}")
            written.append(MemoryItem(memory_id, f"mcp:{piece.label or 'note'}", piece.text, (piece.event_id,),
                                      tuple(self._scopes.get(piece.source_event_id or "", ()))))
        return written

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        found = self.spec.driver.items(self.call, query)
        admitted, used = [], 0
        for item in found:
            if used + item.tokens > budget_tokens:
                continue
            admitted.append(item)
            used += item.tokens
        return MemoryContext(tuple(admitted), tuple(i.memory_id for i in found), budget_tokens)

    def close(self) -> None:
        self.client.close()
        if self._temporary:
            shutil.rmtree(self.store, ignore_errors=True)


def mcp_factory(spec: McpServerSpec) -> Callable[..., McpMemory]:
    def make(namespace: Namespace, setup: MemorySetup | None = None) -> McpMemory:
        return McpMemory(spec, namespace, setup)

    make.condition = spec.name  # type: ignore[attr-defined]
    make.accepts_setup = True  # type: ignore[attr-defined]
    make.agent_driven = True  # type: ignore[attr-defined]
    make.mcp_spec = spec  # type: ignore[attr-defined]
    make.start_timeout_s = spec.start_timeout_s  # type: ignore[attr-defined]
    make.__module__ = __name__
    make.__qualname__ = f"mcp_factory[{spec.name}]"
    return make


# ------------------------------------------------------------------------------------ a session's tools
class McpSessionTools:
    """The server's tools for one session, every call recorded: a MemoryRead for a tool that only
    reads (the result as its context, the memories it names as admitted), a MemoryWrite for any
    other (the arguments and the result as its content). Reached by the gateway's memory route
    (`list`, `call`) and called directly by the scripted agents."""

    def __init__(self, memory: McpMemory, token_budget: int, provenance: Callable[[], list[str]] | None = None):
        self.memory = memory
        self.driver = memory.spec.driver
        self._budget = token_budget
        self._provenance = provenance or (lambda: [])
        self.emit: Callable[..., Any] | None = None
        self._count = 0
        self._lock = threading.Lock()

    def call(self, route: str, args: dict[str, Any]) -> dict[str, Any]:
        """The gateway's memory route: `list` -> {tools}, `call` {name, arguments} -> the tool's result."""
        if route == "list":
            return {"tools": self.memory.tools()}
        if route == "call":
            name, arguments = args.get("name"), args.get("arguments") or {}
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise ValueError("call: 'name' must be a string and 'arguments' an object")
            return self.tool(name, arguments)
        raise KeyError(f"no MCP memory route '{route}' (list, call)")

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name not in {t.get("name") for t in self.memory.tools()}:
            raise KeyError(f"the memory server has no tool '{name}'")
        try:
            result = self.memory.call(name, arguments)
        except McpError as exc:  # the agent sees the failure as a tool error
            result = {"content": [{"type": "text", "text": f"memory server error: {exc}"}], "isError": True}
        self._record(name, arguments, result)
        return result

    def search(self, query: str) -> list[MemoryItem]:
        """The driver's search, each of its tool calls recorded (the scripted agents' look-up)."""
        return self.driver.items(lambda tool, args: self.tool(tool, args), query)

    def remember(self, text: str, title: str = "note") -> str:
        memory_id = note_id(f"{self.memory.namespace}\0agent\0{text}")
        for tool, args in self.driver.write_calls(memory_id, text, title):
            self.tool(tool, args)
        return memory_id

    def _record(self, name: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        if self.emit is None:
            return
        text = result_text(result)
        call = json.dumps({"tool": name, "arguments": arguments}, sort_keys=True)
        with self._lock:
            self._count += 1
            count = self._count
        if self.memory.reads_only(name) and not result.get("isError"):
            named = _named_memories(name, result)
            self.emit("MemoryRead", {
                "query": bounded_text(call), "candidates": named, "admitted_ids": named,
                "tokens_admitted": count_tokens(text) if text else 0, "token_budget": 0,
                "context": bounded_text(text)}, "agent")
            return
        memory_ids = _written_ids(name, arguments) or [f"mcp-call-{count}"]
        content = json.dumps({"tool": name, "arguments": arguments, "is_error": bool(result.get("isError")),
                              "result": text}, sort_keys=True)
        for memory_id in memory_ids:
            self.emit("MemoryWrite", {
                "memory_id": memory_id, "memory_type": f"mcp:{name}", "scope": [],
                "provenance_event_ids": self._provenance(), "content": bounded_text(content)}, "agent")


def session_tools(memory: Any, emitter: Any, token_budget: int) -> McpSessionTools | None:
    """The session's tools of an agent-driven MEMORY, recorded by EMITTER (a model agent re-points
    `emit` at its gateway channel); None for any other memory. An agent's write is attributed to
    the session's instruction, what it acted on."""
    if not getattr(memory, "agent_driven", False):
        return None
    session = emitter.session_index

    def provenance() -> list[str]:
        return [e.event_id for e in emitter.emitted if e.session_index == session and e.kind == "Turn"
                and e.visibility == "agent" and e.payload.get("role") == "user"][:1]

    tools = McpSessionTools(memory, token_budget, provenance)
    tools.emit = emitter.emit
    return tools


def _named_memories(tool: str, result: dict[str, Any]) -> list[str]:
    """The memories a read returned, by the ids their writes were recorded under (entity names, note titles)."""
    graph = _graph(result)
    if graph.get("entities"):
        return [str(e.get("name")) for e in graph["entities"] if isinstance(e, dict)]
    text = result_text(result)
    found = re.findall(r"^- permalink: \S*/([^/\s]+)$", text, flags=re.M)
    found += re.findall(r"^title: (\S+)$", text, flags=re.M)
    return list(dict.fromkeys(found))


def _written_ids(tool: str, arguments: dict[str, Any]) -> list[str]:
    entities = arguments.get("entities")
    if isinstance(entities, list):
        return [str(e.get("name")) for e in entities if isinstance(e, dict) and e.get("name")]
    observations = arguments.get("observations")
    if isinstance(observations, list):
        return [str(o.get("entityName")) for o in observations if isinstance(o, dict) and o.get("entityName")]
    if isinstance(arguments.get("title"), str):
        return [re.sub(r"[^a-z0-9]+", "-", arguments["title"].lower()).strip("-")]
    return []
