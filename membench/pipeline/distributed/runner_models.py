"""The model gateway a Kafka run hosts for the units it runs (docs/gateway.md "Model agents on
runners"): one per run set and model settings in each `membench runner` (and in `run --bus kafka`),
built from the settings the unit orders carry (`membench.runner.unit_queue.ModelOrder`) and the API key of
this process's environment — which therefore never reaches the units topic, the sandbox or the log.

Before the first unit of a run set runs here, the runner checks what it is about to run: each model
the run calls answers the pre-flight probe from this machine, and each memory condition is admitted
(its conformance record in this runner's `MEMBENCH_HOME`, for the exact configuration, model and
upstream it will run). A refusal is the runner's (`RunnerError`): the unit stays unclaimed for a
runner that can run it.

A replay (`--model-replay RUN_SET` of a Kafka run set) is answered from RUN_SET's completed runs as
the trajectory topic holds them, their bodies fetched from the blobs topic (`membench/bus/kafka_blobs.py`)
into this machine's `runs/RUN_SET/blobs/`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from membench.pipeline.settings import Settings


class ModelsRefused(RuntimeError):
    """This process cannot run the order's models (a pre-flight, an admission, a recording); the message
    says which and the fix."""


@dataclass(frozen=True)
class HostedModels:
    gateway: object  # membench.gateway.server.ModelGateway
    loop: object  # membench.agents.model_agents.LoopLimits
    memory_model: str | None


def recording_from_kafka(settings: Settings, run_set: str):
    """The recording of a Kafka run set: the ModelCall events of its completed runs (the unit-status
    topic names them; an abandoned attempt's calls are not part of it), their bodies copied from the
    blobs topic into `runs/<run_set>/blobs/`."""
    from membench.bus.kafka import read_run_events, read_unit_status
    from membench.bus.kafka_blobs import fetch_blobs
    from membench.gateway.recording import Recording
    from membench.bus.topics import topics_from_dsn

    topics = topics_from_dsn(settings.bus)
    statuses = read_unit_status(topics, run_set)
    runs = {r["run_id"] for r in statuses.values() if r.get("status") == "completed" and r.get("run_id")}
    if not runs:
        raise ModelsRefused(f"--model-replay: run set '{run_set}' has no completed unit on {settings.bus}")
    blob_dir = settings.runs_dir / run_set / "blobs"
    fetch_blobs(topics, run_set, lambda _: blob_dir)
    return Recording.from_events(read_run_events(topics, runs, {"ModelCall"}), blob_dir, run_set)


def order_prices(order):
    """The PriceTable a ModelOrder carries (its document), else the built-in one."""
    from membench.gateway.prices import PriceTable, PriceTableError

    if order.prices is None:
        return PriceTable.default()
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json") as doc:  # one reader for the file and the order
        json.dump(order.prices, doc)
        doc.flush()
        try:
            return PriceTable.load(Path(doc.name))
        except PriceTableError as exc:
            raise ModelsRefused(f"the order's price table: {exc}") from None


def open_models(settings: Settings, run_set: str, order, agent_spec: str, workers: int,
                recording=None, log: Callable[[str], None] = lambda line: None) -> HostedModels:
    """The gateway for ORDER (a ModelOrder) in this process, its models probed first (unless the
    order turned the pre-flight off, or replays). RECORDING: the replay's, when already read."""
    from membench.agents.model_agents import LoopLimits
    from membench.agents.registry import make_agent
    from membench.gateway.preflight import targets_for
    from membench.gateway.recording import RecordingError
    from membench.pipeline.model_gateway import open_gateway
    from membench.pipeline.run_errors import RequestInvalid

    loop = LoopLimits(order.max_steps, order.max_tokens)
    agent = make_agent(agent_spec, loop, with_gateway=True)
    # the memory model is set only when a condition of the run set is model-driven (`run` checks it)
    targets = targets_for(agent, order.memory_model)
    if order.replay and recording is None:
        try:
            recording = recording_from_kafka(settings, order.replay)
        except RecordingError as exc:
            raise ModelsRefused(str(exc)) from None
    try:
        gateway = open_gateway(order.base_urls, order, settings.runs_dir / run_set / "blobs", recording,
                               order_prices(order), targets, workers, say=log)
    except RequestInvalid as exc:  # the pre-flight: another runner may reach the upstream
        raise ModelsRefused(f"on this runner: {exc}") from None
    return HostedModels(gateway, loop, order.memory_model)


class RunnerModels:
    """The gateways and admissions of one runner process, per run set and model settings: opened on
    the first unit that needs them, kept for the next. `admit(condition, memory_model, base_urls,
    any_upstream)` is the conformance rule (None: admitted; else why not), passed in by the command."""

    def __init__(self, settings: Settings, workers: int, admit: Callable[..., str | None] | None = None,
                 log: Callable[[str], None] = lambda line: None):
        self.settings = settings
        self.workers = workers
        self._admit = admit
        self._log = log
        self._lock = threading.Lock()
        self._hosted: dict[tuple[str, str], HostedModels] = {}
        self._admitted: set[tuple[str, str, str]] = set()

    def for_order(self, order) -> HostedModels | None:
        """The models of a unit order (membench.runner.unit_queue.UnitOrder), None when it calls none;
        raises ModelsRefused when this runner cannot run them."""
        from membench.runner.unit_queue import ModelOrder

        model = ModelOrder.from_dict(order.model) if order.model is not None else None
        self._check_admission(order, model)
        if model is None:
            return None
        key = (order.run_set, json.dumps(order.model, sort_keys=True))
        with self._lock:  # one pre-flight per run set and settings, whatever the workers
            if key not in self._hosted:
                self._hosted[key] = open_models(self.settings, order.run_set, model, order.agent, self.workers,
                                                log=self._log)
                self._log(f"gateway for run set {order.run_set}: "
                          + (f"replaying {model.replay}" if model.replay else
                             "upstream " + ", ".join(f"{p}={u}" for p, u in sorted(model.base_urls.items()))))
            hosted = self._hosted[key]
        return hosted

    def _check_admission(self, order, model) -> None:
        from membench.memory_systems.registry import is_model_driven

        if self._admit is None:
            return
        memory_model = model.memory_model if model is not None and is_model_driven(order.condition) else None
        key = (order.condition, memory_model or "", json.dumps(order.model, sort_keys=True))
        if key in self._admitted:
            return
        why = self._admit(order.condition, memory_model, dict(model.base_urls) if model else {},
                          bool(model and model.replay))
        if why is not None:
            raise ModelsRefused(f"condition '{order.condition}' is not admitted for evaluation on this runner: {why}")
        self._admitted.add(key)
