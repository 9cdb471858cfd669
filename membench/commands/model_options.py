"""The model gateway's options of `membench run` (docs/gateway.md), and the gateway they start."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import click

from membench.errors import UsageError


@dataclass(frozen=True)
class ModelOptions:
    base_urls: tuple[str, ...] = ()
    record: bool = False
    replay: str | None = None
    prices: Path | None = None
    timeout_s: float = 600.0
    max_steps: int = 50
    max_tokens: int = 1_000_000
    memory_model: str | None = None  # the model of the model-driven memory policies (B3-llm, DF-llm, …)
    preflight: bool = True  # probe every configured model before any unit runs (producers/gateway/preflight.py)
    max_request_bytes: int | None = None  # None: the gateway's default cap (server.MAX_REQUEST_BYTES)
    rpm: int | None = None  # the run's requests per minute (the key's limit), shared among concurrent units
    tpm: int | None = None  # the run's tokens per minute, likewise

    @property
    def used(self) -> bool:
        return bool(self.base_urls or self.replay or self.record)


def model_options(command):
    """Adds the options and passes them to the command as `model=ModelOptions(...)`."""
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
        options = ModelOptions(tuple(model_base_urls), model_record, model_replay, model_prices, model_timeout,
                               max_steps, max_tokens, memory_model, not no_preflight, model_max_request_bytes,
                               model_rpm, model_tpm)
        return command(*args, model=options, **kwargs)
    return wrapper


def parse_base_urls(values: tuple[str, ...]) -> dict[str, str]:
    from producers.gateway.server import PROVIDERS

    urls: dict[str, str] = {}
    for value in values:
        provider, sep, url = value.partition("=")
        if not sep or "://" in provider:
            provider, url = "*", value
        if provider != "*" and provider not in PROVIDERS:
            raise UsageError(f"--model-base-url {value}: unknown provider '{provider}' (known: {', '.join(PROVIDERS)})")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--model-base-url {value}: expected an http:// or https:// URL")
        urls[provider] = url.rstrip("/")
    return urls


def check_model_options(options: ModelOptions, agent, model_driven: list[str] | tuple[str, ...] = ()) -> None:
    """Usage errors before anything runs: a model agent, and a model-driven memory policy (the
    conditions `model_driven`), need an upstream or a recording; the two modes exclude each other;
    a model-driven policy needs --memory-model, which nothing else uses."""
    needs = getattr(agent, "needs_gateway", False)
    if model_driven and not options.memory_model:
        raise UsageError(f"--conditions {','.join(model_driven)}: a model-driven memory policy needs --memory-model "
                         "MODEL (and --model-base-url URL or --model-replay RUN_SET)")
    if options.memory_model and not model_driven:
        raise UsageError("--memory-model: no condition of this run is model-driven (B3-llm, DF-llm, DF-hybrid-llm, "
                         "and the memory libraries B5-MEM0, B5-MEM0-LIT, B2-dense, B5-LANGMEM)")
    if model_driven and not (options.base_urls or options.replay):
        raise UsageError(f"--memory-model {options.memory_model}: the memory model is reached through the model "
                         "gateway: give --model-base-url URL (key in MEMBENCH_MODEL_API_KEY) or --model-replay RUN_SET")
    if options.replay and options.base_urls:
        raise UsageError("--model-replay and --model-base-url exclude each other: a replay reaches no upstream")
    if options.replay and options.record:
        raise UsageError("--model-replay and --model-record exclude each other")
    if needs and not (options.base_urls or options.replay):
        raise UsageError(f"--agent {agent.name}: a model agent needs --model-base-url URL (with the key in "
                         "MEMBENCH_MODEL_API_KEY) or --model-replay RUN_SET")
    if options.used and not needs and not model_driven:
        raise UsageError(f"--agent {agent.name} calls no model: --model-* options apply to openai:MODEL, codex, "
                         "claude-code and command:PROGRAM, and to model-driven memory conditions")
    parse_base_urls(options.base_urls)
    if options.prices is not None:
        from producers.gateway.prices import PriceTable, PriceTableError

        try:
            PriceTable.load(options.prices)
        except PriceTableError as exc:
            raise UsageError(f"--model-prices: {exc}") from None


def order_model(options: ModelOptions) -> dict | None:
    """The model settings a Kafka run's unit orders carry (`producers.unit_queue.ModelOrder`), None
    when the run calls no model. The price table travels as its document: a runner on another machine
    has no path of this one. No key: each runner reads its own from its environment."""
    if not options.used:
        return None
    import json

    from producers.unit_queue import ModelOrder

    prices = json.loads(options.prices.read_text(encoding="utf-8")) if options.prices is not None else None
    return ModelOrder(parse_base_urls(options.base_urls), options.record, options.replay, prices, options.timeout_s,
                      options.max_steps, options.max_tokens, options.memory_model, options.preflight,
                      options.max_request_bytes, options.rpm, options.tpm).to_dict()


def start_gateway(options: ModelOptions, runs_dir: Path, run_set: str, targets=(), workers: int = 1,
                  recording=None):
    """The run set's gateway, or None when the options name no model. `targets` (preflight.Target)
    are what the run calls: forwarding to an upstream, each is probed first (unless --no-preflight)
    and a failure is a usage error, before anything is written; the gateway keeps them to tell a
    misconfigured harness from an agent's own refused request during the run. `workers`: the units
    running at once, among which the run's rate limit is shared (producers/gateway/rate_shares.py).
    `recording`: the replay's, already read (a Kafka run set's: `pipeline.distributed.runner_models`)."""
    if not (options.base_urls or options.replay):
        return None
    from producers.bus.base import run_set_log_path
    from producers.gateway.prices import PriceTable
    from producers.gateway.recording import Recording, RecordingError
    from producers.gateway.rate_shares import RateLimit
    from producers.gateway.server import MAX_REQUEST_BYTES, GatewaySettings, ModelGateway, keys_from_env

    replay = recording
    if options.replay and replay is None:
        try:
            replay = Recording.from_log(run_set_log_path(runs_dir, options.replay), runs_dir / options.replay / "blobs",
                                        options.replay)
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    settings = GatewaySettings(
        base_urls=parse_base_urls(options.base_urls), keys=keys_from_env(), record=options.record,
        timeout_s=options.timeout_s,
        prices=PriceTable.load(options.prices) if options.prices else PriceTable.default(),
        max_request_bytes=options.max_request_bytes or MAX_REQUEST_BYTES,
        rate_limits={"*": RateLimit(options.rpm, options.tpm)} if options.rpm or options.tpm else {},
        rate_units=workers)
    gateway = ModelGateway(settings, blob_dir=runs_dir / run_set / "blobs", replay=replay, targets=targets)
    if replay is None and options.preflight:
        preflight(gateway)
    return gateway


def preflight(gateway) -> None:
    """Probe each of the gateway's targets; print one line each, or refuse the run (exit 2) naming
    every failure: provider, URL, HTTP status and the fix. Nothing has been written yet."""
    from producers.gateway.preflight import probe

    results = [probe(gateway, target) for target in gateway.targets]
    failed = [r for r in results if not r.ok]
    if failed:
        raise UsageError("pre-flight failed: " + "; ".join(r.message for r in failed)
                         + " (nothing was run or written; --no-preflight skips this check)")
    for result in results:
        click.echo(f"pre-flight: {result.message}", err=True)
        # a limit the run did not set is taken as the upstream states it to the harness's own probe
        # (never from an agent's call: an agent could name a tightly limited model to shrink every share)
        gateway.shares.learn(result.target.provider, result.stated_limit)
