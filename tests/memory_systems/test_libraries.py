"""The memory libraries in-process: real Mem0 (mem0ai) and real Qdrant local mode on disk,
real LangMem over LangGraph's InMemoryStore, their model and embedding calls through the real model
gateway to `ScriptedUpstream` — a local scripted server (no model API is reachable here): its
embeddings are deterministic hashed bags of words and its answer to Mem0's fact extraction (and to
LangMem's memory manager) is the new messages' lines verbatim, not a model's.

What is proved: a literal lane returns the secrets byte-exact within the read budget; every call is
a ModelCall (purpose `embed` / `sleep`), recorded and replayed with no upstream to the same context;
namespaces sharing one store are isolated by user_id (the control reads the store unfiltered and
sees both); a retried unit starts empty — also after an abandoned attempt, its store reopened from
disk, with Mem0's session messages gone too; native Mem0 passes the conformance gate against this
stand-in (and why that is the stand-in's doing); the settings are in the log. LangMem: one
extraction call per session that shows the model the namespace's memories, recorded and replayed;
a store per unit, so namespaces never meet and a retried unit starts empty; no tiktoken encoding is
ever asked for and no LangSmith run is posted even with tracing on in the environment; adding it
left the other conditions' settings records (their conformance digests) as they were."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.gateway.recording import RecordedAnswer, Recording
from membench.gateway.server import GatewaySettings, ModelGateway
from membench.memory_systems.base import MemorySetup, Namespace
from membench.memory_systems.conformance import GATES
from membench.memory_systems.libraries import (SETTINGS, DenseQdrantMemory, LangMemMemory, LibraryUnavailable,
                                                Mem0Literal, Mem0Native, settings_record)
from membench.memory_systems.model_client import MemoryModel
from tests.memory_systems.test_model_client import Events
from tests.memory_systems.test_memory_systems import session

# installed by deploy/setup-env.sh (pyproject.toml pins it); found, not imported: the adapter imports it
# with its telemetry off
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="mem0ai is not installed")
needs_langmem = pytest.mark.skipif(importlib.util.find_spec("langmem") is None, reason="langmem is not installed")

SECRET = "ZQX-7f3a-PARTNER-KEY-41"
QUERY = "Which partner key does the http client send?"


def _session():
    return session(1, "Configure the http client.", ("e1", f"The partner key the http client sends is {SECRET}."),
                   ("e2", "Amounts are integer cents."))


def _memory(cls, gateway, store: Path, seed: int = 1):
    events = Events()
    namespace = Namespace("rs", cls.condition, seed, "c1")
    model = MemoryModel("gpt-5-mini", gateway, f"smoke/c1/{cls.condition}/{seed}", events)
    return cls(namespace, MemorySetup(model=model, store_dir=store)), model, events


def _settings_record(events) -> dict:
    """The settings the condition logged (its one `memory_settings` harness turn)."""
    (settings,) = [p for k, p, _ in events.all if k == "Turn" and p["source_kind"] == "memory_settings"]
    return json.loads(settings["text"]["text"])


def _replay_gateway(cls, calls, blobs, blob_dir: Path, leave_out: frozenset = frozenset()) -> ModelGateway:
    """A gateway with no upstream that answers CALLS (the recorded run's ModelCall events) from BLOBS,
    except the requests whose match digest is in LEAVE_OUT (a partial recording)."""
    answers: dict = {}
    for c in calls:
        if c["match_digest"] not in leave_out:
            answers.setdefault((f"smoke/c1/{cls.condition}/1", c["match_digest"]), []).append(
                RecordedAnswer(200, False, c["response_digest"]))
    return ModelGateway(GatewaySettings(), blob_dir=blob_dir, replay=Recording(blobs, answers, "rec"))


@pytest.fixture(scope="module")
def upstream():
    with ScriptedUpstream() as up:
        yield up


@pytest.mark.parametrize("cls", [Mem0Literal, DenseQdrantMemory])
def test_a_literal_library_round_trips_secrets_and_replays_with_no_upstream(cls, upstream, tmp_path) -> None:
    blobs = tmp_path / "blobs"
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}, record=True), blob_dir=blobs)
    memory, model, events = _memory(cls, gateway, tmp_path / "store")
    stored = memory.write(_session())
    context = memory.read(QUERY, 400)
    model.close()
    assert any(SECRET in item.text for item in stored)
    assert any(f"The partner key the http client sends is {SECRET}." == item.text for item in context.items)
    assert "harness-only secret" not in context.render()  # only agent-visible events are written
    assert 0 < len(context.items) <= 6 and context.tokens_admitted <= 400
    calls = events.of("ModelCall")
    assert calls and {(c["api"], c["purpose"], c["status"], c["recorded"]) for c in calls} == \
        {("embeddings", "embed", "ok", True)}
    recorded = _settings_record(events)
    assert recorded["top_k"] == 6 and recorded["infer"] is False and recorded["version"] != "not installed"

    # replay: no upstream, a fresh store; the same writes and query give the same context
    again, model, replayed = _memory(cls, _replay_gateway(cls, calls, blobs, tmp_path / "rblobs"), tmp_path / "store-replay")
    again.write(_session())
    assert [i.text for i in again.read(QUERY, 400).items] == [i.text for i in context.items]
    # control: a query never recorded is a miss (the library's failure, never an exclusion), not an answer
    with pytest.raises(Exception, match="no recorded answer"):
        again.read("something nobody asked before", 400)
    model.close()
    assert {c["mode"] for c in replayed.of("ModelCall")} == {"replay"}


def test_a_library_run_verifies_its_settings_turn_inside_the_run(upstream, bwrap_sandbox, tmp_path) -> None:
    """A whole unit under B5-MEM0-LIT: the settings turn the library records while it opens comes after
    the run's RunStarted, so replay (the checks `membench replay --verify` runs) finds nothing; before,
    the processors rejected it ("Turn before RunStarted") and the run still exited 0."""
    from membench.audit.replayer import replay
    from membench.runner.grid import RunConfig, RunUnit, run_unit
    from membench.packs.pack_resolver import open_pack
    from membench.schemas.registry import default_registry

    pack = open_pack("smoke", tmp_path / "home")
    schema = default_registry().latest("event")
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}), blob_dir=tmp_path / "blobs")
    logged: list = []
    run_unit(pack, RunUnit("smoke", "smoke-client-header", "B5-MEM0-LIT", 1),
             RunConfig("rs", "scripted:memory-literal", oracle_timeout_s=60, blob_dir=tmp_path / "blobs",
                       gateway=gateway, memory_model="gpt-5-mini"),
             bwrap_sandbox, lambda event, datum: logged.append((event, schema, datum)))
    result = replay(logged, [], blobs_for=lambda _run_set: tmp_path / "blobs", file_log=True)
    assert result.ok, [str(f) for f in result.findings]
    kinds = [(e.kind, (e.payload.get("source_kind") if e.kind == "Turn" else None)) for e, _, _ in logged]
    assert kinds[0] == ("RunStarted", None) and ("Turn", "memory_settings") in kinds, kinds
    assert logged[-1][0].payload["status"] == "completed", logged[-1][0].payload


def test_native_mem0_extracts_through_the_memory_model(upstream, tmp_path) -> None:
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}), blob_dir=tmp_path / "b")
    memory, model, events = _memory(Mem0Native, gateway, tmp_path / "store")
    memory.write(_session())
    context = memory.read(QUERY, 400)
    model.close()
    purposes = [c["purpose"] for c in events.of("ModelCall")]
    assert purposes.count("sleep") == 1 and "embed" in purposes  # one extraction call per session
    assert any(SECRET in item.text for item in context.items)


def test_native_mem0_against_the_scripted_upstream_passes_every_gate(upstream) -> None:
    """What `membench memory check B5-MEM0` gives against ScriptedUpstream (docs/memory-systems.md,
    "Native Mem0 and the identity gate"): the gate itself (`conformance.check`, which the command
    records; its two fresh processes are the test's cost) passes every gate, with Mem0's fact
    extraction running (4 `sleep` calls: one per written session, two sessions per process). This
    is owed to the stand-in: its extraction answer is the new messages verbatim and its embeddings
    a fixed function of the text, so both processes store and rank the same texts. It says nothing
    of native Mem0 against a real model, whose extraction is the part that may differ between
    processes (DreamBench-SWE's audit failed it at cross_process_identity)."""
    from membench.memory_systems.conformance import check

    result = check("B5-MEM0", "gpt-5-mini", {"*": upstream.base_url})
    gates = result["gates"]
    assert (result["verdict"], result["failed"]) == ("pass", []), {g: v for g, v in gates.items()
                                                                    if v["verdict"] != "pass"}
    assert {g: v["verdict"] for g, v in gates.items()} == dict.fromkeys(GATES, "pass")
    calls = result["model_calls_by_purpose"]
    assert set(calls) == {"embed", "sleep"} and calls["sleep"] == 4 and calls["embed"] > 0, calls
    identity = gates["cross_process_identity"]["evidence"]
    assert identity["differing_reads"] == [] and identity["digests"][0] == identity["digests"][1]
    assert gates["literal_round_trip"]["evidence"]["missing"] == []  # extracted verbatim: every token back
    assert gates["namespace_isolation"]["evidence"]["leaks"] == []
    assert gates["empty_namespace"]["evidence"]["nonempty_reads"] == []
    errors = gates["errors_timeouts"]["evidence"]
    assert errors["errors"] == errors["failed_model_calls"] == errors["slow"] == []
    assert gates["no_network"]["evidence"]["violations"] == []


def test_namespaces_in_one_store_are_isolated_by_user_id_and_a_retry_starts_empty(upstream, tmp_path) -> None:
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}), blob_dir=tmp_path / "b")
    store = tmp_path / "store"
    first, m1, _ = _memory(Mem0Literal, gateway, store, seed=1)
    second, m2, _ = _memory(Mem0Literal, gateway, store, seed=2)
    first.write(_session())
    assert second.read(QUERY, 400).items == ()  # the other namespace's secret is never returned
    assert any(SECRET in i.text for i in first.read(QUERY, 400).items)
    # control: the store is shared — unfiltered by user_id, the first namespace's memories are there
    with first._store.lock:
        first._bind()
        listed = first._store.handle.vector_store.list(filters={}, top_k=100)[0]
    assert any(SECRET in (p.payload or {}).get("data", "") for p in listed)
    retried, m3, _ = _memory(Mem0Literal, gateway, store, seed=1)  # the same namespace again: reset
    assert retried.read(QUERY, 400).items == ()
    for m in (m1, m2, m3):
        m.close()


