"""Replay and audit (docs/design.md §9): read a run set's raw events from a log file, the warehouse's
raw table or a Kafka topic; verify every run's hash chain and seq continuity, each hash recomputed
with the schema the event was written with; check the scored diffs a PatchProduced carries inline
or by digest; re-run the processors; diff the re-derived events against what the warehouse
recorded; recompute each run set's log root and check it (and its signature) against the
run set's log_root.json.

Every problem is reported with the run and the seq it concerns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from processors import RunSetProcessor
from producers.attempts import LogError, read_log
from schemas.chain import ChainVerifier
from schemas.codec import DecodeError, decode_datum
from schemas.derived import WALL_CLOCK_FIELDS, DerivedEvent
from schemas.events import Event
from schemas.log_root import HEX64, log_root
from schemas.registry import SchemaVersion, default_registry

# An event as a source read it, with the schema it was written with (its hash is recomputed with it).
Logged = tuple[Event, SchemaVersion]

# (inline text field, digest field) of PatchProduced (event v3): a diff is inline up to 64 KiB,
# else only its digest is set and the text is in the run set's blob store, blobs/<sha256>
DIFF_FIELDS = (("production_diff", "production_diff_sha256"), ("stripped_diff", "stripped_diff_sha256"))


@dataclass(frozen=True)
class Finding:
    run_id: str
    seq: int | None
    reason: str

    def __str__(self) -> str:
        where = f"run {self.run_id}" + (f" seq {self.seq}" if self.seq is not None else "")
        return f"{where}: {self.reason}"


@dataclass
class RunSetSummary:
    """One run set of the replayed source: its runs' heads and the log root over them."""

    run_set: str
    events: int = 0
    # run_id -> its head: the recomputed hash of its last event (schemas.chain.ChainVerifier), the
    # stored one on an intact run; so any edit of the log changes the root
    heads: dict[str, str] = field(default_factory=dict)
    abandoned: list[tuple[str, str, int]] = field(default_factory=list)  # (run_id, unit_id, seq of the closing event)

    @property
    def runs(self) -> int:
        return len(self.heads)

    @property
    def log_root(self) -> str:
        return log_root(self.heads)

    def to_json(self) -> dict[str, Any]:
        return {"run_set": self.run_set, "runs": self.runs, "events": self.events, "log_root": self.log_root,
                "abandoned": [{"run_id": r, "unit_id": u, "seq": s} for r, u, s in self.abandoned]}


@dataclass
class ReplayResult:
    events: int = 0
    runs: int = 0
    derived: int = 0
    compared: int = 0
    diffs_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    run_sets: dict[str, RunSetSummary] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def log_root(self) -> str | None:
        """The log root when the source holds exactly one run set."""
        return next(iter(self.run_sets.values())).log_root if len(self.run_sets) == 1 else None


# ------------------------------------------------------------------------------------------ sources


def events_from_file(path: Path, findings: list[Finding]) -> Iterator[Logged]:
    """Events of an Avro object container file, with the writer schema of its header (read by
    `producers.attempts.read_log`, the one log reader). A block that no longer decodes is reported
    with the byte offset and the last good run/seq before it; nothing after it is trusted."""
    last: tuple[str, int | None] = ("?", None)
    try:
        for event, schema in read_log(path):
            last = (event.run_id, event.seq)
            yield event, schema
    except LogError as exc:
        findings.append(Finding(last[0], last[1], f"{exc} (after this event)" if last[1] is not None else str(exc)))


def events_from_warehouse(warehouse: Any, run_set: str | None, findings: list[Finding]) -> Iterator[Logged]:
    """Raw rows of the warehouse, each decoded with the writer schema its `schema_fingerprint` names
    (not resolved to the newest: the hash covers the writer's datum)."""
    from warehouse.queries import raw_datums

    registry = default_registry()
    for fingerprint_hex, datum in raw_datums(warehouse, run_set):
        writer = registry.by_fingerprint(bytes.fromhex(fingerprint_hex))
        if writer is None:
            findings.append(Finding("?", None, f"trajectory_events.schema_fingerprint {fingerprint_hex} names no "
                                               "schema this membench ships"))
            continue
        try:
            yield Event.from_record(decode_datum(writer, datum)), writer
        except (DecodeError, Exception) as exc:
            findings.append(Finding("?", None, f"trajectory_events.datum does not decode with "
                                               f"{writer.family}.v{writer.version}: {exc}"))


