"""Replay and audit (docs/design.md §9): read a run set's raw events from a log file, the warehouse's
raw table or a Kafka topic; verify every run's hash chain and seq continuity, each hash recomputed
with the schema the event was written with; check the scored diffs a PatchProduced carries inline
or by digest; check transfer runs' skill-bank digests against their seed's frozen banks; re-run
the processors; diff the re-derived events against what the warehouse recorded; recompute each
run set's log root and check it (and its signature) against the run set's log_root.json.

`replay` does it in this process; `replay_file_jobs` splits a log file's runs over worker processes
with the same result. Every problem is reported with the run and the seq it concerns, in one order
(run, seq, reason).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.run_heads import RunHeads
from processors import RunSetProcessor
from schemas.chain import ChainVerifier, sealed_as_written
from schemas.codec import DecodeError
from schemas.derived import WALL_CLOCK_FIELDS, DerivedEvent
from schemas.events import Event
from schemas.fields import is_plain_name
from schemas.log_root import HEX64
from schemas.registry import default_registry

# An event as a source read it, with the schema it was written with (its hash is recomputed with it)
# and, when the source kept them, the bytes it was written as: (event, schema[, datum]).
Logged = tuple

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
    """One run set of the replayed source: its runs and the log root over their heads (each run's
    head is the recomputed hash of its chain's last event, `schemas.chain.ChainVerifier`, the stored
    one on an intact run; so any edit of the log changes the root). The heads themselves are on
    disk, in the result's `RunHeads`."""

    run_set: str
    events: int = 0
    runs: int = 0  # set with the log root once the whole source was read
    log_root: str = ""
    abandoned: list[tuple[str, str, int]] = field(default_factory=list)  # (run_id, unit_id, seq of the closing event)
    # (run_id, seq, kind) of fenced events: published after their run had ended, or at a seq the run
    # already holds (a stalled runner's late events, docs/design.md §2); in the log, derive nothing
    fenced: list[tuple[str, int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"run_set": self.run_set, "runs": self.runs, "events": self.events, "log_root": self.log_root,
                "abandoned": [{"run_id": r, "unit_id": u, "seq": s} for r, u, s in self.abandoned],
                "fenced": [{"run_id": r, "seq": s, "kind": k} for r, s, k in self.fenced]}


@dataclass
class ReplayResult:
    events: int = 0
    runs: int = 0
    derived: int = 0
    compared: int = 0
    diffs_checked: int = 0
    findings: list[Finding] = field(default_factory=list)
    run_sets: dict[str, RunSetSummary] = field(default_factory=dict)
    heads: RunHeads | None = None  # every run's head, on disk (audit.run_heads)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def log_root(self) -> str | None:
        """The log root when the source holds exactly one run set."""
        return next(iter(self.run_sets.values())).log_root if len(self.run_sets) == 1 else None

    def close(self) -> None:
        """Removes the heads' file (what the run sets' roots were computed from)."""
        if self.heads is not None:
            self.heads.close()


# ------------------------------------------------------------------------------------------ sources


def owns(run_id: str, part: tuple[int, int] | None) -> bool:
    """Whether worker k of n (`part`) replays this run: by CRC-32 of the run id, stable across
    processes and machines (Python's `hash` of a string is salted per process)."""
    return part is None or zlib.crc32(run_id.encode()) % part[1] == part[0]


def events_from_file(path: Path, findings: list[Finding], part: tuple[int, int] | None = None) -> Iterator[Logged]:
    """(event, writer schema, datum) of an Avro container log (`audit.logscan`), the datum the
    exact bytes written. With `part` = (k, n) only the events of the runs worker k owns (`owns`),
    each with a fourth element, its position in the whole log; the others are walked over without
    being decoded.

    A block that does not decode (or whose sync marker is wrong) is a finding naming its byte offset
    and the last event of the block before it; nothing from it on is trusted. Blocks are decoded
    whole before their events are used, so every worker names the same last good event."""
    from audit.logscan import BlockError, LogFile, run_and_seq, run_of

    last: tuple[str, int | None] = ("?", None)
    position = 0  # events before this block, every worker's included: the run sets' order of appearance
    try:
        log = LogFile(path)
        schema = log.schema
        for offset, count, data in log.blocks():
            if part is None:
                decoded = log.decode_block(offset, count, data)
                for record, datum in decoded:
                    yield Event.from_record(record), schema, datum
                if decoded:
                    last = (decoded[-1][0]["run_id"], decoded[-1][0]["seq"])
                continue
            bounds = log.datum_bounds(offset, count, data)
            mine = []
            for index, (start, end) in enumerate(bounds):
                if owns(run_of(data, start), part):
                    try:
                        mine.append((log.decode_one(data, start), data[start:end], position + index))
                    except Exception as exc:  # the skipper walked it, fastavro does not read it
                        raise BlockError(offset, f"{type(exc).__name__}: {exc}") from None
            for record, datum, at in mine:
                yield Event.from_record(record), schema, datum, at
            position += len(bounds)
            if bounds:
                last = run_and_seq(data, bounds[-1][0])
    except BlockError as exc:
        reason = str(exc) if exc.offset == 0 else f"{path}: undecodable data near byte {exc.offset} ({exc})"
        findings.append(Finding(last[0], last[1], f"{reason} (after this event)" if last[1] is not None else reason))


def events_from_warehouse(warehouse: Any, run_set: str | None, findings: list[Finding]) -> Iterator[Logged]:
    """Raw rows of the warehouse, each decoded with the writer schema its `schema_fingerprint` names
    (not resolved to the newest: the hash covers the writer's datum). Read `RUNS_PER_QUERY` runs at
    a time (`warehouse.queries.raw_run_id_pages`, `raw_datums_of_runs`), so memory does not grow
    with the table."""
    from schemas.codec import datum_decoder
    from warehouse.queries import raw_datums_of_runs, raw_run_id_pages

    registry = default_registry()
    decoders: dict[str, Any] = {}
    for run_ids in raw_run_id_pages(warehouse, run_set, RUNS_PER_QUERY):
        for fingerprint_hex, datum in raw_datums_of_runs(warehouse, run_ids):
            writer = registry.by_fingerprint(bytes.fromhex(fingerprint_hex))
            if writer is None:
                findings.append(Finding("?", None, f"trajectory_events.schema_fingerprint {fingerprint_hex} names "
                                                   "no schema this membench ships"))
                continue
            decode = decoders.get(fingerprint_hex)
            if decode is None:
                decode = decoders[fingerprint_hex] = datum_decoder(writer)
            try:
                yield Event.from_record(decode(datum)), writer, datum
            except (DecodeError, Exception) as exc:
                findings.append(Finding("?", None, f"trajectory_events.datum does not decode with "
                                                   f"{writer.family}.v{writer.version}: {exc}"))


# runs whose raw rows one warehouse query reads (replay of `warehouse:`, rederive)
RUNS_PER_QUERY = 500


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
    """Compares re-derived events with the warehouse a batch of ended runs at a time. It is told of
    each run's chain once: events as they come (`add`, a run's first RunEnded ends it), or a
    worker's whole ended runs (`add_ended`); what is fenced never reaches it."""

    def __init__(self, warehouse: Any, result: ReplayResult, findings: list[Finding]):
        self.warehouse, self.result, self.findings = warehouse, result, findings
        self.by_run: dict[str, list[DerivedEvent]] = {}  # runs not compared yet: ended in this batch, or open
        self.ended: list[str] = []

    def add(self, event: Event, derived: list[DerivedEvent]) -> None:
        if derived:
            self.by_run.setdefault(event.run_id, []).extend(derived)
        if event.kind == "RunEnded":
            self.add_ended(event.run_id, [])

    def add_ended(self, run_id: str, derived: list[DerivedEvent]) -> None:
        """The (last) derived events of a run that has ended."""
        if derived:
            self.by_run.setdefault(run_id, []).extend(derived)
        self.ended.append(run_id)
        if len(self.ended) >= VERIFY_BATCH_RUNS:
            self.flush(self.ended)
            self.ended = []

    def add_open(self, run_id: str, derived: list[DerivedEvent]) -> None:
        """A run that never ended, with its derived events (none is a run to compare all the same:
        the warehouse may hold rows of it)."""
        self.by_run.setdefault(run_id, []).extend(derived)

    def finish(self, open_runs: Iterable[str] = ()) -> None:
        """Every run not compared yet: the last batch, and the runs that never ended."""
        self.flush(set(self.ended) | set(self.by_run) | set(open_runs))
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


class _Forwarder:
    """A `replay --jobs N` worker's stand-in for the comparer: the derived events of each ended run
    go to the parent (which owns the warehouse connection: a chDB path has one owner) in messages of
    `FORWARD_RUNS` runs; the open runs' at the end."""

    def __init__(self, send: Callable[[tuple], None]):
        self.send = send
        self.by_run: dict[str, list[DerivedEvent]] = {}
        self.ended: list[tuple[str, list[DerivedEvent]]] = []

    def add(self, event: Event, derived: list[DerivedEvent]) -> None:
        if derived:
            self.by_run.setdefault(event.run_id, []).extend(derived)
        if event.kind == "RunEnded":
            self.ended.append((event.run_id, self.by_run.pop(event.run_id, [])))
            if len(self.ended) >= FORWARD_RUNS:
                self.send(("ended", self.ended))
                self.ended = []

    def finish(self, open_runs: Iterable[str] = ()) -> None:
        if self.ended:
            self.send(("ended", self.ended))
        self.send(("open", [(run_id, self.by_run.pop(run_id, [])) for run_id in open_runs]))
        self.ended, self.by_run = [], {}


FORWARD_RUNS = 100


# ------------------------------------------------------------------------ transfer skill banks


@dataclass
class BankLedger:
    """What the skill-bank check needs from the log (issue 15): the digests each learning run froze
    (`SkillBankFrozen`) and the digest each transfer run says it used (`RunStarted`). Small (a few
    entries per run), so `replay --jobs N` workers send theirs to the parent, which checks them all:
    a learning run and the transfer runs of its seed may be replayed by different workers."""

    # (run_set, seed, bank, digest, run_id, seq) of every SkillBankFrozen
    frozen: list[tuple[str, int, str, str, str, int]] = field(default_factory=list)
    # (run_set, run_id, seq, seed, condition, skill_bank_digest) of every transfer run's RunStarted
    uses: list[tuple[str, str, int, int, str, str | None]] = field(default_factory=list)
    _seeds: dict[str, int] = field(default_factory=dict)  # learning run -> seed (from its RunStarted)

    def add(self, event: Event) -> None:
        if event.kind == "RunStarted" and event.payload.get("family") == "transfer":
            seed = event.payload.get("seed")
            if event.payload.get("task") == "learning":
                self._seeds[event.run_id] = seed
            else:
                self.uses.append((event.run_set, event.run_id, event.seq, seed, event.payload.get("condition"),
                                  event.payload.get("skill_bank_digest")))
        elif event.kind == "SkillBankFrozen":
            seed = self._seeds.get(event.run_id)
            if seed is not None:
                self.frozen.append((event.run_set, seed, event.payload.get("bank"), event.payload.get("digest"),
                                    event.run_id, event.seq))

    def extend(self, other: "BankLedger") -> None:
        self.frozen.extend(other.frozen)
        self.uses.extend(other.uses)

    def findings(self, banks_for: Callable[[str], Path | None] | None) -> list[Finding]:
        """A transfer run's `RunStarted.skill_bank_digest` must be a digest its seed's learning run
        froze for the condition's bank; a bank directory that is present (`banks_for(run_set)/
        s<seed>/<bank>`) must still verify against its MANIFEST.sha256, whose SHA-256 must be a
        frozen digest. A retried learning unit freezes again, so any of a seed's frozen digests
        counts."""
        from producers.memory_systems.skill_bank import MANIFEST, SkillBankError, verify_bank
        from producers.transfer.bank import CONDITION_BANKS

        digests: dict[tuple[str, int, str], set[str]] = {}
        where: dict[tuple[str, int, str], tuple[str, int]] = {}
        for run_set, seed, bank, digest, run_id, seq in self.frozen:
            key = (run_set, seed, bank)
            digests.setdefault(key, set()).add(digest)
            where[key] = max(where.get(key, (run_id, seq)), (run_id, seq))  # one deterministic event to name
        out = []
        for run_set, run_id, seq, seed, condition, digest in self.uses:
            bank = CONDITION_BANKS.get(condition)
            if bank is None:
                if digest is not None:
                    out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {digest} on condition "
                                                    f"{condition!r}, which uses no skill bank"))
                continue
            frozen = digests.get((run_set, seed, bank))
            if digest is None:
                continue  # no bank was frozen for its seed: the runner excluded the run (skill_bank_modified)
            if not frozen:
                out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {digest}: the log holds no "
                                                f"SkillBankFrozen of bank {bank!r} for seed {seed}"))
            elif digest not in frozen:
                out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {digest} is not the digest seed "
                                                f"{seed}'s learning run froze for bank {bank!r} "
                                                f"({', '.join(sorted(frozen))})"))
        for (run_set, seed, bank), frozen in sorted(digests.items()):
            root = banks_for(run_set) if banks_for is not None else None
            directory = root / f"s{seed}" / bank if root is not None else None
            if directory is None or not directory.is_dir():
                continue  # the banks are not beside this source: only the digests above are checked
            run_id, seq = where[(run_set, seed, bank)]
            manifest = directory / MANIFEST
            if not manifest.is_file():
                out.append(Finding(run_id, seq, f"skill bank {directory} has no {MANIFEST}"))
                continue
            actual = hashlib.sha256(manifest.read_bytes()).hexdigest()
            if actual not in frozen:
                out.append(Finding(run_id, seq, f"{manifest} hashes to {actual}, not the frozen digest of bank "
                                                f"{bank!r} ({', '.join(sorted(frozen))})"))
                continue
            try:
                verify_bank(directory)
            except SkillBankError as exc:
                out.append(Finding(run_id, seq, f"skill bank {bank!r} no longer matches its manifest: {exc}"))
        return out


