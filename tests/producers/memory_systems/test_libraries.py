"""The memory libraries in-process (issue 31): real Mem0 (mem0ai) and real Qdrant local mode on disk,
their model and embedding calls through the real model gateway to `ScriptedUpstream` — a local
scripted server (no model API is reachable here): its embeddings are deterministic hashed bags of
words and its answer to Mem0's fact extraction is the new messages verbatim, not a model's.

What is proved: a literal lane returns the secrets byte-exact within the read budget; every call is
a ModelCall (purpose `embed` / `sleep`), recorded and replayed with no upstream to the same context;
namespaces sharing one store are isolated by user_id (the control reads the store unfiltered and
sees both); a retried unit starts empty; the settings are in the log."""

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