def test_a_library_without_the_gateway_is_refused_naming_the_options(tmp_path) -> None:
    with pytest.raises(LibraryUnavailable, match="--memory-model"):
        Mem0Literal(Namespace("rs", "B5-MEM0-LIT", 1, "c1"), MemorySetup(store_dir=tmp_path))


def test_mem0_imported_with_telemetry_on_is_turned_off_before_use() -> None:
    """Run in a fresh interpreter: mem0 imported first with telemetry on (its PostHog client made),
    then the adapter's import closes that client and turns telemetry off; control: before it, on."""
    import subprocess
    import sys

    program = ("import os; os.environ['MEM0_TELEMETRY'] = 'True'\n"
               "from mem0.memory import telemetry as t\n"
               "before = (t.MEM0_TELEMETRY, t.client_telemetry.posthog is not None)\n"
               "from membench.memory_systems.libraries import _import_mem0\n"
               "_import_mem0()\n"
               "print(before, (t.MEM0_TELEMETRY, t.client_telemetry.posthog is not None))\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "MEM0_DIR": str(Path(__import__("tempfile").mkdtemp()))})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "(True, True) (False, False)"


# ------------------------------------------------------------------ a retried unit (resume)
def _abandon(memory) -> None:
    """The attempt's process dies (simulated here, in this process: no subprocess to start): its
    handles on the store go (the Qdrant folder lock, Mem0's SQLite connection) and nothing of it
    stays cached, so the next attempt opens the store from disk as a resumed `membench run` does;
    nothing the attempt wrote is cleaned up."""
    from membench.memory_systems import libraries

    handle = memory._store.handle
    with libraries._STORES_LOCK:
        libraries._STORES.pop(str(memory._root.resolve()))
    client = handle.vector_store.client if hasattr(handle, "vector_store") else handle
    client.close()
    if hasattr(handle, "db"):
        handle.close()


def _on_disk(cls, root: Path, user_ids: list[str]) -> dict[str, tuple[list[str], list[str]]]:
    """Per user_id: (the texts of its points in the condition's Qdrant collection, the Mem0 session
    messages of its scope), read from the store's files by clients of our own (the store is closed)."""
    import sqlite3

    from qdrant_client import QdrantClient, models

    collection, key = ("membench", "data") if cls is Mem0Native else (DenseQdrantMemory.COLLECTION, "text")
    client = QdrantClient(path=str(root / cls.condition / "qdrant"))
    history = root / cls.condition / "history.db"
    try:
        found = {}
        for uid in user_ids:
            points, _ = client.scroll(collection, scroll_filter=models.Filter(must=[models.FieldCondition(
                key="user_id", match=models.MatchValue(value=uid))]), limit=1000, with_payload=True)
            messages = []
            if history.exists():
                with sqlite3.connect(history) as db:
                    messages = [r[0] for r in db.execute("SELECT content FROM messages WHERE session_scope = ?",
                                                         (f"user_id={uid}",))]
            found[uid] = (sorted(p.payload[key] for p in points), sorted(messages))
        return found
    finally:
        client.close()


def _last_messages(request: Path) -> str:
    """The `## Last k Messages` section of a recorded Mem0 extraction request's user prompt."""
    user = next(m["content"] for m in json.loads(request.read_text())["messages"] if m["role"] == "user")
    return user.split("## Last k Messages\n", 1)[1].split("\n## ", 1)[0].strip()


@pytest.mark.parametrize("cls", [Mem0Native, DenseQdrantMemory])
def test_a_retried_unit_starts_from_an_empty_namespace_after_an_abandoned_attempt(cls, upstream, tmp_path) -> None:
    """Attempt 1 of a unit writes and its process dies; the store under the run set keeps its writes
    (control: on disk, its points and — native Mem0 — the session messages Mem0 feeds its extraction
    prompt). Attempt 2 of the same namespace, opened from disk, deletes that user_id's memories and
    messages before the unit starts: it reads nothing, its first extraction prompt holds nothing of
    attempt 1, nothing of attempt 1 is left on disk, and a neighbouring namespace in the same store
    keeps everything."""
    blobs = tmp_path / "blobs"
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}, record=True), blob_dir=blobs)
    store = tmp_path / "store"
    first, m1, _ = _memory(cls, gateway, store, seed=1)
    neighbour, m2, _ = _memory(cls, gateway, store, seed=2)
    first.write(_session())
    neighbour.write(_session())
    assert any(SECRET in i.text for i in first.read(QUERY, 400).items)
    m1.close()
    m2.close()
    _abandon(first)
    ids = [first.user_id, neighbour.user_id]
    native = cls is Mem0Native
    before = _on_disk(cls, store, ids)
    for texts, messages in before.values():  # control: the abandoned attempt's writes are on disk
        assert any(SECRET in t for t in texts) and any(SECRET in m for m in messages) == native, before

    retried, m3, events = _memory(cls, gateway, store, seed=1)  # attempt 2: the same namespace, from disk
    assert retried.user_id == first.user_id  # the same isolation key: reset, not a new namespace
    assert retried.read(QUERY, 400).items == ()
    retried.write(session(2, "Tidy the logging.", ("e3", "Log lines are JSON objects.")))
    retried.write(session(3, "Rotate the logs.", ("e4", "Logs rotate daily.")))
    m3.close()
    if native:  # each extraction prompt carries the namespace's last messages: none of attempt 1's
        first_prompt, second_prompt = [_last_messages(blobs / c["request_digest"]) for c in events.of("ModelCall")
                                       if c["purpose"] == "sleep"]
        assert SECRET not in first_prompt and "Configure the http client." not in first_prompt
        # control: within an attempt the context is kept, so a stale message would have shown there
        assert "Log lines are JSON objects." in second_prompt
    requests = [(blobs / c["request_digest"]).read_text() for c in events.of("ModelCall")]
    assert requests and not any(SECRET in r or "Configure the http client." in r for r in requests)
    _abandon(retried)
    after = _on_disk(cls, store, ids)
    assert after[neighbour.user_id] == before[neighbour.user_id]  # the reset touched one namespace only
    texts, messages = after[first.user_id]
    assert texts and not any(SECRET in t for t in texts + messages), after[first.user_id]
    assert any("Logs rotate daily." in t for t in texts) and bool(messages) == native


