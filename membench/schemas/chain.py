"""The SHA-256 hash chain over a run's events (docs/design.md §3, §9).

hash = sha256(prev_hash as 32 raw bytes || Avro binary datum of the event with `hash` = "").
`hash` is the last field of the envelope, so that datum is the final datum minus its hash string;
sealing therefore encodes an event once. The first event of a run has prev_hash = 64 zeros and
seq = 0; seq grows by one without gaps.

A hash is always recomputed with the schema the event was WRITTEN with (the `avro.schema` of a log
file's header, a warehouse row's `schema_fingerprint`, a Kafka message's fingerprint): the newest
schema may add fields, and re-encoding an old event with it would give other bytes, hence a
"broken" chain for every log written before a schema change.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from membench.schemas.codec import encode_datum
from membench.schemas.events import GENESIS_HASH, Event
from membench.schemas.registry import SchemaVersion

_HASH_PREFIX = b"\x80\x01"  # Avro length prefix of a 64-character string (zig-zag 64)


def seal_record(schema: SchemaVersion, record: dict) -> tuple[str, bytes]:
    """(hash, datum) of an event record whose `hash` is ""."""
    return seal_body(record["prev_hash"], encode_datum(schema, record))


def seal_body(prev_hash: str, body: bytes) -> tuple[str, bytes]:
    """(hash, datum) from the datum of an event whose `hash` is "" (it ends in 0x00, the empty
    string): the emitter's hot path, which encodes the body itself."""
    digest = hashlib.sha256(bytes.fromhex(prev_hash) + body).hexdigest()
    return digest, body[:-1] + _HASH_PREFIX + digest.encode("ascii")


def seal(schema: SchemaVersion, event: Event) -> tuple[Event, bytes]:
    """Return the event with its hash set, and its Avro binary datum."""
    digest, datum = seal_record(schema, dataclasses.replace(event, hash="").to_record())
    return dataclasses.replace(event, hash=digest), datum


def sealed_as_written(prev_hash: str, stored_hash: str, datum: bytes | None) -> bool:
    """Whether `datum` (an event's bytes as written) ends in `stored_hash` and that hash is
    sha256(prev_hash || the datum with hash = ""): then the bytes are exactly those the hash seals,
    so two events with this hash have the same content."""
    if datum is None or len(stored_hash) != 64 or datum[-66:] != _HASH_PREFIX + stored_hash.encode():
        return False
    try:
        prev = bytes.fromhex(prev_hash)
    except ValueError:
        return False
    return hashlib.sha256(prev + datum[:-66] + b"\x00").hexdigest() == stored_hash


def expected_hash(schema: SchemaVersion, event: Event) -> str:
    body = encode_datum(schema, dataclasses.replace(event, hash="").to_record())
    return hashlib.sha256(bytes.fromhex(event.prev_hash) + body).hexdigest()


@dataclass(frozen=True)
class ChainBreak:
    run_id: str
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"run {self.run_id} seq {self.seq}: {self.reason}"


class ChainVerifier:
    """Checks events of many runs as they stream by, in file or topic order.

    `schema` is the writer schema of events checked without one of their own; `check(event,
    schema)` takes the writer schema of that event (a source mixing schema versions passes each
    event's own).

    Besides checking the stored hashes it re-chains every run from the genesis hash: each event's
    recomputed hash is sha256(the previous event's RECOMPUTED hash || its datum with hash = "").
    For an intact run that is exactly the stored chain; after any edit, drop or reordering the
    recomputed head differs from every stored hash, even when the editor left the stored hash
    fields alone. `computed_heads()` is what a log root recomputed from the log is built from."""

    def __init__(self, schema: SchemaVersion | None = None):
        self._schema = schema
        self._next: dict[str, tuple[int, str]] = {}  # run_id -> (expected seq, expected prev_hash)
        self._computed: dict[str, str] = {}  # run_id -> recomputed hash of its last event
        self.breaks: list[ChainBreak] = []
        self.events = 0

    def check(self, event: Event, schema: SchemaVersion | None = None, datum: bytes | None = None) -> ChainBreak | None:
        """`datum`, when the source kept the event's bytes as written, is hashed as it is (its hash
        field emptied) instead of re-encoding the event: the same bytes for anything membench
        wrote, without the encode (replay's largest cost before)."""
        self.events += 1
        writer = schema or self._schema
        if writer is None:
            raise ValueError("ChainVerifier.check needs the event's writer schema (none given, no default)")
        want_seq, want_prev = self._next.get(event.run_id, (0, GENESIS_HASH))
        computed_prev = self._computed.get(event.run_id, GENESIS_HASH)
        problem, body = None, None
        if datum is not None and len(event.hash) == 64 and datum[-66:] == _HASH_PREFIX + event.hash.encode():
            body = datum[:-66] + b"\x00"  # the datum with hash = "" (the last field)
        else:
            try:
                body = encode_datum(writer, dataclasses.replace(event, hash="").to_record())
            except ValueError as exc:  # the event does not fit the schema it claims to be written with
                encode_problem = (f"the event does not encode with its writer schema "
                                  f"{writer.family}.v{writer.version} ({exc})")
        if body is None:  # nothing to hash: the recomputed chain takes a marker that no datum can equal
            computed = hashlib.sha256(bytes.fromhex(computed_prev) + b"\xff" + event.event_id.encode()).hexdigest()
        else:
            computed = hashlib.sha256(bytes.fromhex(computed_prev) + body).hexdigest()
        if event.seq != want_seq:
            problem = f"expected seq {want_seq}, found seq {event.seq} (missing or reordered events)"
        elif event.prev_hash != want_prev:
            problem = "prev_hash does not match the previous event's hash (an event was dropped or edited)"
        elif body is None:
            problem = encode_problem
        else:
            actual = computed if event.prev_hash == computed_prev else \
                hashlib.sha256(bytes.fromhex(event.prev_hash) + body).hexdigest()
            if actual != event.hash:
                problem = (f"hash does not match the event's contents under its writer schema "
                           f"{writer.family}.v{writer.version} (the event was edited)")
        self._next[event.run_id] = (event.seq + 1, event.hash)
        self._computed[event.run_id] = computed
        if problem:
            found = ChainBreak(event.run_id, event.seq, problem)
            self.breaks.append(found)
            return found
        return None

    def release(self, run_id: str) -> str:
        """Forgets a run whose chain is complete (replay: at its first RunEnded) and returns its
        recomputed head, so a long log's verifier holds only the open runs. A later event of the run
        would start a new chain at the genesis hash: the caller fences such events instead."""
        self._next.pop(run_id, None)
        return self._computed.pop(run_id)

    def heads(self) -> dict[str, tuple[int, str]]:
        """run_id -> (number of events seen, last hash)."""
        return {run: (seq, head) for run, (seq, head) in self._next.items()}

    def computed_heads(self) -> dict[str, str]:
        """run_id -> the recomputed hash of its last event (equal to the stored one on an intact run)."""
        return dict(self._computed)


def verify(schema: SchemaVersion, events: Iterable[Event]) -> Iterator[ChainBreak]:
    verifier = ChainVerifier(schema)
    for event in events:
        found = verifier.check(event)
        if found:
            yield found