# ------------------------------------------------------------------------------------------ the fold


@dataclass(frozen=True)
class SourceDirs:
    """Where a source's blob store and skill banks are: beside a log file (`file_dir`), else the run
    set's directory under `runs_dir`. Picklable, so `replay --jobs N` workers get it."""

    file_dir: Path | None = None
    runs_dir: Path | None = None

    def _root(self, run_set: str) -> Path | None:
        if self.file_dir is not None:
            return self.file_dir
        # a run-set id that is not a plain name never becomes a path
        return self.runs_dir / run_set if self.runs_dir is not None and is_plain_name(run_set) else None

    def blobs(self, run_set: str) -> Path | None:
        root = self._root(run_set)
        return root / "blobs" if root is not None else None

    def banks(self, run_set: str) -> Path | None:
        root = self._root(run_set)
        return root / "banks" if root is not None else None


def _finding_order(finding: Finding) -> tuple:
    return (finding.run_id, -1 if finding.seq is None else finding.seq, finding.reason)


# ended runs the replay's processor remembers (at least this many, at most twice: a window like the
# worker's, smaller, since replay's own rule is the heads on disk): a fenced event of a run it has
# forgotten is not shown to it
PROCESSOR_ENDED_WINDOW = 1024


class _Replayer:
    """Checks and folds a stream of (event, writer schema[, datum]); `comparer` gets every event and
    its derived events (a `_Comparer`, a worker's `_Forwarder`, or None).

    Memory holds the open runs only: a run's chain state, fold state and derived events go when its
    first RunEnded is read, its head to `heads` (on disk), which also tells a later event of an
    ended run from a new run's first."""

    def __init__(self, findings: list[Finding], comparer: Any, blobs_for: Callable[[str], Path | None] | None,
                 heads: RunHeads | None = None, file_log: bool = False):
        self.result = ReplayResult(findings=findings)
        # a log file is written by one process (the embedded bus): nothing in it may be fenced, and a
        # duplicated event (same run, seq and content) is named, not silently fenced as a Kafka
        # redelivery would be (issue 24). Its open runs' stored hashes by seq tell a duplicate.
        self.file_log = file_log
        self.held: dict[str, dict[int, str]] = {}  # open run -> seq -> stored hash of its chain's event
        self.findings = findings
        self.verifier = ChainVerifier()
        # the processors' own window of ended runs: past it, replay's rule (the heads on disk) fences
        self.processor = RunSetProcessor(PROCESSOR_ENDED_WINDOW)
        self.stores: dict[str, BlobStore] = {}
        self.comparer = comparer
        self.blobs_for = blobs_for
        self.banks = BankLedger()
        self.heads = self.result.heads = heads if heads is not None else RunHeads()
        self.first_seen: dict[str, int] = {}  # run set -> position of its first event (orders the run sets)
        # the fencing rule of the processors (and producers.attempts.RunChain): a run's chain is its
        # first event at each seq, up to its first RunEnded; what comes after is fenced
        self.last_seq: dict[str, int] = {}  # open run -> the seq of its chain's last event
        self.open_in: dict[str, str] = {}  # open run -> its run set (that of its first event)

    def feed_all(self, events: Iterable[Logged], positions: bool = False) -> None:
        result, findings, verifier, processor = self.result, self.findings, self.verifier, self.processor
        comparer, run_sets, heads = self.comparer, result.run_sets, self.heads
        last_seq, open_in = self.last_seq, self.open_in
        for item in events:
            event, schema = item[0], item[1]
            summary = run_sets.get(event.run_set)
            if summary is None:
                summary = run_sets[event.run_set] = RunSetSummary(event.run_set)
                self.first_seen[event.run_set] = item[3] if positions else result.events
            result.events += 1
            summary.events += 1
            run_id, kind = event.run_id, event.kind
            last = last_seq.get(run_id)
            if last is None:
                fenced = run_id in heads  # one lookup per run: at its first event (or a fenced one)
                if not fenced:
                    open_in[run_id] = event.run_set
            else:
                fenced = event.seq <= last
                if event.run_set != open_in[run_id]:
                    findings.append(Finding(run_id, event.seq, f"event of run set {event.run_set!r} in a run that "
                                                               f"started in run set {open_in[run_id]!r}"))
            if fenced:
                # not part of the run's chain; the processor ignores it by the same rule (while it
                # still remembers the run: `RunSetProcessor.is_new`)
                summary.fenced.append((run_id, event.seq, kind))
                if self.file_log:
                    findings.append(self._fenced_in_file(event, item[2] if len(item) > 2 else None, last))
                if not processor.is_new(run_id):
                    derived = processor.apply(event)
                    if derived:  # it filled a seq gap (the chain check names the gap), arriving late
                        result.derived += len(derived)
                        findings.append(Finding(run_id, event.seq, f"the processors derived {len(derived)} "
                                                                   f"events from a fenced {kind} (it arrived after "
                                                                   "a later event of its run, filling a gap in its "
                                                                   "seqs)"))
                continue
            last_seq[run_id] = event.seq
            if self.file_log:
                self.held.setdefault(run_id, {})[event.seq] = event.hash
            broken = verifier.check(event, schema, item[2] if len(item) > 2 else None)
            if broken:
                findings.append(Finding(broken.run_id, broken.seq, broken.reason))
            if kind == "RunEnded":
                del last_seq[run_id]
                self.held.pop(run_id, None)
                heads.add(open_in.pop(run_id), run_id, verifier.release(run_id))
                if event.payload.get("status") == "abandoned":
                    summary.abandoned.append((event.run_id, event.unit_id, event.seq))
            elif kind in ("PatchProduced", "ModelCall"):
                store = self.stores.get(event.run_set)
                if store is None:
                    store = self.stores[event.run_set] = BlobStore(self.blobs_for(event.run_set)
                                                                   if self.blobs_for else None)
                if kind == "PatchProduced":
                    result.diffs_checked += 1
                    findings.extend(diff_findings(event, store))
                else:
                    findings.extend(model_call_findings(event, store))
            elif kind in ("RunStarted", "SkillBankFrozen"):
                self.banks.add(event)
            derived = processor.apply(event)
            result.derived += len(derived)
            if comparer is not None:
                comparer.add(event, derived)

    def _fenced_in_file(self, event: Event, datum: bytes | None, last: int | None) -> Finding:
        """The finding for a fenced event of a log file. A duplicate is proven when the event's stored
        hash is the one the run's chain holds at its seq (an open run's, or an ended run's last event)
        AND that hash is the SHA-256 of the event's own prev_hash and content: the bytes are then those
        of the chain's event, whatever the writer claims."""
        if last is not None:  # open run, seq already held
            known = self.held.get(event.run_id, {}).get(event.seq)
        else:  # after the run's first RunEnded: its head is the recomputed hash of that RunEnded
            known = self.heads.head(event.run_id)
        if known is not None and event.hash == known and sealed_as_written(event.prev_hash, event.hash, datum):
            return Finding(event.run_id, event.seq, f"duplicated event: the log holds this {event.kind} "
                                                    "(same run, seq and content) twice")
        where = ("at a seq its run already holds, with other content" if last is not None
                 else "after its run's RunEnded")
        return Finding(event.run_id, event.seq, f"fenced {event.kind} {where}: a log file is written by one "
                                                "process and holds no fenced events")

    def finish(self) -> None:
        """Dead letters, open runs (their heads join the ended runs'), the comparison's last batch."""
        findings = self.findings
        for dead in self.processor.dead_letters:
            findings.append(Finding(dead.run_id, dead.seq, f"processor rejected the event: {dead.reason}"))
        seen = self.verifier.heads()
        for run_id in self.processor.open_runs():
            if run_id in seen:
                findings.append(Finding(run_id, seen[run_id][0] - 1,
                                        "run has no RunEnded event (incomplete or truncated run)"))
            else:  # its RunEnded was read, after a gap in its seqs (a chain break names the gap)
                findings.append(Finding(run_id, None, "the processors never applied this run's RunEnded: "
                                                      "they wait for missing events"))
        for run_id, head in self.verifier.computed_heads().items():
            self.heads.add(self.open_in[run_id], run_id, head)
        self.heads.flush()
        if self.comparer is not None:
            self.comparer.finish(list(self.last_seq))