# ------------------------------------------------------------------ LangMem (B5-LANGMEM)
def _langmem_texts(items) -> list[str]:
    return [i.text for i in items]


@needs_langmem
def test_langmem_extracts_per_session_with_its_memories_in_view_and_replays_with_no_upstream(upstream,
                                                                                             tmp_path) -> None:
    """One `sleep` call (chat_completions, LangMem's trustcall extraction through ChatOpenAI) per
    session; the second session's call shows the model the namespace's memories, so the stand-in
    (one `Memory` call per new line, a line already stored is not repeated) stores only what is new;
    every stored value and query is an `embed` call; a fresh store replays the same calls with no
    upstream to the same context."""
    blobs = tmp_path / "blobs"
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}, record=True), blob_dir=blobs)
    memory, model, events = _memory(LangMemMemory, gateway, tmp_path / "store")
    second_session = session(2, "Tidy the logging.", ("e3", f"The partner key the http client sends is {SECRET}."),
                             ("e4", "Log lines are JSON objects."))
    first, second = memory.write(_session()), memory.write(second_session)
    context = memory.read(QUERY, 400)
    model.close()
    fact = f"The partner key the http client sends is {SECRET}."
    assert _langmem_texts(first) == ["Configure the http client.", "Filled 0 of 0 decisive slots from context.", fact,
                                     "Amounts are integer cents."]
    assert _langmem_texts(second) == ["Tidy the logging.", "Log lines are JSON objects."]
    assert all(i.provenance_event_ids and i.memory_id.startswith("langmem:") for i in first + second)
    assert fact in _langmem_texts(context.items) and "harness-only secret" not in context.render()
    assert len(set(_langmem_texts(context.items))) == len(context.items) <= 6 and context.tokens_admitted <= 400
    calls = events.of("ModelCall")
    assert {(c["api"], c["purpose"], c["status"], c["recorded"]) for c in calls} == \
        {("chat_completions", "sleep", "ok", True), ("embeddings", "embed", "ok", True)}
    sleeps = [c for c in calls if c["purpose"] == "sleep"]
    assert len(sleeps) == 2  # one extraction per session
    first_prompt, second_prompt = [(blobs / c["request_digest"]).read_text() for c in sleeps]
    assert "<existing>" not in first_prompt and SECRET in first_prompt
    assert repr({"content": fact}) in json.loads(second_prompt)["messages"][0]["content"]  # what it already holds
    recorded = _settings_record(events)
    assert (recorded["library"], recorded["infer"], recorded["top_k"], recorded["vector_store"],
            recorded["query_limit"], recorded["enable_deletes"]) == ("langmem", True, 6, "langgraph-inmemory", 5, True)
    assert "not installed" not in [recorded[k] for k in ("version", "trustcall", "langgraph", "langgraph_checkpoint",
                                                         "langchain_core", "langchain_openai")]

    again, model, replayed = _memory(LangMemMemory, _replay_gateway(LangMemMemory, calls, blobs, tmp_path / "rblobs"),
                                     tmp_path / "store-replay")
    assert (_langmem_texts(again.write(_session())), _langmem_texts(again.write(second_session))) == \
        (_langmem_texts(first), _langmem_texts(second))  # LangMem's random session tags and ids are masked
    assert _langmem_texts(again.read(QUERY, 400).items) == _langmem_texts(context.items)
    # control: a query never recorded is a miss (the library's failure, never an exclusion), not an answer
    with pytest.raises(Exception, match="no recorded answer"):
        again.read("something nobody asked before", 400)
    model.close()
    assert {c["mode"] for c in replayed.of("ModelCall")} == {"replay"}

    # LangMem embeds each memory it puts on a thread pool whose futures it never reads: a recording
    # without those embeddings still fails the write (the library's failure), not a silent loss
    puts = {c["match_digest"] for c in calls if c["purpose"] == "embed"
            and '"kind": "Memory"' in json.loads((blobs / c["request_digest"]).read_text())["input"][0]}
    assert len(puts) == 6  # control: the six memories put
    replay = _replay_gateway(LangMemMemory, calls, blobs, tmp_path / "pblobs", leave_out=frozenset(puts))
    lossy, model, _ = _memory(LangMemMemory, replay, tmp_path / "store-partial")
    with pytest.raises(Exception, match="no recorded answer"):
        lossy.write(_session())
    model.close()


