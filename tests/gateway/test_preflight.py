"""The gateway's pre-flight probe and its in-run re-check, against membench's scripted local upstream
(membench.bench.scripted_model_server; no model API is reachable from the test machines) configured as a
misconfigured real provider would answer: a key it requires, the wire APIs it speaks, the models it
knows. The probe goes through a real gateway channel, so it proves what an agent's call would meet."""

from __future__ import annotations

import json
import socket

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.gateway.preflight import Target, probe, targets_for
from membench.gateway.server import GatewaySettings, ModelGateway, ModelMisconfigured
from tests.gateway.test_server import Events, post

KEY = "sk-test-preflight-5c1d"
CHAT = Target("openai", "chat_completions", "gpt-4o-mini", "agent", "--agent openai:gpt-4o-mini")
CODEX = Target("openai", "responses", "gpt-5-codex", "agent", "--agent codex:gpt-5-codex")


def test_a_working_configuration_passes_and_the_probe_is_a_preflight_model_call_never_recorded(tmp_path):
    with ScriptedUpstream(key=KEY) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"openai": KEY}, record=True),
                               blob_dir=tmp_path / "blobs")
        result = probe(gateway, CHAT)
    assert result.ok and result.http_status == 200, result.message
    assert upstream.requests[0]["path"] == "/v1/chat/completions"
    assert upstream.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    call = result.call
    assert call["purpose"] == "preflight" and call["call_id"] == "pre1" and call["model"] == "gpt-4o-mini"
    assert not call["recorded"] and not (tmp_path / "blobs").exists()  # --model-record stores no probe


def test_no_key_against_a_server_that_requires_one_names_the_variable(tmp_path):
    with ScriptedUpstream(key=KEY) as upstream:
        result = probe(ModelGateway(GatewaySettings({"*": upstream.base_url})), CHAT)
        wrong = probe(ModelGateway(GatewaySettings({"*": upstream.base_url}, {"*": "sk-wrong"})), CHAT)
    assert result.problem == "key" and result.http_status == 401
    assert "MEMBENCH_OPENAI_API_KEY" in result.message and upstream.base_url in result.message
    assert "401" in result.message and "no key is set" in result.message
    assert wrong.problem == "key" and "refused the key" in wrong.message and "sk-wrong" not in wrong.message


def test_codex_against_a_chat_only_server_says_it_needs_the_responses_api(tmp_path):
    with ScriptedUpstream(apis=("chat_completions",)) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}))
        result = probe(gateway, CODEX)
        control = probe(gateway, CHAT)  # the same server speaks Chat Completions
    assert result.problem == "wire_api" and result.http_status == 404
    assert "codex needs the Responses API; this endpoint answered 404 on /v1/responses" in result.message
    assert control.ok


def test_an_unknown_model_and_an_unreachable_server(tmp_path):
    with ScriptedUpstream(models=("gpt-4o",)) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}))
        unknown = probe(gateway, CHAT)
        known = probe(gateway, Target("openai", "chat_completions", "gpt-4o", "agent", "--agent openai:gpt-4o"))
    assert unknown.problem == "model" and "'gpt-4o-mini'" in unknown.message and known.ok
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    down = probe(ModelGateway(GatewaySettings({"*": f"http://127.0.0.1:{port}/v1"})), CHAT)
    assert down.problem == "unreachable" and f"127.0.0.1:{port}" in down.message


def test_targets_cover_the_agent_and_the_memory_model_but_not_a_command_agents_own_choice():
    from membench.agents.registry import make_agent

    codex = make_agent("codex", with_gateway=True)
    assert targets_for(codex, "mem-model") == [
        Target("openai", "responses", "gpt-5-codex", "agent", "--agent codex:gpt-5-codex"),
        Target("openai", "chat_completions", "mem-model", "memory", "--memory-model mem-model")]
    (claude,) = targets_for(make_agent("claude-code:claude-x", with_gateway=True))
    assert (claude.provider, claude.api, claude.model) == ("anthropic", "messages", "claude-x")
    assert targets_for(make_agent("command:/bin/true", with_gateway=True)) == []


# ---------------------------------------------------------------- during a run
def _agent_call(upstream, settings, targets, model):
    events = Events()
    gateway = ModelGateway(settings, targets=targets)
    with gateway.open_channel("suite/task/B0/1", events) as channel:
        status, _ = post(channel, "/v1/chat/completions", {"model": model, "messages": [{"role": "user",
                                                                                          "content": "hi"}]})
    return channel, events.of("ModelCall"), status