def _settle(result: ReplayResult, banks: BankLedger, banks_for: Callable[[str], Path | None] | None) -> ReplayResult:
    """The parts of a result that need every run: the skill-bank check; then one order for the
    findings and the abandoned attempts (run, seq, reason), so the output does not depend on how
    runs interleave in the source or were split between workers. Each run set's run count and log
    root are read from the heads on disk, in run-id order."""
    result.findings.extend(banks.findings(banks_for))
    result.findings.sort(key=_finding_order)
    counts = result.heads.counts()
    result.runs = sum(counts.values())
    for summary in result.run_sets.values():
        summary.runs = counts.get(summary.run_set, 0)
        summary.log_root = result.heads.log_root(summary.run_set)
        summary.abandoned.sort(key=lambda a: (a[0], a[2]))
        summary.fenced.sort()
    return result


def replay(events: Iterable[Logged], findings: list[Finding], warehouse: Any | None = None,
           blobs_for: Callable[[str], Path | None] | None = None,
           banks_for: Callable[[str], Path | None] | None = None, file_log: bool = False) -> ReplayResult:
    """Checks and re-derives `events` ((event, writer schema[, datum]) tuples) in this process;
    `file_log`: they come from a log file (`events_from_file`), where a fenced event is a finding;
    `blobs_for(run_set)` names the run set's blob directory (None: unknown, so a digest-only diff is
    a finding), `banks_for(run_set)` its skill banks' (None: only the digests are checked).

    Streams: what memory holds is the open runs (chain, folds, derived events) and, with a
    warehouse, the derived events of up to `VERIFY_BATCH_RUNS` ended runs not compared yet; every
    ended run's head goes to disk (`audit.run_heads`), so memory does not grow with the log."""
    replayer = _Replayer(findings, None, blobs_for, file_log=file_log)
    if warehouse is not None:
        replayer.comparer = _Comparer(warehouse, replayer.result, findings)
    replayer.feed_all(events)
    replayer.finish()
    return _settle(replayer.result, replayer.banks, banks_for)


