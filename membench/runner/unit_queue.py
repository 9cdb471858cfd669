"""Units on a queue: the shape of a unit order and what a runner does with one.

`membench run PACK --bus kafka://… --enqueue` puts one order per unit of the grid on the `units`
topic (key `<run_set>/<unit_id>`); `membench runner` processes on any machine claim them through
a consumer group (`membench/pipeline/distributed/group_member.py`). An order carries everything a runner needs besides
the pack itself, which it opens by its spec and must find with the same digest (a finalized pack
is copied to the runner's `MEMBENCH_HOME/packs/`, or the same directory is mounted).

What a runner does with a claimed order depends on the unit's newest status on the compacted
unit-status topic and, when an earlier attempt started, on that attempt's run in the log (the
trajectory topic is the source of truth): `decide` is that rule, pure, so it is tested without a
broker.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from membench.bus.unit_status import DONE_STATUSES
from membench.runner.grid import RunUnit

ORDER_VERSION = 1


class OrderError(ValueError):
    """A unit order that cannot be read; the message names the field."""


@dataclass(frozen=True)
class UnitOrder:
    """One unit to run, as JSON on the units topic (documented in docs/design.md §2)."""

    run_set: str
    pack: str  # the PACK argument as given (a built-in name or a directory)
    pack_digest: str  # the finalized pack's digest: a runner refuses a pack with another one
    agent: str
    sandbox: str
    read_budget: int
    suite: str
    task: str
    condition: str
    seed: int
    version: int = ORDER_VERSION
    # the run set's model settings (`ModelOrder.to_dict`), None when no model is called: every runner
    # of the run set runs the same configuration; the API key is never here (each runner's environment)
    model: dict | None = None

    @property
    def unit(self) -> RunUnit:
        return RunUnit(self.suite, self.task, self.condition, self.seed)

    @property
    def key(self) -> str:
        return f"{self.run_set}/{self.unit.unit_id}"

    def to_json(self) -> bytes:
        fields = asdict(self)
        if fields["model"] is None:  # an order without models is what runners before them read
            del fields["model"]
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "UnitOrder":
        try:
            raw = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise OrderError(f"unit order is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise OrderError("unit order is not a JSON object")
        if raw.get("version") != ORDER_VERSION:
            raise OrderError(f"unit order field 'version': {raw.get('version')!r}, expected {ORDER_VERSION}")
        fields: dict[str, Any] = {}
        for name, kind in (("run_set", str), ("pack", str), ("pack_digest", str), ("agent", str), ("sandbox", str),
                           ("read_budget", int), ("suite", str), ("task", str), ("condition", str), ("seed", int)):
            value = raw.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise OrderError(f"unit order field '{name}': expected {kind.__name__}, got {value!r}")
            fields[name] = value
        if raw.get("model") is not None:
            try:
                fields["model"] = ModelOrder.from_dict(raw["model"]).to_dict()
            except OrderError as exc:
                raise OrderError(f"unit order field 'model': {exc}") from None
        return cls(**fields)


@dataclass(frozen=True)
class ModelOrder:
    """The model settings of a run set's units, as its orders carry them (docs/gateway.md "Model
    agents on runners"): what `membench run`'s `--model-*` options and `--memory-model` said, with
    the price table's document itself rather than its path. The key is not among them: each runner
    reads its own from its environment."""

    base_urls: dict  # provider (or "*") -> API root
    record: bool = False
    replay: str | None = None  # a run set on the same bus whose recording answers the calls
    prices: dict | None = None  # the --model-prices document; None: the built-in table
    timeout_s: float = 600.0
    max_steps: int = 50
    max_tokens: int = 1_000_000
    memory_model: str | None = None
    preflight: bool = True
    max_request_bytes: int | None = None
    rpm: int | None = None
    tpm: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Any) -> "ModelOrder":
        if not isinstance(raw, dict):
            raise OrderError(f"expected an object, got {raw!r}")
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise OrderError(f"unknown field(s) {', '.join(sorted(unknown))}")
        kinds = {"base_urls": (dict,), "record": (bool,), "replay": (str, type(None)), "prices": (dict, type(None)),
                 "timeout_s": (int, float), "max_steps": (int,), "max_tokens": (int,),
                 "memory_model": (str, type(None)), "preflight": (bool,), "max_request_bytes": (int, type(None)),
                 "rpm": (int, type(None)), "tpm": (int, type(None))}
        for name, allowed in kinds.items():
            if name not in raw:
                continue
            value = raw[name]
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise OrderError(f"'{name}': expected {' or '.join(k.__name__ for k in allowed)}, got {value!r}")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.get("base_urls", {}).items()):
            raise OrderError(f"'base_urls': expected provider -> URL strings, got {raw.get('base_urls')!r}")
        if "base_urls" not in raw:
            raise OrderError("'base_urls' is missing")
        return cls(**raw)


@dataclass(frozen=True)
class Head:
    """Where an earlier attempt's run stands in the log: its last event."""

    run_id: str
    last_seq: int
    ended_status: str | None  # RunEnded's status, None while the run has no RunEnded


@dataclass(frozen=True)
class Decision:
    action: str  # "skip": the unit is done; "run": run `attempt` (after closing `close`, when set)
    attempt: int
    close: str | None = None  # the run id of an abandoned attempt to close first
    reason: str = ""
    finished_run: str | None = None  # "skip" of a unit whose run ended but was not marked: mark it


def decide(status: dict | None, head: Head | None) -> Decision:
    """What to do with a claimed unit, from its newest unit-status record and the log's head of the
    run that record names (read as the processors read it: `membench.bus.attempts.RunChain`).

    - completed or excluded: skip.
    - started (or abandoned) attempt n with run R: a runner took it and did not finish marking it. If
      R ended in the log with any status but `abandoned`, the unit is done (the runner died, or
      stalled, between its RunEnded and the status record): skip and mark it. If R has not ended
      (events without a RunEnded, or no event yet), close R — its runner may be stalled, not dead,
      and the close fences whatever it adds later — then run attempt n + 1. If R was closed already,
      run n + 1.
    - queued (attempt 0) or no record: run attempt 1 (or the recorded attempt + 1).
    """
    state = (status or {}).get("status")
    attempt = int((status or {}).get("attempt", 0) or 0)
    run_id = (status or {}).get("run_id") or ""
    if state in DONE_STATUSES:
        return Decision("skip", attempt, reason=f"already {state}")
    if state in ("started", "abandoned") and head is not None:
        if head.ended_status is not None and head.ended_status != "abandoned":
            return Decision("skip", attempt, reason=f"run {head.run_id} ended {head.ended_status}",
                            finished_run=head.run_id)
        if head.ended_status is None:
            return Decision("run", attempt + 1, close=head.run_id,
                            reason=f"attempt {attempt} (run {head.run_id}) was abandoned at seq {head.last_seq}")
    if state in ("started", "abandoned") and head is None and run_id:
        return Decision("run", attempt + 1, close=run_id,
                        reason=f"attempt {attempt} (run {run_id}) has no event in the log")
    return Decision("run", attempt + 1)
