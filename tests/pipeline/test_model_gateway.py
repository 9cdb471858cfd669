"""The model settings (`membench run`/`transfer`'s `--model-*` options, the library call's
`RunRequest.model`) reach the gateway they start: the body cap, the run's rate limit divided among
--workers, a limit learned from the pre-flight, and the key (the request's, else the environment's)."""

from __future__ import annotations

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.pipeline.model_gateway import ModelSettings, start_gateway
from membench.pipeline.run_errors import RequestInvalid
from membench.gateway.preflight import Target
from membench.gateway.rate_shares import RateLimit
from membench.gateway.server import MAX_REQUEST_BYTES

TARGET = Target("openai", "chat_completions", "m", "agent", "--agent openai:m")


def test_the_options_set_the_cap_and_each_units_share(tmp_path):
    options = ModelSettings(base_urls=("http://127.0.0.1:9/v1",), preflight=False, max_request_bytes=4096,
                           rpm=30, tpm=90_000)
    gateway = start_gateway(options, tmp_path, "rs", workers=3)
    assert gateway.settings.max_request_bytes == 4096
    assert gateway.shares.share("openai") == gateway.shares.share("anthropic") == RateLimit(10, 30_000)
    default = start_gateway(ModelSettings(base_urls=("http://127.0.0.1:9/v1",), preflight=False), tmp_path, "rs")
    assert default.settings.max_request_bytes == MAX_REQUEST_BYTES and not default.shares.share("openai").limited


def test_an_unset_limit_is_learned_from_the_preflight_answer(tmp_path):
    with ScriptedUpstream({"sessions": []}, rpm=60) as upstream:
        gateway = start_gateway(ModelSettings(base_urls=(upstream.base_url,)), tmp_path, "rs", [TARGET], workers=4)
    assert gateway.shares.share("openai") == RateLimit(15, None)
    with ScriptedUpstream({"sessions": []}, rpm=60) as upstream:
        options = ModelSettings(base_urls=(upstream.base_url,), rpm=8)
        gateway = start_gateway(options, tmp_path, "rs", [TARGET], workers=4)
    assert gateway.shares.share("openai") == RateLimit(2, None)  # the run's own setting wins


def test_the_key_is_the_settings_own_else_the_environments(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_MODEL_API_KEY", "sk-from-env")
    monkeypatch.delenv("MEMBENCH_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MEMBENCH_ANTHROPIC_API_KEY", raising=False)
    with ScriptedUpstream({"sessions": []}, key="sk-given") as upstream:
        given = ModelSettings(base_urls=(upstream.base_url,), api_keys={"*": "sk-given"})
        gateway = start_gateway(given, tmp_path, "rs", [TARGET])
        assert gateway.settings.keys == {"*": "sk-given"} and "sk-given" not in repr(given)
        # control: the environment's key is the one the probe sends without it, and the upstream refuses it
        with pytest.raises(RequestInvalid, match="pre-flight failed"):
            start_gateway(ModelSettings(base_urls=(upstream.base_url,)), tmp_path, "rs", [TARGET])
    assert not (tmp_path / "rs").exists()  # nothing written
