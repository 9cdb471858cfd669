"""What a runner checks before it claims a unit that calls models: the pre-flight from its own machine
with its own key (against `ScriptedUpstream`, a real local server that requires the key), and each
condition's admission by its own conformance records; and the blob chunks any runner reads back."""

from __future__ import annotations

import hashlib

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.pipeline.distributed.runner_models import ModelsRefused, RunnerModels
from membench.pipeline.settings import load_settings
from membench.bus.kafka_blobs import CHUNK_BYTES, chunks, referenced_blobs
from membench.runner.unit_queue import ModelOrder, UnitOrder
from membench.schemas.events import Event

KEY = "sk-runner-test-1f2e"


def _order(base_url: str, condition: str = "B0", **model) -> UnitOrder:
    return UnitOrder("rs", "smoke", "d" * 64, "openai:local-model", "bwrap", 2000, "smoke", "smoke-currency",
                     condition, 1, model=ModelOrder({"*": base_url}, **model).to_dict())


def test_a_runner_probes_the_upstream_with_its_own_key_before_it_claims(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_HOME", str(tmp_path))
    with ScriptedUpstream(key=KEY) as upstream:
        monkeypatch.delenv("MEMBENCH_MODEL_API_KEY", raising=False)
        lines: list[str] = []
        keyless = RunnerModels(load_settings(), 1, log=lines.append)
        with pytest.raises(ModelsRefused, match="on this runner: pre-flight failed"):
            keyless.for_order(_order(upstream.base_url))
        monkeypatch.setenv("MEMBENCH_MODEL_API_KEY", KEY)
        keyed = RunnerModels(load_settings(), 1, log=lines.append)
        hosted = keyed.for_order(_order(upstream.base_url))
        assert keyed.for_order(_order(upstream.base_url)) is hosted  # one gateway per run set and settings
        probes = [r for r in upstream.requests if r["headers"].get("Authorization") == f"Bearer {KEY}"]
        assert len(probes) == 1 and any(line.startswith("pre-flight: ") for line in lines)
        assert hosted.gateway.settings.keys == {"*": KEY}


def test_a_runner_refuses_a_condition_its_own_records_do_not_admit(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_HOME", str(tmp_path))
    asked = []

    def admit(condition, memory_model, base_urls, any_upstream):
        asked.append((condition, memory_model, base_urls, any_upstream))
        return None if condition == "B0" else "no conformance record for its configuration"

    models = RunnerModels(load_settings(), 1, admit=admit)
    plain = UnitOrder("rs", "smoke", "d" * 64, "scripted:memory-literal", "bwrap", 2000, "smoke", "smoke-currency",
                      "B0", 1)
    assert models.for_order(plain) is None
    library = _order("http://127.0.0.1:9/v1", "B5-LANGMEM", memory_model="gpt-5-mini", replay="recorded")
    with pytest.raises(ModelsRefused, match="'B5-LANGMEM' is not admitted .* on this runner: no conformance"):
        models.for_order(library)
    # the exact configuration: its memory model and upstream; a replay calls none
    assert asked[-1] == ("B5-LANGMEM", "gpt-5-mini", {"*": "http://127.0.0.1:9/v1"}, True)


def test_a_blob_is_cut_into_chunks_that_reassemble_and_events_name_theirs():
    data = bytes(range(256)) * (3 * CHUNK_BYTES // 256 + 7)
    digest = hashlib.sha256(data).hexdigest()
    pieces = list(chunks("rs", digest, data))
    assert [k.decode() for k, _ in pieces] == [f"rs/{digest}/{i}/4" for i in range(4)]
    assert b"".join(v for _, v in pieces) == data and all(len(v) <= CHUNK_BYTES for _, v in pieces)
    def event(kind: str, payload: dict) -> Event:
        return Event("e", "rs", "r", "u", 1, 1, 0, "test", kind, "harness", "", payload)

    bodies = {"request_digest": "a" * 64, "response_digest": "b" * 64}
    assert referenced_blobs(event("ModelCall", {"recorded": True, **bodies})) == ["a" * 64, "b" * 64]
    assert referenced_blobs(event("ModelCall", {"recorded": False, **bodies})) == []  # nothing was stored
    diffs = {"production_diff": None, "production_diff_sha256": "c" * 64, "stripped_diff": "inline",
             "stripped_diff_sha256": "d" * 64}
    assert referenced_blobs(event("PatchProduced", diffs)) == ["c" * 64]  # an inline diff is in the event
