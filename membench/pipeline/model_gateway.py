"""The model settings of a run and the model gateway they start (docs/gateway.md): `ModelSettings`
(what `membench run`'s `--model-*` options and `--memory-model` say, as a type), the rules they must
meet, the run set's gateway with its models probed first, and the default run-set id of a run that
calls a model. The library call (`membench.pipeline.run_request.run_grid`) and the CLI (`membench run`,
`transfer`: option parsing only, `membench/commands/model_options.py`) call the same functions; a
refusal is a `RequestInvalid`, which the CLI shows as a usage error (exit status 2)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from membench.pipeline.run_errors import RequestInvalid

Say = Callable[[str], None]


@dataclass(frozen=True)
class ModelSettings:
    """How a run reaches its models (the option each field mirrors in brackets)."""

    base_urls: tuple[str, ...] = ()  # "[PROVIDER=]URL" each: the upstream API root incl. version [--model-base-url]
    record: bool = False  # store every model request and response in the run set's blobs [--model-record]
    replay: str | None = None  # a run set whose recording answers the calls, no upstream [--model-replay]
    prices: Path | None = None  # a price table (JSON, USD per million tokens); None: the built-in one [--model-prices]
    timeout_s: float = 600.0  # [--model-timeout]
    max_steps: int = 50  # openai:MODEL agent: model calls per session [--max-steps]
    max_tokens: int = 1_000_000  # openai:MODEL agent: tokens per session [--max-tokens]
    memory_model: str | None = None  # what model-driven memory policies (B3-llm, DF-llm, …) call [--memory-model]
    preflight: bool = True  # probe every configured model before any unit runs [--no-preflight]
    max_request_bytes: int | None = None  # None: the gateway's default cap [--model-max-request-bytes]
    rpm: int | None = None  # the run's requests per minute, shared among concurrent units [--model-rpm]
    tpm: int | None = None  # the run's tokens per minute, likewise [--model-tpm]
    # provider (openai, anthropic) or "*" -> API key; None: read from MEMBENCH_MODEL_API_KEY,
    # MEMBENCH_OPENAI_API_KEY, MEMBENCH_ANTHROPIC_API_KEY as the CLI does. Never logged or ordered.
    api_keys: Mapping[str, str] | None = field(default=None, repr=False)

    @property
    def used(self) -> bool:
        return bool(self.base_urls or self.replay or self.record)


def parse_base_urls(values: tuple[str, ...]) -> dict[str, str]:
    """provider (or "*") -> API root of each "[PROVIDER=]URL"."""
    from membench.gateway.server import PROVIDERS

    urls: dict[str, str] = {}
    for value in values:
        provider, sep, url = value.partition("=")
        if not sep or "://" in provider:
            provider, url = "*", value
        if provider != "*" and provider not in PROVIDERS:
            raise RequestInvalid(f"--model-base-url {value}: unknown provider '{provider}' "
                                 f"(known: {', '.join(PROVIDERS)})")
        if not url.startswith(("http://", "https://")):
            raise RequestInvalid(f"--model-base-url {value}: expected an http:// or https:// URL")
        urls[provider] = url.rstrip("/")
    return urls


def check_model_settings(options: ModelSettings, agent, model_driven: list[str] | tuple[str, ...] = ()) -> None:
    """Refused before anything runs: a model agent, and a model-driven memory policy (the conditions
    `model_driven`), need an upstream or a recording; the two modes exclude each other; a model-driven
    policy needs a memory model, which nothing else uses."""
    needs = getattr(agent, "needs_gateway", False)
    for name, value, least in (("--model-timeout", options.timeout_s, 0.1), ("--max-steps", options.max_steps, 1),
                               ("--max-tokens", options.max_tokens, 1),
                               ("--model-max-request-bytes", options.max_request_bytes, 1024),
                               ("--model-rpm", options.rpm, 1), ("--model-tpm", options.tpm, 1)):
        if value is not None and value < least:  # the CLI's option types check these already
            raise RequestInvalid(f"{name}: {value} is below its least value {least}")
    if model_driven and not options.memory_model:
        raise RequestInvalid(f"--conditions {','.join(model_driven)}: a model-driven memory policy needs "
                             "--memory-model MODEL (and --model-base-url URL or --model-replay RUN_SET)")
    if options.memory_model and not model_driven:
        raise RequestInvalid("--memory-model: no condition of this run is model-driven (B3-llm, DF-llm, "
                             "DF-hybrid-llm, and the memory libraries B5-MEM0, B5-MEM0-LIT, B2-dense, B5-LANGMEM)")
    if model_driven and not (options.base_urls or options.replay):
        raise RequestInvalid(f"--memory-model {options.memory_model}: the memory model is reached through the model "
                             "gateway: give --model-base-url URL (key in MEMBENCH_MODEL_API_KEY) or --model-replay "
                             "RUN_SET")
    if options.replay and options.base_urls:
        raise RequestInvalid("--model-replay and --model-base-url exclude each other: a replay reaches no upstream")
    if options.replay and options.record:
        raise RequestInvalid("--model-replay and --model-record exclude each other")
    if needs and not (options.base_urls or options.replay):
        raise RequestInvalid(f"--agent {agent.name}: a model agent needs --model-base-url URL (with the key in "
                             "MEMBENCH_MODEL_API_KEY) or --model-replay RUN_SET")
    if options.used and not needs and not model_driven:
        raise RequestInvalid(f"--agent {agent.name} calls no model: --model-* options apply to openai:MODEL, codex, "
                             "claude-code and command:PROGRAM, and to model-driven memory conditions")
    parse_base_urls(options.base_urls)
    if options.prices is not None:
        from membench.gateway.prices import PriceTable, PriceTableError

        try:
            PriceTable.load(options.prices)
        except PriceTableError as exc:
            raise RequestInvalid(f"--model-prices: {exc}") from None


def model_order(options: ModelSettings) -> dict | None:
    """The model settings a Kafka run's unit orders carry (`membench.runner.unit_queue.ModelOrder`), None
    when the run calls no model. The price table travels as its document: a runner on another machine
    has no path of this one. No key: each runner reads its own from its environment."""
    if not options.used:
        return None
    from membench.runner.unit_queue import ModelOrder

    prices = json.loads(options.prices.read_text(encoding="utf-8")) if options.prices is not None else None
    return ModelOrder(parse_base_urls(options.base_urls), options.record, options.replay, prices, options.timeout_s,
                      options.max_steps, options.max_tokens, options.memory_model, options.preflight,
                      options.max_request_bytes, options.rpm, options.tpm).to_dict()


def model_run_set(pack, agent: str, model: ModelSettings, conditions: list[str], seeds: list[int]) -> str:
    """The default run-set id (as `membench.runner.grid.default_run_set` for a run without models); the
    memory model is part of it, and a replay is a new run set of its own, not the recorded one resumed."""
    from membench.runner.grid import default_run_set

    return default_run_set(pack.name, pack.digest, agent + (f"+memory-model={model.memory_model}"
                                                            if model.memory_model else "")
                           + ("+replay" if model.replay else ""), conditions, seeds)


def refuse_self_replay(model: ModelSettings, run_set: str | None) -> None:
    if model.replay is not None and model.replay == run_set:
        raise RequestInvalid(f"--model-replay {run_set}: a run set cannot replay itself; name another --run-set")


def start_gateway(options: ModelSettings, runs_dir: Path, run_set: str, targets=(), workers: int = 1,
                  recording=None, say: Say = lambda text: None):
    """The run set's gateway, or None when the settings name no model. `targets` (preflight.Target)
    are what the run calls: forwarding to an upstream, each is probed first (unless `preflight` is
    off) and a failure is refused, before anything is written; the gateway keeps them to tell a
    misconfigured harness from an agent's own refused request during the run. `workers`: the units
    running at once, among which the run's rate limit is shared (membench/gateway/rate_shares.py).
    `recording`: the replay's, already read (a Kafka run set's: `membench.pipeline.distributed.runner_models`).
    SAY shows one line per model probed."""
    if not (options.base_urls or options.replay):
        return None
    from membench.bus.base import run_set_log_path
    from membench.gateway.prices import PriceTable
    from membench.gateway.recording import Recording, RecordingError

    replay = recording
    if options.replay and replay is None:
        try:
            replay = Recording.from_log(run_set_log_path(runs_dir, options.replay), runs_dir / options.replay / "blobs",
                                        options.replay)
        except RecordingError as exc:
            raise RequestInvalid(str(exc)) from None
    return open_gateway(parse_base_urls(options.base_urls), options, runs_dir / run_set / "blobs", replay,
                        PriceTable.load(options.prices) if options.prices else PriceTable.default(), targets,
                        workers, dict(options.api_keys) if options.api_keys is not None else None, say)


class GatewayLimits(Protocol):
    """What a gateway's settings take from a run's model settings (a `ModelSettings`, or the unit order's
    `membench.runner.unit_queue.ModelOrder` on a Kafka runner)."""

    @property
    def record(self) -> bool: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def preflight(self) -> bool: ...
    @property
    def max_request_bytes(self) -> int | None: ...
    @property
    def rpm(self) -> int | None: ...
    @property
    def tpm(self) -> int | None: ...


def open_gateway(base_urls: Mapping[str, str], limits: GatewayLimits, blob_dir: Path, replay, prices, targets=(),
                 workers: int = 1, keys: Mapping[str, str] | None = None, say: Say = lambda text: None):
    """A gateway to BASE_URLS (provider -> API root) or answering from REPLAY (a Recording), its
    targets probed first unless it replays or LIMITS turn the pre-flight off; the one place both an
    embedded run (`start_gateway`) and a Kafka runner (`runner_models.open_models`) start theirs.
    KEYS: provider -> API key, None: this process's environment's."""
    from membench.gateway.rate_shares import RateLimit
    from membench.gateway.server import MAX_REQUEST_BYTES, GatewaySettings, ModelGateway, keys_from_env

    settings = GatewaySettings(
        base_urls=dict(base_urls), keys=dict(keys) if keys is not None else keys_from_env(), record=limits.record,
        timeout_s=limits.timeout_s, prices=prices, max_request_bytes=limits.max_request_bytes or MAX_REQUEST_BYTES,
        rate_limits={"*": RateLimit(limits.rpm, limits.tpm)} if limits.rpm or limits.tpm else {},
        rate_units=workers)
    gateway = ModelGateway(settings, blob_dir=blob_dir, replay=replay, targets=targets)
    if replay is None and limits.preflight:
        preflight(gateway, say)
    return gateway


def run_set_gateway(options: ModelSettings, agent, conditions: list[str], runs_dir: Path, run_set: str,
                    workers: int, say: Say = lambda text: None):
    """The gateway of an embedded grid's run set (None when it calls no model): the agent's model and,
    when a condition is model-driven, the memory model are its targets; a run set replaying itself is
    refused."""
    from membench.gateway.preflight import targets_for
    from membench.memory_systems.registry import is_model_driven

    refuse_self_replay(options, run_set)
    targets = targets_for(agent, options.memory_model if any(is_model_driven(c) for c in conditions) else None)
    return start_gateway(options, runs_dir, run_set, targets, workers=workers, say=say)


def preflight(gateway, say: Say = lambda text: None) -> None:
    """Probe each of the gateway's targets; say one line each, or refuse the run naming every failure:
    provider, URL, HTTP status and the fix. Nothing has been written yet."""
    from membench.gateway.preflight import probe

    results = [probe(gateway, target) for target in gateway.targets]
    failed = [r for r in results if not r.ok]
    if failed:
        raise RequestInvalid("pre-flight failed: " + "; ".join(r.message for r in failed)
                             + " (nothing was run or written; --no-preflight skips this check)")
    for result in results:
        say(f"pre-flight: {result.message}")
        # a limit the run did not set is taken as the upstream states it to the harness's own probe
        # (never from an agent's call: an agent could name a tightly limited model to shrink every share)
        gateway.shares.learn(result.target.provider, result.stated_limit)