# -------------------------------------------------------------------------------- replay --jobs N


def _worker(path: str, k: int, jobs: int, dirs: SourceDirs, forward: bool, heads_path: str, queue: Any) -> None:
    """Worker k of `replay --jobs`: replays the runs it owns, their heads into its own file at
    `heads_path`; sends derived events (to compare) and at the end its partial result to the parent."""
    try:
        findings: list[Finding] = []
        source: list[Finding] = []  # the reader's own findings: every worker meets the same ones
        heads = RunHeads(Path(heads_path))
        replayer = _Replayer(findings, _Forwarder(lambda msg: queue.put((k,) + msg)) if forward else None,
                             dirs.blobs, heads, file_log=True)
        replayer.feed_all(events_from_file(Path(path), source, part=(k, jobs)), positions=True)
        replayer.finish()
        heads.close()  # written whole before the parent is told
        result = replayer.result
        queue.put((k, "done", {
            "events": result.events, "derived": result.derived,
            "diffs_checked": result.diffs_checked, "findings": findings, "source_findings": source,
            "run_sets": [(s, replayer.first_seen[s.run_set]) for s in result.run_sets.values()],
            "banks": replayer.banks}))
    except BaseException as exc:  # the parent reports it; a worker never dies silently
        import traceback

        queue.put((k, "error", "".join(traceback.format_exception(exc))))


