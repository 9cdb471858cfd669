"""The run set's content store on Kafka: the blobs a runner stored (recorded model calls' request and
response bodies, diffs over 64 KiB) go to the compacted blobs topic as they are referenced, so that
any runner — a `--model-replay` of a distributed run, a unit retried elsewhere — and any replay on
any machine finds them (`runs/<run set>/blobs/` stays each machine's local copy).

A blob is cut into chunks under the broker's default message size; key
`<run_set>/<sha256>/<index>/<count>`. A reader keeps a blob only when all its chunks are there and
the whole hashes to its name (a runner killed between two chunks leaves nothing usable, and the
attempt whose event named it is abandoned anyway)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from membench.bus.blobs import get_blob, put_blob
from membench.schemas.events import Event
from membench.formats.fields import is_plain_name
from membench.schemas.log_root import HEX64
from membench.bus.topics import Topics

CHUNK_BYTES = 512 << 10  # well under the brokers' default message.max.bytes (1 MB) with the key
# (inline text field, digest field) of PatchProduced: a diff without inline text is in the blob store
_DIFF_FIELDS = (("production_diff", "production_diff_sha256"), ("stripped_diff", "stripped_diff_sha256"))


def chunks(run_set: str, digest: str, data: bytes) -> Iterator[tuple[bytes, bytes]]:
    count = max(1, -(-len(data) // CHUNK_BYTES))
    for index in range(count):
        yield (f"{run_set}/{digest}/{index}/{count}".encode(), data[index * CHUNK_BYTES:(index + 1) * CHUNK_BYTES])


def referenced_blobs(event: Event) -> list[str]:
    """The digests of the blob store an event names: a recorded ModelCall's bodies, a PatchProduced
    diff kept by digest only."""
    p = event.payload
    if event.kind == "ModelCall" and p.get("recorded"):
        return [d for d in (p.get("request_digest"), p.get("response_digest")) if d]
    if event.kind == "PatchProduced":
        return [p[digest] for text, digest in _DIFF_FIELDS if p.get(text) is None and p.get(digest)]
    return []


def share_blobs(bus, blob_dir: Path | None, event: Event) -> None:
    """Publish the blobs EVENT names (read from this machine's store, where the gateway or the
    runner put them before the event) ahead of the event itself. A blob missing here is left out:
    `replay --verify` names it."""
    if blob_dir is None:
        return
    for digest in referenced_blobs(event):
        data = get_blob(blob_dir, digest)
        if data is not None:
            bus.publish_blob(digest, data)


def fetch_blobs(topics: Topics, run_set: str | None, blobs_dir_of, timeout: float = 60.0) -> int:
    """Copy the blobs of RUN_SET (None: of every run set) from the blobs topic into the local store
    `blobs_dir_of(run_set)` (a blob already there is kept); returns how many were written. Reads
    the topic to the end it has when called."""
    from membench.bus.kafka_read import open_reader, read_to_end

    prefix = f"{run_set}/".encode() if run_set is not None else b""
    parts: dict[tuple[str, str], dict[int, bytes]] = {}
    counts: dict[tuple[str, str], int] = {}
    consumer = open_reader(topics, "blobs")
    try:
        for msg, _ in read_to_end(consumer, topics.blobs, timeout=timeout,
                                  keep=lambda m: (m.key() or b"").startswith(prefix) and m.value() is not None):
            try:
                owner, digest, index, count = msg.key().decode().rsplit("/", 3)
                index, count = int(index), int(count)
            except ValueError:
                continue  # not a blob chunk this code wrote
            if not (is_plain_name(owner) and HEX64.match(digest) and 0 <= index < count):
                continue  # a key naming no run set directory or no digest never reaches the file system
            parts.setdefault((owner, digest), {})[index] = msg.value()
            counts[(owner, digest)] = count
    finally:
        consumer.close()
    written = 0
    for (owner, digest), found in parts.items():
        if len(found) != counts[(owner, digest)]:
            continue
        data = b"".join(found[i] for i in range(len(found)))
        if hashlib.sha256(data).hexdigest() != digest:
            continue
        target = Path(blobs_dir_of(owner))
        if get_blob(target, digest) is None:
            put_blob(target, data)
            written += 1
    return written
