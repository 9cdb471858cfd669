"""Real memory libraries behind the memory-system protocol (docs/memory-systems.md).

- `B5-MEM0` — Mem0 (the open-source `mem0ai` package, pinned in pyproject.toml) as it runs natively:
  `add(..., infer=True)`, its model extracts facts from a session's messages.
- `B5-MEM0-LIT` — Mem0 with fact inference off (`infer=False`): every agent-visible text is stored
  literally, one memory per text (DreamBench-SWE's literal lane).
- `B2-dense` — dense retrieval on a real vector database (Qdrant's embedded local mode): every
  agent-visible text is one point, a read is the top 6 by cosine similarity of the query's vector.
- `B5-LANGMEM` — LangMem (`langmem`) as its documentation sets it up: its memory store manager
  extracts, updates and deletes memories after each session (its model sees the session and the
  namespace's most similar memories) over LangGraph's InMemoryStore; a read is the store's top 6.

The Mem0 and Qdrant conditions run in-process on an embedded Qdrant store on disk under the run set
(`runs/<run set>/memory/<condition>/`), shared by the condition's namespaces and isolated by
`user_id` (external.mem0_ids: one per run set, condition, seed and sequence; reset when a unit
starts, so a retried unit never reads its earlier attempt). B5-LANGMEM keeps one InMemoryStore per
unit, under the LangGraph namespace ("membench", user_id), that lives and dies with the unit
(LangMemMemory). Their model calls — Mem0's and LangMem's extraction and every embedding — go
through the run set's model gateway on the unit's memory channel (Mem0's and LangChain's OpenAI
clients are given an HTTP transport over the channel's Unix socket; B2-dense and LangMem's store
post their `/v1/embeddings` requests to that socket themselves, without the OpenAI SDK or tiktoken):
keys, ModelCall events (purpose `sleep` for extraction, `embed` for embeddings), prices, record and
replay apply as for every model call. Nothing else leaves the process: Mem0's telemetry is off
(MEM0_TELEMETRY=False before it is imported; checked after), its config directory is private, and
spaCy (whose absence makes Mem0 skip lemmatization and entity extraction, and whose presence could
download a model) is never installed by membench; LangSmith tracing is off for every LangMem call
(checked at each).

Each is `model_driven` (it needs `--memory-model`, the model its library calls; `B2-dense` and
`B5-MEM0-LIT` only embed, but through the same gateway channel). The settings of a condition
(SETTINGS) are recorded in the log when its memory starts: a harness Turn of source_kind
`memory_settings` holding them as JSON, with the library's version.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.external import mem0_ids
from membench.memory_systems.model_client import PURPOSE_HEADER
from membench.memory_systems.text import pieces
from membench.schemas.events import Event, bounded_text

GATEWAY_BASE = "http://membench-gateway/v1"  # the host name is never resolved: the transport is the socket
PLACEHOLDER_KEY = "membench-gateway"  # the gateway drops it and sets the provider's key


@dataclass(frozen=True)
class LibrarySettings:
    """Everything that decides a library condition's behaviour (recorded in the log)."""

    library: str
    infer: bool = False
    top_k: int = 6  # DreamBench-SWE's harness: 6 retrieved memories
    threshold: float = 0.0  # no score floor: the read budget and top_k decide what is admitted
    embed_model: str = "text-embedding-3-small"
    embed_dims: int = 1536
    vector_store: str = "qdrant-local"
    # the library's own settings beyond those above, recorded as they are; and the packages besides the
    # library whose versions decide its behaviour (recorded as `<name>: version`). Neither adds a key to
    # the record of a condition that has none, so the Mem0 and Qdrant records (and the digests of their
    # conformance configurations) are what they were before LangMem.
    options: tuple[tuple[str, Any], ...] = ()
    companions: tuple[str, ...] = ("qdrant-client",)