class ReplayWorkerError(RuntimeError):
    pass


def replay_file_jobs(path: Path, jobs: int, findings: list[Finding], warehouse: Any | None = None,
                     dirs: SourceDirs | None = None) -> ReplayResult:
    """`replay` of a log file by `jobs` worker processes, each owning the runs whose CRC-32 falls to
    it (runs are independent: a chain, a fold and a diff check never cross runs). Every worker reads
    the whole file, walking over other workers' events without decoding them (`audit.logscan`);
    the parent compares the derived events the workers send with the warehouse, merges heads, run
    sets and findings, and checks the skill banks across runs. The result equals `replay`'s."""
    import multiprocessing

    dirs = dirs or SourceDirs(file_dir=Path(path).parent)
    result = ReplayResult(findings=findings, heads=RunHeads())
    # each worker's heads in a file beside the parent's store (its temporary directory, removed with it)
    heads_paths = [str(result.heads.path.parent / f"worker-{k}.sqlite") for k in range(jobs)]
    # spawn, not fork: the parent may hold a chDB engine and its threads
    context = multiprocessing.get_context("spawn")
    queue = context.Queue(maxsize=4 * jobs)
    workers = [context.Process(target=_worker, args=(str(path), k, jobs, dirs, warehouse is not None,
                                                     heads_paths[k], queue), daemon=True) for k in range(jobs)]
    for worker in workers:
        worker.start()
    comparer = _Comparer(warehouse, result, findings) if warehouse is not None else None
    banks = BankLedger()
    source: list[Finding] = []
    partials: dict[int, dict] = {}
    finished = False
    try:
        while len(partials) < jobs:
            try:
                k, kind, payload = queue.get(timeout=1.0)
            except Exception:  # queue.Empty: is everyone still alive?
                dead = [w for i, w in enumerate(workers) if i not in partials and w.exitcode not in (None, 0)]
                if dead:
                    raise ReplayWorkerError(f"replay worker exited with status {dead[0].exitcode}") from None
                continue
            if kind == "ended":
                for run_id, derived in payload:
                    comparer.add_ended(run_id, derived)
            elif kind == "open":
                for run_id, derived in payload:
                    comparer.add_open(run_id, derived)
            elif kind == "done":
                partials[k] = payload
            else:
                raise ReplayWorkerError(f"replay worker {k} failed:\n{payload}")
        finished = True
    finally:
        for worker in workers:
            worker.join(timeout=5)
            if worker.is_alive():
                worker.terminate()
        if not finished:
            result.close()  # the workers' files with it
    first: dict[str, int] = {}
    merged: dict[str, RunSetSummary] = {}
    for k in sorted(partials):
        part = partials[k]
        result.events += part["events"]
        result.derived += part["derived"]
        result.diffs_checked += part["diffs_checked"]
        findings.extend(part["findings"])
        for finding in part["source_findings"]:  # the reader's findings, met by every worker: once
            if finding not in source:
                source.append(finding)
        banks.extend(part["banks"])
        result.heads.absorb(Path(heads_paths[k]))
        Path(heads_paths[k]).unlink()
        for summary, seen in part["run_sets"]:
            first[summary.run_set] = min(seen, first.get(summary.run_set, seen))
            into = merged.setdefault(summary.run_set, RunSetSummary(summary.run_set))
            into.events += summary.events
            into.abandoned.extend(summary.abandoned)
            into.fenced.extend(summary.fenced)
    for run_set in sorted(merged, key=lambda name: first[name]):  # the order jobs 1 meets them in
        result.run_sets[run_set] = merged[run_set]
    findings.extend(source)
    if comparer is not None:
        comparer.finish()  # the open runs came with each worker's "open" message
    return _settle(result, banks, dirs.banks)


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
    from audit.log_root_record import LogRootError, describes, read_record, verify_signature

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
        theirs = record.heads()  # the file holds them all; ours stream from disk
        differ = []
        for run_id, head in result.heads.pairs(record.run_set):
            if theirs.pop(run_id, None) != head:
                differ.append(run_id)
        differ = sorted(differ + list(theirs))
        result.findings.append(Finding(differ[0] if differ else "?", None,
                                       f"{path}: field 'log_root' {record.log_root} differs from the root "
                                       f"recomputed from the log, {check.recomputed} ({len(differ)} runs differ)"))
    if public_key is not None:
        problem = verify_signature(record.signature, public_key, record.run_set, check.recomputed, str(path))
        check.signature = "verified" if problem is None else ("absent" if record.signature is None else "invalid")
        if problem:
            result.findings.append(Finding("?", None, problem))
    return check
