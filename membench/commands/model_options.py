"""The model gateway's options of `membench run` and `transfer` (docs/gateway.md), read into the
pipeline's `ModelSettings`; the rules they must meet and the gateway they start are the pipeline's
(`membench/pipeline/model_gateway.py`), which the library call shares."""

from __future__ import annotations

import functools
from pathlib import Path

import click

from membench.pipeline.model_gateway import ModelSettings


def model_options(command):
    """Adds the options and passes them to the command as `model=ModelSettings(...)`."""
    @click.option("--model-base-url", "model_base_urls", multiple=True, metavar="[PROVIDER=]URL",
                  help="the upstream model API root incl. its version (e.g. http://127.0.0.1:8000/v1); "
                       "PROVIDER (openai, anthropic) limits it to one provider; repeatable. The key is "
                       "read from MEMBENCH_MODEL_API_KEY (or MEMBENCH_OPENAI_API_KEY / MEMBENCH_ANTHROPIC_API_KEY)")
    @click.option("--model-record", is_flag=True, help="store every model request and response in the run set's blobs")
    @click.option("--model-replay", "model_replay", metavar="RUN_SET", default=None,
                  help="answer model calls from RUN_SET's recording (no upstream; a miss excludes the unit)")
    @click.option("--model-prices", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
                  help="price table (JSON, USD per million tokens) replacing the built-in one")
    @click.option("--model-timeout", type=click.FloatRange(0.1), default=600.0, show_default=True,
                  help="seconds the upstream may stay silent before a call is retried (docs/gateway.md)")
    @click.option("--max-steps", type=click.IntRange(1), default=50, show_default=True,
                  help="openai:MODEL agent: model calls per session")
    @click.option("--max-tokens", type=click.IntRange(1), default=1_000_000, show_default=True,
                  help="openai:MODEL agent: tokens per session (as the upstream counts them)")
    @click.option("--memory-model", "memory_model", metavar="MODEL", default=None,
                  help="the model the model-driven memory policies (B3-llm, DF-llm, DF-hybrid-llm) call for their "
                       "sleep and judge steps, from the harness through the model gateway (same upstream, key, "
                       "record and replay options)")
    @click.option("--no-preflight", "no_preflight", is_flag=True,
                  help="skip the pre-flight probe of each configured model (one cheap call per provider, wire API "
                       "and model before any unit runs)")
    @click.option("--model-max-request-bytes", "model_max_request_bytes", type=click.IntRange(1024), default=None,
                  help="the gateway refuses a request body over this many bytes itself, as the agent's 413 "
                       "[default: 33554432, 32 MiB]; set it to a proxy's limit in front of the upstream")
    @click.option("--model-rpm", "model_rpm", type=click.IntRange(1), default=None,
                  help="the key's requests per minute: each of the run's concurrent units (--workers) may use "
                       "its share, over it the gateway answers the unit's call 429 itself [default: the limit the "
                       "upstream states in the pre-flight answer's rate-limit headers, else none]")
    @click.option("--model-tpm", "model_tpm", type=click.IntRange(1), default=None,
                  help="the key's tokens per minute, shared as --model-rpm is")
    @functools.wraps(command)
    def wrapper(*args, model_base_urls, model_record, model_replay, model_prices, model_timeout, max_steps,
                max_tokens, memory_model, no_preflight, model_max_request_bytes, model_rpm, model_tpm, **kwargs):
        options = ModelSettings(tuple(model_base_urls), model_record, model_replay, model_prices, model_timeout,
                                max_steps, max_tokens, memory_model, not no_preflight, model_max_request_bytes,
                                model_rpm, model_tpm)
        return command(*args, model=options, **kwargs)
    return wrapper