# ------------------------------------------------------------------------------------ scored diffs


class BlobStore:
    """The content-addressed store of one run set (`runs/<run_set>/blobs/<sha256>`); each blob is
    hashed once however many events name it."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self._checked: dict[str, str | None] = {}

    def problem(self, digest: str) -> str | None:
        """None when blobs/<digest> exists and hashes to digest; else what is wrong."""
        if digest not in self._checked:
            self._checked[digest] = self._check(digest)
        return self._checked[digest]

    def _check(self, digest: str) -> str | None:
        if self.directory is None:
            return "no blob store is known for this source"
        path = self.directory / digest
        if not path.is_file():
            return f"blob {path} is missing"
        sha = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        if sha.hexdigest() != digest:
            return f"blob {path} has SHA-256 {sha.hexdigest()}, not its name"
        return None


def diff_findings(event: Event, blobs: BlobStore) -> list[Finding]:
    """A PatchProduced's diffs against their digests: an inline text must hash to its digest, a
    digest without inline text must name a blob that hashes to it. Null fields (logs written
    before event v3, or a patch without that part) are not findings."""
    if event.kind != "PatchProduced":
        return []
    out = []
    for text_field, digest_field in DIFF_FIELDS:
        text, digest = event.payload.get(text_field), event.payload.get(digest_field)
        if text is None and digest is None:
            continue
        if digest is None:
            out.append(Finding(event.run_id, event.seq, f"PatchProduced.{text_field} is inline but "
                                                        f"{digest_field} is null"))
        elif not HEX64.match(digest):  # never a path: a digest like "../x" must not reach the file system
            out.append(Finding(event.run_id, event.seq, f"PatchProduced.{digest_field} {digest[:80]!r} is not "
                                                        "64 lowercase hex characters"))
        elif text is not None:
            actual = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if actual != digest:
                out.append(Finding(event.run_id, event.seq, f"PatchProduced.{digest_field} {digest} is not the "
                                                            f"SHA-256 of the inline {text_field} ({actual})"))
        else:
            problem = blobs.problem(digest)
            if problem:
                out.append(Finding(event.run_id, event.seq, f"PatchProduced.{text_field} is stored by digest "
                                                            f"{digest_field} only, and {problem}"))
    return out


def model_call_findings(event: Event, blobs: BlobStore) -> list[Finding]:
    """A recorded ModelCall's request and response bodies must be in the blob store under their
    digests (they are what `--model-replay` answers from, and what an auditor reads)."""
    if event.kind != "ModelCall" or not event.payload.get("recorded"):
        return []
    out = []
    for name in ("request_digest", "response_digest"):
        digest = event.payload.get(name)
        if digest is None or not HEX64.match(digest):
            out.append(Finding(event.run_id, event.seq, f"ModelCall.{name} {str(digest)[:80]!r} is not "
                                                        "64 lowercase hex characters"))
            continue
        problem = blobs.problem(digest)
        if problem:
            out.append(Finding(event.run_id, event.seq, f"ModelCall {event.payload.get('call_id')} is recorded "
                                                        f"but its {name.split('_')[0]} body: {problem}"))
    return out


# ------------------------------------------------------------------------------------------- replay


def _normalize(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    return value


def recorded_derived(warehouse: Any, run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """derived_id -> {kind, run_id, source_seq, payload} as the warehouse holds them."""
    from warehouse.tables import derived_columns, table_for_kind

    out: dict[str, dict[str, Any]] = {}
    if not run_ids:
        return out
    for kind, columns in derived_columns().items():
        rows = warehouse.query_dicts(
            f"SELECT * FROM {table_for_kind(kind)} WHERE run_id IN {{ids:Array(String)}} LIMIT 1 BY derived_id",
            {"ids": sorted(run_ids)},
        )
        for row in rows:
            payload = {name: row[name] for name, _ in columns[2:]}
            out[row["derived_id"]] = {"kind": kind, "run_id": row["run_id"], "source_seq": row["source_seq"],
                                      "payload": _normalize(payload)}
    return out


# Runs whose derived events are compared with the warehouse in one query: memory stays bounded by
# this many runs' derived events (and the open runs'), whatever the size of the log.
VERIFY_BATCH_RUNS = 500


class _Comparer:
    """Compares re-derived events with the warehouse a batch of ended runs at a time."""

    def __init__(self, warehouse: Any, result: ReplayResult, findings: list[Finding]):
        self.warehouse, self.result, self.findings = warehouse, result, findings
        self.by_run: dict[str, list[DerivedEvent]] = {}
        self.ended: list[str] = []
        self.done: set[str] = set()  # runs compared or waiting in `ended` (one id per run, like the heads)

    def add(self, event: Event, derived: list[DerivedEvent]) -> None:
        if derived:
            self.by_run.setdefault(event.run_id, []).extend(derived)
        if event.kind == "RunEnded" and event.run_id not in self.done:
            self.done.add(event.run_id)
            self.ended.append(event.run_id)
            if len(self.ended) >= VERIFY_BATCH_RUNS:
                self.flush(self.ended)
                self.ended = []

    def finish(self, all_runs: set[str]) -> None:
        """Every run not compared yet: the last batch, and the runs that never ended."""
        self.flush(set(self.ended) | (all_runs - self.done))
        self.ended = []

    def flush(self, run_ids) -> None:
        run_ids = set(run_ids)
        if not run_ids:
            return
        recorded = recorded_derived(self.warehouse, run_ids)
        for run_id in run_ids:
            for item in self.by_run.pop(run_id, ()):
                self._compare(item, recorded.pop(item.derived_id, None))
        for derived_id, want in recorded.items():
            self.findings.append(Finding(want["run_id"], want["source_seq"],
                                         f"{want['kind']} in the warehouse was not re-derived from the log "
                                         "(events missing from the log)"))

    def _compare(self, item: DerivedEvent, want: dict[str, Any] | None) -> None:
        self.result.compared += 1
        if want is None:
            self.findings.append(Finding(item.run_id, item.source_seq, f"{item.kind} derived on replay is missing "
                                                                       "from the warehouse"))
            return
        got = {k: v for k, v in _normalize(item.payload).items() if k not in WALL_CLOCK_FIELDS}
        have = {k: v for k, v in want["payload"].items() if k not in WALL_CLOCK_FIELDS}
        if got != have:
            diff = sorted(k for k in set(got) | set(have) if got.get(k) != have.get(k))
            self.findings.append(Finding(item.run_id, item.source_seq,
                                         f"{item.kind} differs from the warehouse in {', '.join(diff)}"))


def replay(events: Iterator[Logged], findings: list[Finding], warehouse: Any | None = None,
           blobs_for: Callable[[str], Path | None] | None = None) -> ReplayResult:
    """Checks and re-derives `events` ((event, writer schema) pairs); `blobs_for(run_set)` names the
    run set's blob directory (None: unknown, so a digest-only diff is a finding).

    Streams: re-derived events are kept only until their run has ended and its batch of
    `VERIFY_BATCH_RUNS` runs was compared with the warehouse (without a warehouse, not at all);
    what grows with the log is one head per run (the log root needs them)."""
    result = ReplayResult(findings=findings)
    verifier = ChainVerifier()
    processor = RunSetProcessor(ended_window=None)  # an audit remembers every run (as the heads do)
    stores: dict[str, BlobStore] = {}
    comparer = _Comparer(warehouse, result, findings) if warehouse is not None else None
    for event, schema in events:
        result.events += 1
        broken = verifier.check(event, schema)
        if broken:
            findings.append(Finding(broken.run_id, broken.seq, broken.reason))
        summary = result.run_sets.get(event.run_set)
        if summary is None:
            summary = result.run_sets[event.run_set] = RunSetSummary(event.run_set)
        summary.events += 1
        summary.heads[event.run_id] = event.hash
        if event.kind == "RunEnded" and event.payload.get("status") == "abandoned":
            summary.abandoned.append((event.run_id, event.unit_id, event.seq))
        if event.kind in ("PatchProduced", "ModelCall"):
            store = stores.get(event.run_set)
            if store is None:
                store = stores[event.run_set] = BlobStore(blobs_for(event.run_set) if blobs_for else None)
            if event.kind == "PatchProduced":
                result.diffs_checked += 1
                findings.extend(diff_findings(event, store))
            else:
                findings.extend(model_call_findings(event, store))
        derived = processor.apply(event)
        result.derived += len(derived)
        if comparer is not None:
            comparer.add(event, derived)
    for dead in processor.dead_letters:
        findings.append(Finding(dead.run_id, dead.seq, f"processor rejected the event: {dead.reason}"))
    heads = verifier.heads()
    computed = verifier.computed_heads()
    for summary in result.run_sets.values():
        summary.heads = {run_id: computed[run_id] for run_id in summary.heads}
    result.runs = len(heads)
    for run_id in processor.open_runs():
        seen, _ = heads[run_id]
        findings.append(Finding(run_id, seen - 1, "run has no RunEnded event (incomplete or truncated run)"))
    if comparer is not None:
        comparer.finish(set(heads))
    return result


# ------------------------------------------------------------------------------- the recorded root


@dataclass
class RootCheck:
    """The outcome of checking a log_root.json against the replayed log."""

    path: Path
    run_set: str | None = None
    recorded: str | None = None
    recomputed: str | None = None
    signature: str = "not checked"  # "verified", "not checked", "absent", "invalid"

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "run_set": self.run_set, "recorded": self.recorded,
                "recomputed": self.recomputed,
                "matches": self.recorded is not None and self.recorded == self.recomputed,
                "signature": self.signature}


def check_log_root(result: ReplayResult, path: Path, public_key=None, required: bool = False,
                   warehouse_dsn: str | None = None) -> RootCheck | None:
    """Compares the root recorded in `path` (a log_root.json) with the one recomputed from the log,
    and with `public_key` verifies the signature over the recomputed root. Every disagreement
    becomes a finding. A missing file is a finding only when `required` (a --pubkey was given);
    with `warehouse_dsn`, a file written for another warehouse is skipped (a finding if required)."""
    from membench.log_root import LogRootError, describes, read_record, verify_signature

    check = RootCheck(path)
    if not path.is_file():
        if required:
            result.findings.append(Finding("?", None, f"{path}: no log_root.json to verify the log root against"))
            return check
        return None
    try:
        record = read_record(path)
    except LogRootError as exc:
        result.findings.append(Finding("?", None, str(exc)))
        return check
    if warehouse_dsn is not None and not describes(record, warehouse_dsn):
        if required:
            result.findings.append(Finding("?", None, f"{path}: field 'warehouse' names {record.warehouse}, not the "
                                                      "warehouse replayed; pass --log-root to check it anyway"))
            return check
        return None
    check.run_set, check.recorded = record.run_set, record.log_root
    summary = result.run_sets.get(record.run_set)
    if summary is None:
        result.findings.append(Finding("?", None, f"{path}: field 'run_set' names run set '{record.run_set}', "
                                                  "which the log does not hold"))
        return check
    check.recomputed = summary.log_root
    if record.log_root != check.recomputed:
        ours, theirs = summary.heads, record.heads()
        differ = sorted(r for r in set(ours) | set(theirs) if ours.get(r) != theirs.get(r))
        result.findings.append(Finding(differ[0] if differ else "?", None,
                                       f"{path}: field 'log_root' {record.log_root} differs from the root "
                                       f"recomputed from the log, {check.recomputed} ({len(differ)} runs differ)"))
    if public_key is not None:
        problem = verify_signature(record.signature, public_key, record.run_set, check.recomputed, str(path))
        check.signature = "verified" if problem is None else ("absent" if record.signature is None else "invalid")
        if problem:
            result.findings.append(Finding("?", None, problem))
    return check
