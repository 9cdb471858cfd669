"""The model-driven simulated user against the real model gateway (host side, no sandbox needed),
whose upstream is the scripted model server (`membench.bench.scripted_model_server.ScriptedUpstream`): the
model's replies are scripted, so these tests show what the user sends and how it fails, not a
model's judgement. The whole CLI path is in tests/integration/test_transfer_model_user.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.gateway.preflight import Target
from membench.gateway.server import GatewaySettings, ModelGateway, ModelUnavailable
from membench.transfer_protocol.model_user import ModelUser, _reply_text, model_of
from membench.formats.transfer_format import Scenario

SCENARIO = Scenario(Path("scenario.json"), "Build the settlement module.", (("fee", "Fees are 37 bps."),),
                    "Use your judgement.", "Accepted.", "The check failed:\n{output}", "{passed} of {cases} passed.", 2)
SCRIPT = {"sessions": [{"when": "Phase: implementing.", "reply": "Fees are 37 bps, as the scenario says."},
                       {"when": "Phase: delivery_review.", "reply": "Please fix the failing check."}]}


USER_TARGET = Target("openai", "chat_completions", "sim-user", "user", "--user model:sim-user")


def _user(upstream_url: str, emitted: list) -> ModelUser:
    gateway = ModelGateway(GatewaySettings(base_urls={"*": upstream_url}, keys={"*": "k"}, timeout_s=10),
                           targets=[USER_TARGET])
    return ModelUser(SCENARIO, "sim-user", gateway, "study/p/no_memory/1",
                     lambda kind, payload, visibility="agent": emitted.append((kind, payload)))


def test_the_scenario_is_the_brief_and_each_phase_one_call():
    emitted: list = []
    with ScriptedUpstream(SCRIPT) as upstream:
        user = _user(upstream.base_url, emitted)
        try:
            assert user.answer("Which fee applies?") == "Fees are 37 bps, as the scenario says."
            assert user.review(False, "AssertionError: settle.fee missing") == "Please fix the failing check."
        finally:
            user.close()
    bodies = [json.loads(r["body"]) for r in upstream.requests]
    brief = bodies[0]["messages"][0]["content"]
    assert '"plan": "Build the settlement module."' in brief and "Fees are 37 bps." in brief
    assert "Which fee applies?" in bodies[0]["messages"][1]["content"]
    assert "settle.fee missing" in bodies[1]["messages"][1]["content"]
    assert [(k, p["call_id"], p["status"]) for k, p in emitted] == [("ModelCall", "user-m1", "ok"),
                                                                     ("ModelCall", "user-m2", "ok")]


def test_a_failing_model_raises_model_unavailable():
    emitted: list = []
    with ScriptedUpstream(SCRIPT, status=503) as upstream:
        user = _user(upstream.base_url, emitted)
        try:
            with pytest.raises(ModelUnavailable) as caught:
                user.plan()
        finally:
            user.close()
    assert caught.value.reason == "model_unavailable" and emitted[0][1]["status"] == "upstream_error"


def test_a_request_too_large_for_the_users_model_is_never_an_exclusion():
    """The agent's question makes the user's request too large for the model's per-minute limit: the
    gateway's probe of the `--user` model is answered, so the scripted user's answer is said instead
    (a harness note says why) and nothing is excluded. The control: a genuine outage still excludes
    (test_a_failing_model_raises_model_unavailable)."""
    emitted: list = []
    with ScriptedUpstream(SCRIPT, too_large="HUGE-QUESTION") as upstream:
        user = _user(upstream.base_url, emitted)
        try:
            assert user.answer("Which fee? " + "HUGE-QUESTION" * 100) == "Fees are 37 bps."  # the scenario's
            assert user.channel.failure is None
        finally:
            user.close()
    (call,) = [p for k, p in emitted if k == "ModelCall"]
    assert (call["status"], call["http_status"]) == ("request_failed", 429)
    (note,) = [p for k, p in emitted if k == "Turn"]
    assert note["source_kind"] == "simulated_user_fallback" and "HTTP 429" in note["text"]["text"]


def test_no_gateway_is_unavailable_not_an_agent_failure():
    with pytest.raises(ModelUnavailable):
        ModelUser(SCENARIO, "sim-user", None, "u", lambda *a, **k: None)
    assert _reply_text(b'{"choices": [{"message": {"role": "assistant", "content": "  hi  "}}]}') == "hi"
    assert _reply_text(b'{"choices": [{"message": {"content": [{"type": "text", "text": "parts"}]}}]}') == "parts"
    assert _reply_text(b'{"choices": [{"message": {"content": null, "tool_calls": []}}]}') is None
    assert _reply_text(b"not json") is None


def test_the_user_spec():
    assert model_of("scripted") is None and model_of("model:gpt-x") == "gpt-x"
    for bad in ("model:", "human", "openai:gpt-x"):
        with pytest.raises(ValueError):
            model_of(bad)
