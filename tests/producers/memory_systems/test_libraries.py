"""The memory libraries in-process (issue 31): real Mem0 (mem0ai) and real Qdrant local mode on disk,
their model and embedding calls through the real model gateway to `ScriptedUpstream` — a local
scripted server (no model API is reachable here): its embeddings are deterministic hashed bags of
words and its answer to Mem0's fact extraction is the new messages verbatim, not a model's.

What is proved: a literal lane returns the secrets byte-exact within the read budget; every call is
a ModelCall (purpose `embed` / `sleep`), recorded and replayed with no upstream to the same context;
namespaces sharing one store are isolated by user_id (the control reads the store unfiltered and
sees both); a retried unit starts empty — also after an abandoned attempt, its store reopened from
disk, with Mem0's session messages gone too; native Mem0 passes the conformance gate against this
stand-in (and why that is the stand-in's doing); the settings are in the log."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from membench.bench.upstream import ScriptedUpstream
from producers.gateway.recording import RecordedAnswer, Recording
from producers.gateway.server import GatewaySettings, ModelGateway, ModelReplayMiss
from producers.memory_systems.base import MemorySetup, Namespace
from producers.memory_systems.conformance import GATES
from producers.memory_systems.libraries import LibraryUnavailable, Mem0Literal, Mem0Native, DenseQdrantMemory
from producers.memory_systems.model_client import MemoryModel
from tests.producers.memory_systems.test_model_client import Events
from tests.producers.test_memory_systems import session

# installed by deploy/setup-env.sh (pyproject.toml pins it); found, not imported: the adapter imports it
# with its telemetry off
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="mem0ai is not installed")

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
    (settings,) = [p for k, p, _ in events.all if k == "Turn" and p["source_kind"] == "memory_settings"]
    recorded = json.loads(settings["text"]["text"])
    assert recorded["top_k"] == 6 and recorded["infer"] is False and recorded["version"] != "not installed"

    # replay: no upstream, a fresh store; the same writes and query give the same context
    answers: dict = {}
    for c in calls:
        answers.setdefault((f"smoke/c1/{cls.condition}/1", c["match_digest"]), []).append(
            RecordedAnswer(200, False, c["response_digest"]))
    replay = ModelGateway(GatewaySettings(), blob_dir=tmp_path / "rblobs", replay=Recording(blobs, answers, "rec"))
    again, model, replayed = _memory(cls, replay, tmp_path / "store-replay")
    again.write(_session())
    assert [i.text for i in again.read(QUERY, 400).items] == [i.text for i in context.items]
    with pytest.raises(ModelReplayMiss):  # control: a query never recorded is a miss, not an answer
        again.read("something nobody asked before", 400)
    model.close()
    assert {c["mode"] for c in replayed.of("ModelCall")} == {"replay"}


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
    from producers.memory_systems.conformance import check

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
               "from producers.memory_systems.libraries import _import_mem0\n"
               "_import_mem0()\n"
               "print(before, (t.MEM0_TELEMETRY, t.client_telemetry.posthog is not None))\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "MEM0_DIR": str(Path(__import__("tempfile").mkdtemp()))})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "(True, True) (False, False)"


# ------------------------------------------------------------------ a retried unit (resume, issue 31)
def _abandon(memory) -> None:
    """The attempt's process dies (simulated here, in this process: no subprocess to start): its
    handles on the store go (the Qdrant folder lock, Mem0's SQLite connection) and nothing of it
    stays cached, so the next attempt opens the store from disk as a resumed `membench run` does;
    nothing the attempt wrote is cleaned up."""
    from producers.memory_systems import libraries

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
