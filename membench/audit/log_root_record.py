"""`runs/<run_set>/log_root.json`: the run set's log root, written at the end of every `membench run`
or `score` of it, optionally signed (docs/design.md §9; the root itself: membench/schemas/log_root.py).

The file records what the warehouse held when the run set ended, so that later readers can tell
whether it still does:

- `log_root` — the root over every run's final chain hash; `runs` — those heads, one entry per
  run with its unit, status (null: never ended), last seq and last hash; `warehouse` — the DSN
  of the warehouse it describes (credentials removed): checks against another warehouse (say the
  one a Kafka sink filled for the same run set) skip the file and say so;
- `runs[].rows_sha256` — table → a digest of the run's rows in that table, for every table a
  report reads (membench.warehouse.queries.row_digests). The root proves the raw log; these prove the
  derived tables, which an `ALTER TABLE run_results UPDATE …` would change without touching any
  hash;
- `signature` (absent when unsigned) — Ed25519 over `membench.schemas.log_root.signed_message(run_set,
  root)`, with the signer's raw public key, so `replay --verify --pubkey PUB.pem` can check the
  root recomputed from the log against it.

`membench report` compares the warehouse with this file before it builds a report and refuses
when they disagree (`check_warehouse`); `membench run` does the same before it resumes a run set,
so a tampered warehouse is not laundered into a fresh log_root.json.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from membench.schemas.log_root import DEFINITION, HEX64, log_root, signed_message
from membench.warehouse import queries

LOG_ROOT_FILE = "log_root.json"
FORMAT_VERSION = 1


class LogRootError(ValueError):
    """A log_root.json, key or signature that cannot be used; the message names the file and field."""


@dataclass(frozen=True)
class RunHead:
    run_id: str
    unit_id: str
    status: str | None  # RunEnded's status (run_results); None for a run that never ended
    last_seq: int
    last_hash: str
    rows_sha256: dict[str, str]  # table -> digest of the run's rows there (membench.warehouse.queries.row_digests)


@dataclass(frozen=True)
class Signature:
    algorithm: str  # "ed25519"
    public_key: str  # the signer's raw 32-byte public key, hex
    key_id: str  # first 16 hex characters of SHA-256 of the raw public key
    message: str  # the signed message, membench.schemas.log_root.signed_message
    value: str  # the 64-byte signature, hex


@dataclass(frozen=True)
class LogRootRecord:
    run_set: str
    log_root: str
    runs: list[RunHead]
    signature: Signature | None = None
    warehouse: str | None = None  # the warehouse DSN it describes (no credentials); None in older files
    definition: str = DEFINITION
    version: int = FORMAT_VERSION

    def heads(self) -> dict[str, str]:
        return {run.run_id: run.last_hash for run in self.runs}

    def to_json(self) -> dict[str, Any]:
        out = {"version": self.version, "run_set": self.run_set, "warehouse": self.warehouse,
               "definition": self.definition, "log_root": self.log_root, "runs": [asdict(run) for run in self.runs]}
        if self.signature is not None:
            out["signature"] = asdict(self.signature)
        return out


@dataclass
class WarehouseState:
    """What the warehouse holds of a run set, in log_root.json's terms, and what does not add up
    inside it (derived rows that contradict the raw log)."""

    run_set: str
    runs: dict[str, RunHead]
    root: str
    problems: dict[str, list[str]] = field(default_factory=dict)  # run_id -> what contradicts its raw events

    def record(self, signature: Signature | None = None, warehouse: str | None = None) -> LogRootRecord:
        return LogRootRecord(self.run_set, self.root, [self.runs[r] for r in sorted(self.runs)], signature,
                             public_dsn(warehouse) if warehouse else None)


def public_dsn(dsn: str) -> str:
    """A warehouse DSN without credentials (user:password@), fit to be written into a file."""
    return re.sub(r"^([a-z]+://)[^/@]*@", r"\1", dsn)


def describes(record: LogRootRecord, warehouse_dsn: str) -> bool:
    """Whether `record` was written for this warehouse (a file that names none is taken to)."""
    return record.warehouse is None or record.warehouse == public_dsn(warehouse_dsn)


def warehouse_state(warehouse: Any, run_set: str) -> WarehouseState:
    """The run set's heads, log root and row digests as the warehouse holds them; `problems` lists
    every run whose summary row contradicts its raw events (a different last hash, a summary
    without events or an ended run without a summary, seqs missing)."""
    raw = {row["run_id"]: row for row in queries.raw_heads(warehouse, run_set)}
    summaries = {row["run_id"]: row for row in queries.run_results_by_status(warehouse, run_set)}
    digests = queries.row_digests(warehouse, run_set)
    problems: dict[str, list[str]] = {}
    runs: dict[str, RunHead] = {}
    for run_id in sorted(set(raw) | set(summaries) | set(digests)):
        have, summary, tables = raw.get(run_id), summaries.get(run_id), digests.get(run_id, {})
        note = problems.setdefault(run_id, []).append
        if have is None:
            note(f"run {run_id}: {', '.join(sorted(tables))} hold rows of it but trajectory_events holds no "
                 "event of it")
            if summary is None:
                continue
        elif summary is None and have["ended"]:
            note(f"run {run_id}: trajectory_events holds its RunEnded (seq {have['last_seq']}) but run_results "
                 "has no row for it")
        elif summary is not None and summary["last_hash"] != have["last_hash"] and \
                summary["last_hash"] not in (have.get("ended_hashes") or ()):
            # a fenced run's summary is its first RunEnded, not its last raw event
            note(f"run {run_id}: run_results.last_hash differs from the hash of its last raw event "
                 f"(seq {have['last_seq']}) and of every RunEnded it holds")
        if have is not None and int(have["events"]) != int(have["last_seq"]) + 1:
            note(f"run {run_id}: trajectory_events holds {have['events']} distinct seqs up to seq "
                 f"{have['last_seq']} (events are missing)")
        head = summary or have  # the summary's where the run has one; neither is None here
        assert head is not None
        runs[run_id] = RunHead(
            run_id=run_id, unit_id=(have or head)["unit_id"],
            status=summary["status"] if summary else None,
            last_seq=int(head["source_seq"] if summary else head["last_seq"]),
            last_hash=head["last_hash"],
            rows_sha256=dict(sorted(tables.items())))
    root = log_root({run_id: head.last_hash for run_id, head in runs.items()})
    return WarehouseState(run_set, runs, root, {run_id: lines for run_id, lines in problems.items() if lines})


def check_warehouse(state: WarehouseState, recorded: LogRootRecord | None, new_runs_allowed: bool = False) -> list[str]:
    """Every way the warehouse disagrees with itself and with the recorded file, one line each,
    naming the run or table. `new_runs_allowed` (a run set about to resume) accepts runs the file
    does not know, but never a recorded run that changed or vanished."""
    was = {run.run_id: run for run in recorded.runs} if recorded is not None else {}
    checked = was if new_runs_allowed else state.problems  # a resuming run set repairs its new runs itself
    problems = [line for run_id in sorted(state.problems) if run_id in checked for line in state.problems[run_id]]
    if recorded is None:
        return problems
    if recorded.run_set != state.run_set:
        return problems + [f"log_root.json is for run set '{recorded.run_set}', not '{state.run_set}'"]
    for run_id, before in sorted(was.items()):
        now = state.runs.get(run_id)
        if now is None:
            problems.append(f"run {run_id}: recorded in log_root.json but absent from the warehouse")
        elif now.last_hash != before.last_hash:
            problems.append(f"run {run_id}: last hash {now.last_hash[:12]}… differs from the recorded "
                            f"{before.last_hash[:12]}…")
        elif now.rows_sha256 != before.rows_sha256:
            tables = sorted(t for t in set(now.rows_sha256) | set(before.rows_sha256)
                            if now.rows_sha256.get(t) != before.rows_sha256.get(t))
            problems.append(f"run {run_id}: its rows in {', '.join(tables)} differ from those recorded at the "
                            "end of the run set")
    new = sorted(set(state.runs) - set(was))
    if new and not new_runs_allowed:
        problems.append(f"{len(new)} runs in the warehouse are not in log_root.json (first: run {new[0]})")
    if not new_runs_allowed and state.root != recorded.log_root and not problems:
        problems.append(f"log root {state.root} differs from the recorded {recorded.log_root}")
    return problems


# ------------------------------------------------------------------------------------------ the file


def record_path(runs_dir: Path, run_set: str) -> Path:
    return Path(runs_dir) / run_set / LOG_ROOT_FILE


def write_record(path: Path, record: LogRootRecord) -> None:
    """Written whole to a temporary name, then renamed: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _field(doc: dict[str, Any], name: str, kind: type, path: Path, where: str = "") -> Any:
    value = doc.get(name)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise LogRootError(f"{path}: field '{where}{name}' is missing or not a {kind.__name__}")
    return value