# B5-LANGMEM: LangMem's memory store manager as its documentation sets it up (its default
# instructions and Memory schema; inserts, updates and deletes on; the 5 existing memories most like
# the session's last message shown to the model; one extraction step), its model through LangChain's
# ChatOpenAI on Chat Completions at temperature 0 (which langchain-openai drops for gpt-5 models but
# gpt-5-chat: they take only the default), over LangGraph's InMemoryStore indexed on the whole
# stored value ("$", LangGraph's default) with the embedder below; reads are the store's top 6 by cosine.
LANGMEM_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("api", "create_memory_store_manager"), ("schemas", "Memory"), ("instructions", "langmem default"),
    ("enable_inserts", True), ("enable_updates", True), ("enable_deletes", True), ("query_limit", 5),
    ("max_steps", 1), ("chat_model", "langchain_openai.ChatOpenAI"), ("chat_api", "chat_completions"),
    ("temperature", 0), ("index_fields", ("$",)), ("store_scope", "unit"))

SETTINGS: dict[str, LibrarySettings] = {
    "B5-MEM0": LibrarySettings("mem0ai", infer=True),
    "B5-MEM0-LIT": LibrarySettings("mem0ai", infer=False),
    "B2-dense": LibrarySettings("qdrant-client"),
    "B5-LANGMEM": LibrarySettings("langmem", infer=True, vector_store="langgraph-inmemory", options=LANGMEM_OPTIONS,
                                  companions=("trustcall", "langgraph", "langgraph-checkpoint", "langchain-core",
                                              "langchain-openai")),
}


class LibraryUnavailable(RuntimeError):
    """The library cannot run here (not installed, telemetry could not be turned off, no gateway)."""


class EmbeddingError(RuntimeError):
    """An embeddings call answered, but not with the vectors asked for (an error status, a wrong shape)."""


def library_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def settings_record(condition: str) -> dict[str, Any]:
    s = SETTINGS[condition]
    fields = {k: v for k, v in asdict(s).items() if k not in ("options", "companions")}
    return {"condition": condition, **fields, **{k: list(v) if isinstance(v, tuple) else v for k, v in s.options},
            "version": library_version(s.library), **{c.replace("-", "_"): library_version(c) for c in s.companions}}


# ------------------------------------------------------------------------------ the gateway client
def gateway_client(channel: Any, purpose: str) -> Any:
    """An OpenAI client whose every request goes to CHANNEL's socket (never the network); no retries:
    a failed call is the gateway's to record, and a retry would change what replay must answer."""
    import httpx
    import openai

    http = httpx.Client(transport=httpx.HTTPTransport(uds=str(channel.socket_path)),
                        timeout=channel.gateway.settings.timeout_s + 30)
    # `Connection: close`: the channel waits for its connections' handlers when the unit ends, so no
    # connection may be kept alive past its call
    # (openai's annotation names httpx2's client; it takes httpx's as well, and checks it at run time)
    return openai.OpenAI(api_key=PLACEHOLDER_KEY, base_url=GATEWAY_BASE, http_client=http,  # type: ignore[arg-type]
                         max_retries=0,
                         default_headers={PURPOSE_HEADER: purpose, "Connection": "close"})