def test_a_refusal_the_probe_reproduces_excludes_the_unit():
    with ScriptedUpstream(key=KEY) as upstream:  # the harness has no key: the probe is refused too
        channel, calls, status = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [CHAT],
                                             "gpt-4o-mini")
    assert status == 401
    assert isinstance(channel.failure, ModelMisconfigured) and channel.failure.reason == "model_misconfigured"
    assert "MEMBENCH_OPENAI_API_KEY" in str(channel.failure)
    (call,) = calls  # the probe's own call is not in the session's events
    assert call["status"] == "misconfigured" and call["purpose"] == "agent"
    assert len(upstream.requests) == 2  # the agent's call, then the gateway's probe


def test_an_agents_own_bad_model_is_not_an_exclusion():
    """The reward-hack control: a model the agent chose is refused, the configured one is not —
    the probe passes and the refusal counts against the agent (client_error, no exclusion)."""
    with ScriptedUpstream(models=("gpt-4o-mini",)) as upstream:
        channel, calls, status = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [CHAT],
                                             "no-such-model")
        probe_body = json.loads(upstream.requests[1]["body"])
    assert status == 404 and channel.failure is None
    assert [c["status"] for c in calls] == ["client_error"]
    assert "The model `no-such-model` does not exist" in calls[0]["error"]  # the upstream's own words, kept
    assert probe_body["model"] == "gpt-4o-mini"  # the configured model, never the agent's


def test_without_a_configured_model_no_refusal_is_proof():
    """A `command:` agent names its own model and path: neither a 404 on a bogus model nor a 401
    proves the harness misconfigured (the agent could provoke either to exclude its own cell), and
    nothing is probed."""
    with ScriptedUpstream(models=("real-model",)) as upstream:
        channel, calls, _ = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [], "bogus")
    assert channel.failure is None and calls[0]["status"] == "client_error"
    with ScriptedUpstream(key=KEY) as upstream:
        channel, calls, _ = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [], "anything")
    assert channel.failure is None and calls[0]["status"] == "client_error" and len(upstream.requests) == 1


def test_a_refusal_on_a_provider_the_run_never_configured_is_the_agents_own():
    """A codex run with only an OpenAI key; the agent POSTs Anthropic's
    /v1/messages, which has no key, and is refused 401. That proves nothing about the harness: no
    probe, no exclusion, the agent's client_error. The control: the same refusal on the configured
    provider's other wire API probes the configured target (never the agent's model) and a refused
    key there is proof."""
    events = Events()
    with ScriptedUpstream(key=KEY) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"openai": KEY}), targets=[CODEX])
        with gateway.open_channel("suite/task/B0/1", events) as channel:
            status, _ = post(channel, "/v1/messages", {"model": "claude-x", "max_tokens": 1,
                                                       "messages": [{"role": "user", "content": "hi"}]})
    assert status == 401 and channel.failure is None
    assert [c["status"] for c in events.of("ModelCall")] == ["client_error"] and len(upstream.requests) == 1
    # the control: a wrong OpenAI key, the agent asks for Chat Completions and its own model
    with ScriptedUpstream(key=KEY) as upstream:
        channel, calls, status = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}, {"openai": "bad"}),
                                             [CODEX], "agents-own-model")
        probed = upstream.requests[1]
    assert status == 401 and isinstance(channel.failure, ModelMisconfigured) and calls[0]["status"] == "misconfigured"
    assert probed["path"] == "/v1/responses" and json.loads(probed["body"])["model"] == "gpt-5-codex"


@pytest.mark.parametrize("status", [400, 422])
def test_other_client_errors_are_never_probed(status):
    with ScriptedUpstream(status=status) as upstream:
        channel, calls, _ = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [CHAT], "gpt-4o-mini")
    assert channel.failure is None and len(upstream.requests) == 1 and calls[0]["status"] == "client_error"


def test_an_upstream_error_text_is_kept_with_the_key_redacted():
    """The ModelCall keeps what the upstream said (bounded), never the key it echoes."""
    channel, calls, status = _call_an_echoing_upstream(
        400, lambda authorization: f"context too long for {authorization}")
    assert status == 400 and calls[0]["status"] == "client_error"
    assert calls[0]["error"].startswith("HTTP 400: context too long for Bearer [redacted]")
    assert "plain-key-value-77" not in calls[0]["error"]


