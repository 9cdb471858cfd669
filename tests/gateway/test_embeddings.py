"""The gateway's embeddings wire (`POST …/embeddings`) against a real local upstream
(membench.bench.scripted_model_server.ScriptedUpstream): its vectors are deterministic hashed bags of words, not
a model's (said so here and in its docstring). An embedding call gets the real key, a ModelCall of
purpose `embed` on a memory channel, its usage and cost; it is recorded and replayed with no
upstream, and a request the recording lacks is a replay miss."""

from __future__ import annotations

import json
import math

from membench.bench.scripted_model_server import ScriptedUpstream, scripted_embedding
from membench.bus.blobs import get_blob
from membench.gateway.recording import RecordedAnswer, Recording
from membench.gateway.server import GatewaySettings, ModelGateway
from membench.gateway.wire_apis import api_of, usage_of_body
from tests.gateway.test_server import KEY, Events, post

MODEL = "text-embedding-3-small"


def _channel(settings, tmp_path, purpose="memory", replay=None):
    events = Events()
    gateway = ModelGateway(settings, blob_dir=tmp_path / "blobs", replay=replay)
    return gateway.open_channel("smoke/t1/B5-MEM0/1", events, purpose=purpose), events


def test_the_wire_knows_embeddings_and_their_usage_has_no_output():
    assert api_of("/v1/embeddings") == ("embeddings", "openai")
    usage = usage_of_body("embeddings", {"usage": {"prompt_tokens": 7, "total_tokens": 7}})
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (7, 0, 0)


def test_scripted_vectors_are_deterministic_and_similar_only_when_words_are_shared():
    a, b = scripted_embedding("the key is ZK-41", 64), scripted_embedding("the key is ZK-41", 64)
    assert a == b and len(a) == 64 and math.isclose(sum(v * v for v in a), 1.0, rel_tol=1e-4)
    cos = lambda x, y: sum(p * q for p, q in zip(x, y))  # noqa: E731
    assert cos(a, scripted_embedding("what is the key", 64)) > cos(a, scripted_embedding("unrelated prose", 64))


def test_an_embedding_call_is_relayed_with_the_key_and_recorded_as_a_memory_embed(tmp_path):
    request = {"model": MODEL, "input": ["the partner key is ZK-41"], "encoding_format": "float", "dimensions": 32}
    with ScriptedUpstream() as upstream:
        settings = GatewaySettings({"*": upstream.base_url}, {"*": KEY}, record=True)
        channel, events = _channel(settings, tmp_path)
        with channel:  # the caller claims `judge`: an embedding is `embed` whatever the header says
            status, body = post(channel, "/v1/embeddings", request, {"X-Membench-Purpose": "judge"})
        agent, agent_events = _channel(settings, tmp_path, purpose="agent")
        with agent:
            post(agent, "/v1/embeddings", request)
    assert status == 200
    assert json.loads(body)["data"][0]["embedding"] == scripted_embedding("the partner key is ZK-41", 32)
    assert upstream.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert upstream.requests[0]["path"] == "/v1/embeddings"
    (call,) = events.of("ModelCall")
    assert call["api"] == "embeddings" and call["purpose"] == "embed" and call["call_id"] == "mem1"
    assert call["input_tokens"] == json.loads(body)["usage"]["prompt_tokens"] > 0 and call["output_tokens"] == 0
    assert call["price"] == "text-embedding-3-small*" and call["cost_usd"] > 0
    assert call["recorded"] and get_blob(tmp_path / "blobs", call["response_digest"]) == body
    # control: the same call on an agent's channel is the agent's (purpose comes from the channel)
    assert [c["purpose"] for c in agent_events.of("ModelCall")] == ["agent"]

    answers = {("smoke/t1/B5-MEM0/1", call["match_digest"]): [RecordedAnswer(200, False, call["response_digest"])]}
    channel, replayed = _channel(GatewaySettings(), tmp_path, replay=Recording(tmp_path / "blobs", answers, "rec"))
    with channel:  # no upstream at all
        assert post(channel, "/v1/embeddings", request) == (200, body)
        status, _ = post(channel, "/v1/embeddings", {**request, "input": ["another text"]})
    assert status == 400 and channel.failure is None  # a divergence, never an exclusion
    assert [(c["mode"], c["status"], c["purpose"]) for c in replayed.of("ModelCall")] == [
        ("replay", "ok", "embed"), ("replay", "replay_miss", "embed")]