def read_record(path: Path) -> LogRootRecord:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LogRootError(f"{path}: not a readable log_root.json ({exc})") from None
    if not isinstance(doc, dict):
        raise LogRootError(f"{path}: not a JSON object")
    root = _field(doc, "log_root", str, path)
    if not HEX64.match(root):
        raise LogRootError(f"{path}: field 'log_root' is not 64 lowercase hex characters")
    runs = []
    for i, run in enumerate(_field(doc, "runs", list, path)):
        at = f"runs[{i}]."
        if not isinstance(run, dict):
            raise LogRootError(f"{path}: field 'runs[{i}]' is not an object")
        status = run.get("status")
        runs.append(RunHead(_field(run, "run_id", str, path, at), _field(run, "unit_id", str, path, at),
                            status if isinstance(status, str) else None, _field(run, "last_seq", int, path, at),
                            _field(run, "last_hash", str, path, at), _field(run, "rows_sha256", dict, path, at)))
    signature = None
    if doc.get("signature") is not None:
        sig = _field(doc, "signature", dict, path)
        signature = Signature(*(_field(sig, name, str, path, "signature.")
                                for name in ("algorithm", "public_key", "key_id", "message", "value")))
    warehouse = doc.get("warehouse")
    return LogRootRecord(_field(doc, "run_set", str, path), root, runs, signature,
                         warehouse if isinstance(warehouse, str) else None,
                         doc.get("definition", DEFINITION), _field(doc, "version", int, path))


