"""The memory model's client against the real model gateway and a real local upstream — the
scripted model server `membench.bench.scripted_model_server` (no model API is reachable here; its answers are
scripted): every call is a ModelCall of purpose sleep or judge with its tokens and cost, recorded and
replayed like an agent's; an unavailable model or a replay miss raises the exclusion the runner
records; the purpose header never reaches the upstream and an agent cannot claim it."""

from __future__ import annotations

import json

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.gateway.recording import RecordedAnswer, Recording
from membench.gateway.preflight import Target
from membench.gateway.server import GatewaySettings, ModelGateway, ModelUnavailable
from membench.memory_systems.model_client import PURPOSE_HEADER, MemoryModel
from membench.memory_systems.model_driven import REFLECT_SYSTEM, parse_lessons

UNIT = "hygiene-v1/c1/B3-llm/1"
ASK = json.dumps({"task": "reflect", "condition": "B3-llm", "session": 1,
                  "evidence": [{"id": "e1", "kind": "review", "text": "Use the marker MK-77.", "scope": []}]})


class Events:
    def __init__(self):
        self.all: list[tuple[str, dict, str]] = []

    def __call__(self, kind: str, payload: dict, visibility: str = "agent") -> None:
        self.all.append((kind, payload, visibility))

    def of(self, kind: str) -> list[dict]:
        return [p for k, p, _ in self.all if k == kind]


def test_memory_calls_are_model_calls_of_their_purpose_recorded_and_replayed(tmp_path) -> None:
    blobs = tmp_path / "blobs"
    events = Events()
    with ScriptedUpstream() as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-test"}, record=True), blob_dir=blobs)
        client = MemoryModel("gpt-5-mini", gateway, UNIT, events)
        answer = client.ask("sleep", REFLECT_SYSTEM, ASK)
        judged = client.ask("judge", REFLECT_SYSTEM.replace("reflect", "judge"), ASK)
        client.close()
    assert parse_lessons(answer, ["e1"]) == [("Lesson (review): Use the marker MK-77.", ["e1"])]
    assert judged is not None
    calls = events.of("ModelCall")
    assert [(c["call_id"], c["purpose"], c["status"], c["recorded"]) for c in calls] == \
        [("mem1", "sleep", "ok", True), ("mem2", "judge", "ok", True)]
    assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 and c["cost_usd"] > 0 and c["price"] == "gpt-5-mini*"
               for c in calls)
    assert all(PURPOSE_HEADER.lower() not in {h.lower() for h in r["headers"]} for r in upstream.requests)
    assert all(r["headers"].get("Authorization") == "Bearer sk-test" for r in upstream.requests)

    answers = {(UNIT, c["match_digest"]): [RecordedAnswer(200, False, c["response_digest"])] for c in calls}
    replay = ModelGateway(GatewaySettings(), blob_dir=tmp_path / "blobs-replay", replay=Recording(blobs, answers, "rec"))
    replayed = Events()
    client = MemoryModel("gpt-5-mini", replay, UNIT, replayed)
    assert client.ask("sleep", REFLECT_SYSTEM, ASK) == answer
    # a request the recording does not hold: the policy's divergence (it stores nothing new), never an exclusion
    assert client.ask("sleep", REFLECT_SYSTEM, ASK.replace("MK-77", "MK-78")) is None
    client.close()
    assert [(c["mode"], c["status"]) for c in replayed.of("ModelCall")] == [("replay", "ok"), ("replay", "replay_miss")]
    assert "HTTP 400" in replayed.of("Turn")[-1]["text"]["text"]


MEMORY_TARGET = Target("openai", "chat_completions", "m", "memory", "--memory-model m")


def test_an_unavailable_memory_model_raises_the_exclusion(tmp_path) -> None:
    """The legitimate exclusion: the memory model fails every call and the gateway's own probe of
    `--memory-model` too."""
    events = Events()
    with ScriptedUpstream(status=503) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}), targets=[MEMORY_TARGET])
        client = MemoryModel("m", gateway, UNIT, events)
        with pytest.raises(ModelUnavailable) as caught:
            client.ask("sleep", REFLECT_SYSTEM, ASK)
        client.close()
    assert caught.value.reason == "model_unavailable"
    assert [c["status"] for c in events.of("ModelCall")] == ["upstream_error"]


def test_a_request_too_large_for_the_memory_model_is_the_policys_failure_not_an_exclusion(tmp_path) -> None:
    """A session the agent made too large for the memory model's per-minute limit: 429 through the
    retries, but the probe of `--memory-model` is answered, so the policy stores nothing new (a
    note says why) and nothing is excluded."""
    events = Events()
    with ScriptedUpstream(too_large="MK-77") as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}), targets=[MEMORY_TARGET])
        client = MemoryModel("m", gateway, UNIT, events)
        assert client.ask("sleep", REFLECT_SYSTEM, ASK) is None
        assert client.channel().failure is None
        client.close()
    (call,) = events.of("ModelCall")
    assert (call["status"], call["http_status"]) == ("request_failed", 429)
    assert "Request too large" in call["error"] and "probe of the configured model was answered" in call["error"]
    (note,) = [p for k, p, _ in events.all if k == "Turn"]
    assert note["source_kind"] == "memory_policy_error" and "HTTP 429" in note["text"]["text"]


def test_an_invalid_answer_is_returned_as_text_and_a_client_error_as_none(tmp_path) -> None:
    events = Events()
    with ScriptedUpstream({"memory": "invalid"}) as upstream:
        client = MemoryModel("m", ModelGateway(GatewaySettings({"*": upstream.base_url})), UNIT, events)
        text = client.ask("sleep", REFLECT_SYSTEM, ASK)
        client.close()
    assert "not JSON" in text
    with ScriptedUpstream(status=400) as upstream:
        client = MemoryModel("m", ModelGateway(GatewaySettings({"*": upstream.base_url})), UNIT, events)
        assert client.ask("sleep", REFLECT_SYSTEM, ASK) is None  # the policy falls back; the unit goes on
        client.close()
    client.note("B3-llm session 1: reflection answer unusable (the answer is not JSON); no lesson stored")
    kind, payload, visibility = events.all[-1]
    assert (kind, payload["source_kind"], visibility) == ("Turn", "memory_policy_error", "harness")


def test_an_agent_channel_cannot_claim_a_memory_purpose(tmp_path) -> None:
    events = Events()
    with ScriptedUpstream() as upstream:
        channel = ModelGateway(GatewaySettings({"*": upstream.base_url})).open_channel(UNIT, events)
        connection = channel.http_connection(30)
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        connection.request("POST", "/v1/chat/completions", body=body,
                           headers={"Content-Type": "application/json", PURPOSE_HEADER: "judge"})
        connection.getresponse().read()
        connection.close()
        channel.close()
    (call,) = events.of("ModelCall")
    assert (call["call_id"], call["purpose"]) == ("m1", "agent")