def post_embeddings(channel: Any, settings: LibrarySettings, texts: list[str]) -> list[list[float]]:
    """One `POST /v1/embeddings` on a unit's memory channel, spoken directly (http.client over the
    channel's socket, as the model-driven policies ask): the OpenAI SDK, which Mem0 needs, would
    cost B2-dense ~2 s of CPU per process to import for one plain JSON call, and LangChain's OpenAI
    embeddings would count tokens with tiktoken, which downloads its encodings."""
    body = json.dumps({"model": settings.embed_model, "input": texts, "dimensions": settings.embed_dims,
                       "encoding_format": "float"}).encode()
    connection = channel.http_connection(channel.gateway.settings.timeout_s + 30)
    try:
        connection.request("POST", "/v1/embeddings", body=body,
                           headers={"Content-Type": "application/json", PURPOSE_HEADER: "embed"})
        response = connection.getresponse()
        status, data = response.status, response.read()
    finally:
        connection.close()
    if channel.failure is not None:  # the model is down (the probe failed too): the unit is excluded
        raise channel.failure
    if status >= 400:
        raise EmbeddingError(f"the embeddings call was answered HTTP {status}: {data[:300]!r}")
    try:
        rows = sorted(json.loads(data)["data"], key=lambda d: d["index"])
        vectors = [[float(x) for x in row["embedding"]] for row in rows]
    except (ValueError, KeyError, TypeError) as exc:
        raise EmbeddingError(f"the embeddings answer is not an embeddings list: {exc}") from None
    if len(vectors) != len(texts) or any(len(v) != settings.embed_dims for v in vectors):
        raise EmbeddingError(f"the embeddings answer has {len(vectors)} vectors for {len(texts)} texts "
                             f"(or not {settings.embed_dims} dimensions)")
    return vectors


def _channel(setup: MemorySetup, condition: str) -> Any:
    model = setup.model
    if model is None:
        raise LibraryUnavailable(f"{condition} calls its model and embedder through the run set's model gateway: "
                                 "run it with --memory-model MODEL and --model-base-url URL (or --model-replay)")
    return model.channel()


def _raise_channel_failure(channel: Any, exc: BaseException) -> None:
    """A call the gateway could not answer (the model down, its probe failing too) excludes the unit,
    as for any model call: the channel's failure replaces whatever the library made of it."""
    if channel.failure is not None:
        raise channel.failure from None
    raise exc


# ------------------------------------------------------------------------------ shared stores
_STORES: dict[str, Any] = {}
_STORES_LOCK = threading.Lock()


@dataclass
class _Store:
    handle: Any  # a mem0 Memory or a QdrantClient
    lock: threading.Lock


def store_root(setup: MemorySetup, namespace: Namespace) -> Path:
    """Where a condition's store lives: under the run set when the runner says where (setup.store_dir),
    else a private temporary directory (tests, `memory check`)."""
    if setup.store_dir is not None:
        return Path(setup.store_dir)
    return Path(tempfile.gettempdir()) / f"membench-memory-{os.getuid()}" / namespace.run_set


def _shared(path: Path, make) -> _Store:
    # Qdrant's local mode locks its folder per client: one client per folder per process, shared by
    # the condition's namespaces (serialized by the store's lock)
    key = str(path.resolve())
    with _STORES_LOCK:
        if key not in _STORES:
            path.mkdir(parents=True, exist_ok=True)
            _STORES[key] = _Store(make(path), threading.Lock())
        return _STORES[key]