# -------------------------------------------------------------------------------------------- signing


def load_signing_key(path: Path):
    """An Ed25519 private key from an unencrypted PEM file (`openssl genpkey -algorithm ed25519`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise LogRootError(f"{path}: not an unencrypted PEM private key ({str(exc).splitlines()[0]})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise LogRootError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 private key")
    return key


def load_public_key(path: Path):
    """An Ed25519 public key from a PEM file (`openssl pkey -in KEY.pem -pubout`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise LogRootError(f"{path}: not a PEM public key ({str(exc).splitlines()[0]})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise LogRootError(f"{path}: a {type(key).__name__.lstrip('_')}, not an Ed25519 public key")
    return key


def _raw_public(public_key) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key) -> str:
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def sign(private_key, run_set: str, root: str) -> Signature:
    message = signed_message(run_set, root)
    public = private_key.public_key()
    return Signature("ed25519", _raw_public(public).hex(), key_id(public), message.decode("utf-8"),
                     private_key.sign(message).hex())


def verify_signature(signature: Signature | None, public_key, run_set: str, root: str, where: str) -> str | None:
    """None when `signature` is a valid Ed25519 signature by `public_key` over the message for
    (run_set, root) — the root recomputed from the log, not the one the file states; else why not."""
    from cryptography.exceptions import InvalidSignature

    if signature is None:
        return f"{where}: the log root is not signed (no field 'signature')"
    if signature.algorithm != "ed25519":
        return f"{where}: field 'signature.algorithm' is '{signature.algorithm}', expected 'ed25519'"
    try:
        value = bytes.fromhex(signature.value)
    except ValueError:
        return f"{where}: field 'signature.value' is not hex"
    try:
        public_key.verify(value, signed_message(run_set, root))
    except InvalidSignature:
        return (f"{where}: the signature (key id {signature.key_id}) does not verify with the given public key "
                f"(key id {key_id(public_key)}) over the root recomputed from the log, {root}")
    return None
