"""The gateway's front-door options of `membench run`/`transfer` reach the gateway they start: the
body cap, the run's rate limit divided among --workers, and a limit learned from the pre-flight."""

from __future__ import annotations

from bench.scripted_model_server import ScriptedUpstream
from membench.commands.model_options import ModelOptions, start_gateway
from producers.gateway.preflight import Target
from producers.gateway.rate_shares import RateLimit
from producers.gateway.server import MAX_REQUEST_BYTES

TARGET = Target("openai", "chat_completions", "m", "agent", "--agent openai:m")


def test_the_options_set_the_cap_and_each_units_share(tmp_path):
    options = ModelOptions(base_urls=("http://127.0.0.1:9/v1",), preflight=False, max_request_bytes=4096,
                           rpm=30, tpm=90_000)
    gateway = start_gateway(options, tmp_path, "rs", workers=3)
    assert gateway.settings.max_request_bytes == 4096
    assert gateway.shares.share("openai") == gateway.shares.share("anthropic") == RateLimit(10, 30_000)
    default = start_gateway(ModelOptions(base_urls=("http://127.0.0.1:9/v1",), preflight=False), tmp_path, "rs")
    assert default.settings.max_request_bytes == MAX_REQUEST_BYTES and not default.shares.share("openai").limited


def test_an_unset_limit_is_learned_from_the_preflight_answer(tmp_path):
    with ScriptedUpstream({"sessions": []}, rpm=60) as upstream:
        gateway = start_gateway(ModelOptions(base_urls=(upstream.base_url,)), tmp_path, "rs", [TARGET], workers=4)
    assert gateway.shares.share("openai") == RateLimit(15, None)
    with ScriptedUpstream({"sessions": []}, rpm=60) as upstream:
        options = ModelOptions(base_urls=(upstream.base_url,), rpm=8)
        gateway = start_gateway(options, tmp_path, "rs", [TARGET], workers=4)
    assert gateway.shares.share("openai") == RateLimit(2, None)  # the run's own setting wins