@needs_langmem
def test_langmem_keeps_a_store_per_unit_so_namespaces_never_meet_and_a_retry_starts_empty(upstream,
                                                                                          tmp_path) -> None:
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}), blob_dir=tmp_path / "b")
    first, m1, _ = _memory(LangMemMemory, gateway, tmp_path / "store", seed=1)
    other, m2, _ = _memory(LangMemMemory, gateway, tmp_path / "store", seed=2)
    first.write(_session())
    assert other.read(QUERY, 400).items == ()  # another namespace reads nothing of it
    retried, m3, _ = _memory(LangMemMemory, gateway, tmp_path / "store", seed=1)  # the same namespace again
    assert retried.user_id == first.user_id and retried.read(QUERY, 400).items == ()
    # control: the first attempt's memories are there, under LangGraph namespace ("membench", its user_id)
    assert any(SECRET in i.text for i in first.read(QUERY, 400).items)
    held = first._store.handle.search(("membench",), limit=100)
    assert held and {tuple(h.namespace) for h in held} == {("membench", first.user_id)}
    for m in (m1, m2, m3):
        m.close()


@needs_langmem
def test_langmem_asks_tiktoken_for_nothing_and_posts_no_langsmith_run(upstream, tmp_path, monkeypatch) -> None:
    """tiktoken would download its encodings (blocked here, and a leak anywhere): asking it for one
    fails the test. LangSmith tracing turned on in the environment after the adapter's import
    (LangSmith re-reads it) is on outside the adapter and posts runs — the controls: LangChain says
    so, and a traced function's run reaches the spy — but no run comes from the adapter's writes and
    reads, which run with tracing off."""
    import tiktoken

    def refuse(*args, **kwargs):
        raise AssertionError(f"tiktoken was asked for an encoding: {args}")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken, "encoding_for_model", refuse)
    gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}), blob_dir=tmp_path / "b")
    memory, model, events = _memory(LangMemMemory, gateway, tmp_path / "store")
    import langsmith
    import langsmith.utils
    from langsmith.run_trees import RunTree

    posted: list[str] = []
    monkeypatch.setattr(RunTree, "post", lambda self, *a, **k: posted.append(f"post {self.name}"))
    monkeypatch.setattr(RunTree, "patch", lambda self, *a, **k: posted.append(f"patch {self.name}"))
    for variable in ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2"):  # the adapter's
        monkeypatch.setenv(variable, "true")  # import set them to false (LANGCHAIN_TRACING is the retired v1 tracer)
    monkeypatch.setenv("LANGSMITH_API_KEY", "lsv2-not-a-key")
    langsmith.utils.get_env_var.cache_clear()
    try:
        from langchain_core.tracers.context import _tracing_v2_is_enabled

        assert _tracing_v2_is_enabled()  # control: outside the adapter, LangChain would trace
        # control: a traced function posts its run to the spy (a stub client: nothing is sent anywhere)
        langsmith.traceable(name="control", client=type("StubClient", (), {"otel_exporter": None})())(lambda: None)()
        assert posted == ["post control", "patch control"], posted
        memory.write(_session())
        assert any(SECRET in i.text for i in memory.read(QUERY, 400).items)
    finally:
        monkeypatch.undo()
        langsmith.utils.get_env_var.cache_clear()
        model.close()
    assert posted == ["post control", "patch control"], posted
    assert {c["purpose"] for c in events.of("ModelCall")} == {"sleep", "embed"}