@atexit.register
def _close_stores() -> None:
    """Close every shared store while the interpreter is still whole. An embedded Qdrant client left
    to the interpreter's teardown closes itself in `__del__` by importing portalocker after the
    import system is gone, and prints a traceback on every exit of a process that used one."""
    with _STORES_LOCK:
        stores = list(_STORES.values())
        _STORES.clear()
    for store in stores:
        # a QdrantClient, or a mem0 Memory (its SQLite history) and the QdrantClient under it
        vector_client = getattr(getattr(store.handle, "vector_store", None), "client", None)
        for handle in (store.handle, vector_client):
            close = getattr(handle, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 — exiting anyway; one store must not keep the rest open
                    pass


def _import_mem0() -> Any:
    os.environ["MEM0_TELEMETRY"] = "False"
    # Mem0 keeps a config.json (an anonymous id) in MEM0_DIR, by default ~/.mem0: a private directory
    # instead, one per user (written atomically by Mem0, so concurrent processes may share it)
    os.environ.setdefault("MEM0_DIR", os.path.join(tempfile.gettempdir(), f"membench-mem0-home-{os.getuid()}"))
    try:
        import mem0
        from mem0.memory import telemetry
    except ImportError as exc:
        raise LibraryUnavailable(f"mem0ai is not installed ({exc}); deploy/setup-env.sh installs it") from None
    if telemetry.MEM0_TELEMETRY is not False:  # imported earlier with it on: its client is closed, it is off
        telemetry.MEM0_TELEMETRY = False
        client = getattr(telemetry, "client_telemetry", None)
        if client is not None:
            client.close()
    if telemetry.MEM0_TELEMETRY is not False or getattr(getattr(telemetry, "client_telemetry", None),
                                                        "posthog", None) is not None:
        raise LibraryUnavailable("Mem0's telemetry could not be turned off")
    return mem0


def _mem0_config(path: Path, condition: str, model: str) -> dict[str, Any]:
    s = SETTINGS[condition]
    return {
        "vector_store": {"provider": "qdrant", "config": {
            "collection_name": "membench", "path": str(path / "qdrant"), "on_disk": True,
            "embedding_model_dims": s.embed_dims}},
        "llm": {"provider": "openai", "config": {"model": model, "temperature": 0, "api_key": PLACEHOLDER_KEY,
                                                 "openai_base_url": GATEWAY_BASE}},
        "embedder": {"provider": "openai", "config": {"model": s.embed_model, "embedding_dims": s.embed_dims,
                                                      "api_key": PLACEHOLDER_KEY, "openai_base_url": GATEWAY_BASE}},
        "history_db_path": str(path / "history.db"),
    }


def _note_settings(setup: MemorySetup, condition: str) -> None:
    if setup.model is not None:
        setup.model.emit("Turn", {"role": "system", "text": bounded_text(json.dumps(settings_record(condition),
                                                                                    sort_keys=True)),
                                  "source_event_id": None, "source_kind": "memory_settings", "input_tokens": 0,
                                  "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0},
                         visibility="harness")


def _role(label: str) -> str:
    return "assistant" if label == "agent" else "user"


class _LibraryMemory:
    uses_memory = True
    accepts_setup = True
    model_driven = True
    condition = ""
    _store: Any  # the library's store and its lock (_open)

    def __init__(self, namespace: Namespace, setup: MemorySetup):
        self.namespace = namespace
        self.settings = SETTINGS[self.condition]
        self.user_id = mem0_ids(namespace)["user_id"]
        self._channel = _channel(setup, self.condition)
        self._root = store_root(setup, namespace) / self.condition
        self._open()
        self._reset()
        _note_settings(setup, self.condition)

    # each library's own: open its store, bind this condition's clients to it, empty the namespace
    def _open(self) -> None:
        raise NotImplementedError

    def _bind(self) -> None:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError

    def _guarded(self, fn, *args, **kwargs):
        with self._store.lock:
            self._bind()
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 (the channel's failure, when there is one, is the cause)
                _raise_channel_failure(self._channel, exc)

    def _admit(self, found: list[tuple[str, str]], budget_tokens: int) -> MemoryContext:
        admitted, used = [], 0
        for memory_id, text in found:
            item = MemoryItem(memory_id, self.condition, text)
            if used + item.tokens > budget_tokens:  # dropped, never cut
                continue
            admitted.append(item)
            used += item.tokens
        return MemoryContext(tuple(admitted), tuple(i for i, _ in found), budget_tokens)


class Mem0Memory(_LibraryMemory):
    """Mem0, native (B5-MEM0) or literal (B5-MEM0-LIT)."""

    def _open(self) -> None:
        mem0 = _import_mem0()
        model = self._channel_model()
        self._store = _shared(self._root, lambda p: mem0.Memory.from_config(_mem0_config(p, self.condition, model)))
        self._llm_client = gateway_client(self._channel, "sleep")
        self._embed_client = gateway_client(self._channel, "embed")

    def _channel_model(self) -> str:
        return self._model_name

    def __init__(self, namespace: Namespace, setup: MemorySetup):
        self._model_name = setup.model.model if setup.model is not None else ""
        super().__init__(namespace, setup)

    def _bind(self) -> None:
        # the store is shared; its clients are this unit's channel for the call (under the store's lock)
        self._store.handle.llm.client = self._llm_client
        self._store.handle.embedding_model.client = self._embed_client

    def _reset(self) -> None:
        """The namespace starts empty: its memories (Qdrant) and its session context — Mem0 keeps the last
        10 messages added per session scope (here the user_id) in its SQLite `messages` table and puts
        them into every native extraction prompt; `delete_all` leaves them, so an abandoned attempt's
        messages would reach the retried unit's first extraction (and make its request differ from a
        replay's)."""
        self._guarded(self._store.handle.delete_all, user_id=self.user_id)
        self._guarded(self._forget_messages)

    def _forget_messages(self) -> None:
        from mem0.memory.main import _build_session_scope  # the scope Mem0 saves and reads messages under

        db = self._store.handle.db
        with db._lock:
            db.connection.execute("DELETE FROM messages WHERE session_scope = ?",
                                  (_build_session_scope({"user_id": self.user_id}),))
            db.connection.commit()

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        found = pieces(events)
        if not found:
            return []
        memory = self._store.handle
        meta = {"membench_namespace": str(self.namespace)}
        stored = []
        if self.settings.infer:  # one session, one extraction call (Mem0's own batching)
            messages = [{"role": _role(p.label), "content": p.text} for p in found]
            result = self._guarded(memory.add, messages, user_id=self.user_id, metadata=meta, infer=True)
            provenance = tuple(p.event_id for p in found)
            stored += [MemoryItem(str(r["id"]), self.condition, str(r.get("memory", "")), provenance)
                       for r in (result or {}).get("results", [])]
        else:  # literal: one memory per text, its provenance the one event
            for p in found:
                result = self._guarded(memory.add, [{"role": _role(p.label), "content": p.text}],
                                       user_id=self.user_id, metadata={**meta, "membench_event_id": p.event_id},
                                       infer=False)
                stored += [MemoryItem(str(r["id"]), self.condition, str(r.get("memory", "")), (p.event_id,))
                           for r in (result or {}).get("results", [])]
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        result = self._guarded(self._store.handle.search, query.strip() or "(no query)", top_k=self.settings.top_k,
                               filters={"user_id": self.user_id}, threshold=self.settings.threshold)
        found = [(str(r["id"]), str(r.get("memory", ""))) for r in (result or {}).get("results", [])
                 if r.get("user_id", self.user_id) == self.user_id]
        return self._admit(found, budget_tokens)


class Mem0Native(Mem0Memory):
    condition = "B5-MEM0"


class Mem0Literal(Mem0Memory):
    condition = "B5-MEM0-LIT"


class DenseQdrantMemory(_LibraryMemory):
    """B2-dense: one point per agent-visible text in an embedded Qdrant collection, cosine top 6."""

    condition = "B2-dense"
    COLLECTION = "membench_dense"

    def _open(self) -> None:
        try:
            from qdrant_client import QdrantClient, models
        except ImportError as exc:
            raise LibraryUnavailable(f"qdrant-client is not installed ({exc})") from None
        self._models = models

        def make(path: Path):
            client = QdrantClient(path=str(path / "qdrant"))
            if not client.collection_exists(self.COLLECTION):
                client.create_collection(self.COLLECTION, vectors_config=models.VectorParams(
                    size=self.settings.embed_dims, distance=models.Distance.COSINE))
            return client

        self._store = _shared(self._root, make)

    def _bind(self) -> None:
        pass

    def _filter(self) -> Any:
        m = self._models
        return m.Filter(must=[m.FieldCondition(key="user_id", match=m.MatchValue(value=self.user_id))])

    def _reset(self) -> None:
        self._guarded(self._store.handle.delete, self.COLLECTION,
                      points_selector=self._models.FilterSelector(filter=self._filter()))

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return post_embeddings(self._channel, self.settings, texts)

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        found = pieces(events)
        if not found:
            return []
        vectors = self._guarded(self._embed, [p.text for p in found])
        points, stored = [], []
        for p, vector in zip(found, vectors):
            # a point id per (namespace, event): deterministic, so a rerun of the same writes is the same store
            point = str(_uuid_of(f"{self.user_id}/{p.event_id}"))
            points.append(self._models.PointStruct(id=point, vector=vector, payload={
                "user_id": self.user_id, "text": p.text, "event_id": p.event_id}))
            stored.append(MemoryItem(f"dense:{p.event_id}", self.condition, p.text, (p.event_id,)))
        self._guarded(self._store.handle.upsert, self.COLLECTION, points=points)
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        (vector,) = self._guarded(self._embed, [query.strip() or "(no query)"])
        hits = self._guarded(self._store.handle.query_points, self.COLLECTION, query=vector,
                             query_filter=self._filter(), limit=self.settings.top_k, with_payload=True).points
        found = [(f"dense:{h.payload['event_id']}", str(h.payload["text"])) for h in hits
                 if h.payload.get("user_id") == self.user_id]
        return self._admit(found, budget_tokens)


# ------------------------------------------------------------------------------ LangMem
LANGSMITH_VARIABLES = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING", "LANGCHAIN_TRACING_V2")


def _import_langmem() -> dict[str, Any]:
    """LangMem and the LangChain / LangGraph parts it runs on, with LangSmith tracing off: the variables
    that turn it on are set to false before the first import (LangSmith caches them when it first
    reads them), and every call runs inside `langsmith.tracing_context(enabled=False)`, which overrides
    the environment and any global setting (checked there: `_no_tracing`)."""
    for variable in LANGSMITH_VARIABLES:
        os.environ[variable] = "false"
    try:
        import langsmith
        from langchain_core.tracers.context import _tracing_v2_is_enabled
        from langchain_openai import ChatOpenAI
        from langgraph.store.memory import InMemoryStore
        from langmem import create_memory_store_manager
    except ImportError as exc:
        raise LibraryUnavailable(f"langmem is not installed ({exc}); deploy/setup-env.sh installs it") from None
    return {"langsmith": langsmith, "tracing_enabled": _tracing_v2_is_enabled, "ChatOpenAI": ChatOpenAI,
            "InMemoryStore": InMemoryStore, "create_memory_store_manager": create_memory_store_manager}


def _memory_text(value: Any) -> str:
    """The text of a LangMem store value ({"kind": "Memory", "content": {"content": TEXT}}); another
    schema's content as sorted JSON."""
    content = value.get("content") if isinstance(value, dict) else None
    if isinstance(content, dict) and isinstance(content.get("content"), str) and len(content) == 1:
        return content["content"]
    return json.dumps(content if content is not None else value, sort_keys=True, ensure_ascii=False)


class LangMemMemory(_LibraryMemory):
    """B5-LANGMEM: LangMem's memory store manager (`create_memory_store_manager`) over LangGraph's
    InMemoryStore. After a session, the manager embeds the session's last message, shows the model the
    namespace's 5 most similar memories and the session, and applies what the model calls (new
    memories, patches, deletions) to the store, each stored value embedded on put; a read is the
    store's top 6 of the query by cosine.

    The store is the unit's own (one InMemoryStore per memory instance, LangGraph namespace
    ("membench", user_id)): a unit's sessions run in one call of the runner, in one process, and
    nothing reads a unit's memory after it, so the store lives exactly as long as the unit — a retried
    unit (a new instance) starts from an empty namespace by construction, and a finished unit's
    memories and vectors are freed with it (docs/memory-systems.md)."""

    condition = "B5-LANGMEM"

    def __init__(self, namespace: Namespace, setup: MemorySetup):
        self._model_name = setup.model.model if setup.model is not None else ""
        super().__init__(namespace, setup)

    def _open(self) -> None:
        import httpx

        lib = _import_langmem()
        self._lib = lib
        self._ns = ("membench", self.user_id)
        channel, settings = self._channel, self.settings
        self._embed_errors: list[BaseException] = []

        def embed(texts: Sequence[str]) -> list[list[float]]:
            # LangMem puts memories from a thread pool and never looks at those futures: a failed
            # embedding there would vanish with its memory, so it is kept and raised after the call
            try:
                return post_embeddings(channel, settings, list(texts))
            except BaseException as exc:
                self._embed_errors.append(exc)
                raise

        # LangGraph wraps a function of a list of texts as its Embeddings; ours posts them to the gateway
        store = lib["InMemoryStore"](index={"dims": settings.embed_dims, "embed": embed,
                                            "fields": list(dict(settings.options)["index_fields"])})
        self._store = _Store(store, threading.Lock())
        http = httpx.Client(transport=httpx.HTTPTransport(uds=str(channel.socket_path)),
                            timeout=channel.gateway.settings.timeout_s + 30)
        options = dict(settings.options)
        # no retries (a failed call is the gateway's to record); `Connection: close` as for Mem0's clients
        model = lib["ChatOpenAI"](model=self._model_name, temperature=options["temperature"],
                                  api_key=PLACEHOLDER_KEY, base_url=GATEWAY_BASE, http_client=http, max_retries=0,
                                  use_responses_api=False,
                                  default_headers={PURPOSE_HEADER: "sleep", "Connection": "close"})
        self._manager = lib["create_memory_store_manager"](
            model, namespace=self._ns, store=store, enable_inserts=options["enable_inserts"],
            enable_deletes=options["enable_deletes"], query_limit=options["query_limit"])

    def _bind(self) -> None:
        pass

    def _reset(self) -> None:
        pass  # a fresh store per instance: the namespace is empty (class docstring)

    def _guarded(self, fn, *args, **kwargs):
        self._embed_errors.clear()
        with self._lib["langsmith"].tracing_context(enabled=False):
            self._no_tracing()
            result = super()._guarded(fn, *args, **kwargs)
        if self._embed_errors:  # one LangMem dropped (above): the channel's failure, when there is one, first
            _raise_channel_failure(self._channel, self._embed_errors[0])
        return result

    def _no_tracing(self) -> None:
        if self._lib["tracing_enabled"]():
            raise LibraryUnavailable("LangSmith tracing could not be turned off")

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        found = pieces(events)
        if not found:
            return []
        messages = [{"role": _role(p.label), "content": p.text} for p in found]
        # one worker: LangMem submits the store's searches and puts to a thread pool, and in parallel
        # their order (and with it the order of equal-scored hits) would differ from run to run
        puts = self._guarded(self._manager.invoke, {"messages": messages}, config={"max_concurrency": 1})
        provenance = tuple(p.event_id for p in found)
        return [MemoryItem(f"langmem:{put['key']}", self.condition, _memory_text(put["value"]), provenance)
                for put in puts or []]

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        hits = self._guarded(self._store.handle.search, self._ns, query=query.strip() or "(no query)",
                             limit=self.settings.top_k)
        found = [(f"langmem:{h.key}", _memory_text(h.value)) for h in hits if tuple(h.namespace) == self._ns]
        return self._admit(found, budget_tokens)


def _uuid_of(text: str):
    import uuid

    return uuid.UUID(hashlib.sha256(text.encode()).hexdigest()[:32])


LIBRARY_SYSTEMS: dict[str, type] = {"B5-MEM0": Mem0Native, "B5-MEM0-LIT": Mem0Literal, "B2-dense": DenseQdrantMemory,
                                     "B5-LANGMEM": LangMemMemory}
