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

from membench.producers.grid import RunUnit

ORDER_VERSION = 1
DONE_STATUSES = ("completed", "excluded")  # a unit with this status is never run again


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
    run that record names (read as the processors read it: `membench.producers.attempts.RunChain`).

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


# -- claims: a compare-and-set on a unit's status, built from the status topic's own order --
#
# A runner's `started` record, and the `abandoned` record of a take-over, carry `claim` (a token
# unique to one runner's decision) and `base` (the offset of the status record that decision read,
# None when it read none). The unit-status topic keeps a key's records in one partition, totally
# ordered, so whether such a record counts is a fact of the log: it counts when no counted claiming
# record (`started`, `completed`, `excluded`) of another claim lies between its base and itself. Two
# runners that read the same record and decided the same attempt therefore cannot both win: the
# first `started` after the base does. `abandoned` is not a claim itself: two runners taking over one
# attempt both record it before their `started`, and only the `started` decides between them; but a
# stale take-over's `abandoned` (its runner stalled after reading) is ignored like a lost `started`.
# Records without `base` (a queued mark, `completed` — a fact read from the log — and `membench run
# --bus`'s marks) always count.
#
# A loser's `started` stays in the log and is ignored by every reader that folds the key (below). A
# restatement (`restates`: the offset of the record it repeats, `by`: the loser's claim) appends the
# counted record again after it, so the newest record of the key is true even for a reader that only
# keeps the newest (compaction keeps nothing else); it counts only while no newer record counts.

CLAIMING = ("started", *DONE_STATUSES)


@dataclass
class KeyStatus:
    """One unit's status folded from its unit-status records in offset order (pure: the runner's
    claim check, `runner --progress` and `decide`'s input all read a key through it)."""

    record: dict | None = None  # the newest record that counts
    offset: int | None = None  # its offset (a restatement: the offset it restates)
    claim_offset: int = -1  # the newest counted claiming record's offset (-1: none)
    claim_token: str | None = None  # and its claim
    newest: tuple[int, dict] | None = None  # the newest record in the log, counted or not

    def add(self, offset: int, record: dict) -> bool:
        """Fold one record; returns whether it counts."""
        self.newest = (offset, record)
        if "restates" in record:
            restates = int(record["restates"])
            if self.offset is not None and self.offset > restates:
                return False  # a newer record counts already: this repeat is stale
            self.record, self.offset = record, restates
            if record.get("status") in CLAIMING and self.claim_offset < restates:
                # the original was compacted away: the repeat stands for it
                self.claim_offset, self.claim_token = restates, record.get("claim")
            return True
        if "claim" in record and "base" in record:  # a runner's decision: `started`, or `abandoned` of a take-over
            base = -1 if record["base"] is None else int(record["base"])
            if self.claim_offset > base and self.claim_token != record["claim"]:
                return False  # another claim took the unit after the record this one decided on
        self.record, self.offset = record, offset
        if record.get("status") in CLAIMING:
            self.claim_offset, self.claim_token = offset, record.get("claim")
        return True

    @property
    def settled(self) -> bool:
        """Whether the newest record in the log is the one that counts (or repeats it)."""
        if self.newest is None:
            return True
        offset, record = self.newest
        return offset == self.offset or record.get("restates") == self.offset and self.offset is not None


def restatement(state: KeyStatus, by: str) -> dict:
    """The record a losing claim appends so that the key's newest record is the counted one again."""
    assert state.record is not None and state.offset is not None
    fields = {k: v for k, v in state.record.items() if k not in ("restates", "by")}
    return {**fields, "restates": state.offset, "by": by}


def fold_statuses(records) -> dict[str, KeyStatus]:
    """key -> KeyStatus from (key, offset, record) in each key's offset order."""
    out: dict[str, KeyStatus] = {}
    for key, offset, record in records:
        out.setdefault(key, KeyStatus()).add(offset, record)
    return out
