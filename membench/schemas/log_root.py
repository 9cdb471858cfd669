"""The log root (docs/design.md §9): one SHA-256 digest that commits to a whole run set's log.

    log_root = SHA-256( the lines "<run_id> <last_hash>\\n" of every run of the run set,
                        sorted by run_id, concatenated, UTF-8 )

as 64 lowercase hex characters. `last_hash` is the `hash` of the run's last event in its chain
(its `RunEnded` for a closed run, the last event there is for a run that never ended), so the
root commits to every event of every run through the per-run hash chains (§3). Every run counts:
completed, excluded, errored, abandoned (closed by a later attempt, `membench/bus/attempts.py`) and
still open. One space separates the two fields, every line ends in "\\n"; run ids are UUIDs, so
sorting the ids and sorting the lines agree. The same root can be recomputed in a shell from the
heads: `printf '%s %s\\n' RUN_ID HASH ... | LC_ALL=C sort | sha256sum`.

A signature (Ed25519, optional) signs `signed_message(run_set, root)`, which names the run set so
a signature cannot be moved to another run set's root.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

HEX64 = re.compile(r"^[0-9a-f]{64}$")
DEFINITION = "sha256 over the sorted lines '<run_id> <last_hash>\\n' of every run of the run set"


def _line(run_id: str, last_hash: str) -> str:
    if not run_id or any(c.isspace() for c in run_id):
        raise ValueError(f"run id {run_id!r} is empty or holds whitespace; it cannot be a log-root line")
    if not HEX64.match(last_hash):
        raise ValueError(f"run {run_id}: last hash {last_hash!r} is not 64 lowercase hex characters")
    return f"{run_id} {last_hash}\n"


def root_lines(heads: Mapping[str, str]) -> bytes:
    """The exact bytes the root hashes: one "<run_id> <last_hash>\\n" line per run, sorted."""
    lines = {run_id: _line(run_id, last_hash) for run_id, last_hash in heads.items()}
    return "".join(lines[run_id] for run_id in sorted(lines)).encode("utf-8")


def log_root(heads: Mapping[str, str]) -> str:
    """The root over run_id -> last hash of every run of one run set."""
    return hashlib.sha256(root_lines(heads)).hexdigest()


def log_root_of_sorted(pairs: Iterable[tuple[str, str]]) -> str:
    """The same root over (run_id, last_hash) pairs that arrive already sorted by run_id (a head
    store read in key order), hashed as they stream by; pairs out of order or repeated are refused,
    since they would hash to another root."""
    sha = hashlib.sha256()
    previous = None
    for run_id, last_hash in pairs:
        if previous is not None and run_id <= previous:
            raise ValueError(f"run id {run_id!r} arrives after {previous!r}: the pairs are not sorted and unique")
        sha.update(_line(run_id, last_hash).encode("utf-8"))
        previous = run_id
    return sha.hexdigest()


def signed_message(run_set: str, root: str) -> bytes:
    """What a log-root signature signs: `membench log_root v1 <run_set> <root>` (ASCII/UTF-8, no
    newline). Verify by hand with `openssl pkeyutl -verify -pubin -inkey PUB.pem -rawin -in MSG
    -sigfile SIG` where SIG holds the decoded signature bytes."""
    if not HEX64.match(root):
        raise ValueError(f"log root {root!r} is not 64 lowercase hex characters")
    return f"membench log_root v1 {run_set} {root}".encode("utf-8")