def test_a_provider_with_no_upstream_is_the_agents_request_unless_the_run_configured_it():
    """A run whose only upstream is OpenAI's; an agent POSTing Anthropic's path
    gets a 404 that counts against it (client_error), it does not exclude its own unit. The
    control: when the run configured that provider for the agent, the missing upstream is the
    harness's (excluded model_misconfigured)."""
    claude = Target("anthropic", "messages", "claude-x", "agent", "--agent claude-code:claude-x")
    request = {"model": "claude-x", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    with ScriptedUpstream() as upstream:
        for targets, expected in (([CODEX], "client_error"), ([claude], "misconfigured")):
            events = Events()
            gateway = ModelGateway(GatewaySettings({"openai": upstream.base_url}), targets=targets)
            with gateway.open_channel("suite/task/B0/1", events) as channel:
                status, body = post(channel, "/v1/messages", request)
            (call,) = events.of("ModelCall")
            assert call["status"] == expected and "no upstream configured for anthropic" in call["error"]
            if expected == "client_error":
                assert status == 404 and channel.failure is None
            else:
                assert status == 502 and isinstance(channel.failure, ModelMisconfigured)
    assert upstream.requests == []


def test_a_proven_misconfiguration_keeps_the_upstreams_words_with_the_key_redacted():
    """The probe's message quotes the upstream's answer (up to 160 characters); an
    upstream that echoes the key in a 404 'model not found' must not put it into the ModelCall's
    error or the unit's exclusion reason."""
    channel, calls, status = _call_an_echoing_upstream(
        404, lambda authorization: f"model not found for key {authorization.removeprefix('Bearer ')}")
    assert status == 404 and calls[0]["status"] == "misconfigured"
    assert isinstance(channel.failure, ModelMisconfigured)
    assert "model not found for key [redacted]" in calls[0]["error"]
    assert "plain-key-value-77" not in calls[0]["error"] and "plain-key-value-77" not in str(channel.failure)


def test_the_model_users_refusal_is_checked_against_the_user_target():
    """The transfer model user's channel checks a refusal against the
    `--user model:M` target, not the agent's: the user's configured model is unknown to the
    upstream while the agent's is known, so the probe (of the user's model) proves the harness
    misconfigured. Checked against the agent's target, the probe would pass and the refusal would
    count as the user's client_error."""
    from membench.transfer_protocol.model_user import _UserChannel

    user = Target("openai", "chat_completions", "user-model", "user", "--user model:user-model")
    events = Events()
    with ScriptedUpstream(models=("gpt-4o-mini",)) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}), targets=[CHAT, user])
        with _UserChannel(gateway, "suite/task/B0/1", events) as channel:
            status, _ = post(channel, "/v1/chat/completions", {"model": "user-model",
                                                               "messages": [{"role": "user", "content": "hi"}]})
        probed = json.loads(upstream.requests[1]["body"])["model"]
    assert channel.role == "user" and probed == "user-model"
    assert status == 404 and isinstance(channel.failure, ModelMisconfigured)
    assert "--user model:user-model" in str(channel.failure)


def test_a_persistent_failure_with_nothing_configured_to_probe_is_the_callers_own():
    """A `command:` agent names its own model: the run configured nothing of that provider to probe,
    so a 429 that persists through the retries is its request's failure, never an exclusion — the
    same as a refusal (above). The control: the same upstream with the agent's target configured
    (the probe meets the 429 as well) excludes."""
    with ScriptedUpstream(status=429) as upstream:
        channel, calls, status = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [], "its-own")
        assert status == 429 and channel.failure is None and len(upstream.requests) == 3  # no probe
        assert calls[0]["status"] == "request_failed" and "configured no model" in calls[0]["error"]
        channel, calls, _ = _agent_call(upstream, GatewaySettings({"*": upstream.base_url}), [CHAT], "gpt-4o-mini")
    assert channel.failure is not None and channel.failure.reason == "model_unavailable"
    assert calls[0]["status"] == "upstream_error"


def _call_an_echoing_upstream(status: int, message):
    """An agent's call (key plain-key-value-77) to an upstream that answers STATUS with an error
    whose message, MESSAGE(the Authorization header it got), echoes the key: (channel, ModelCalls, status)."""
    import http.server
    import threading

    class Echo(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": {"message": message(self.headers["Authorization"])}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        return _agent_call(None, GatewaySettings({"*": f"http://127.0.0.1:{server.server_port}/v1"},
                                                 {"*": "plain-key-value-77"}), [CHAT], "gpt-4o-mini")
    finally:
        server.shutdown()
        server.server_close()