def test_the_settings_records_name_each_library_and_left_the_earlier_ones_as_they_were() -> None:
    """A condition's settings record is its conformance configuration's `detail`, whose digest keys
    its record: LangMem's options and companion versions are its own, and the Mem0 / Qdrant records
    keep exactly their earlier keys (their recorded checks still admit them)."""
    earlier = {"condition", "library", "infer", "top_k", "threshold", "embed_model", "embed_dims", "vector_store",
               "version", "qdrant_client"}
    for condition in ("B5-MEM0", "B5-MEM0-LIT", "B2-dense"):
        assert set(settings_record(condition)) == earlier
    record = settings_record("B5-LANGMEM")
    assert set(record) == earlier - {"qdrant_client"} | {k for k, _ in SETTINGS["B5-LANGMEM"].options} | {
        "trustcall", "langgraph", "langgraph_checkpoint", "langchain_core", "langchain_openai"}
    assert record["index_fields"] == ["$"] and record["chat_api"] == "chat_completions"
    json.dumps(record)  # JSON as recorded


def test_a_process_that_opened_an_embedded_qdrant_store_exits_without_a_traceback(tmp_path) -> None:
    """The shared stores are closed at exit: left to the interpreter's teardown, Qdrant's local client
    imports portalocker in `__del__` after the import system is gone and prints a traceback."""
    import subprocess
    import sys

    script = ("import sys\nfrom pathlib import Path\nfrom qdrant_client import QdrantClient\n"
              "from membench.memory_systems.libraries import _shared\n"
              "_shared(Path(sys.argv[1]), lambda path: QdrantClient(path=str(path / 'qdrant')))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "store")], capture_output=True, text=True,
                          cwd=str(Path(__file__).resolve().parents[2]), timeout=120)
    assert proc.returncode == 0 and (tmp_path / "store" / "qdrant").is_dir(), proc.stderr
    assert proc.stderr == "", proc.stderr
