"""Report section: the canary proof — every secret of the run set's pack searched for in everything
the agent could see (the payload of every `agent`-visibility event in the warehouse) and in the
rendered reports, and the search itself recorded.

Secrets are per trap (docs/design.md §11), so a hit names its trap. A trap's own runs legitimately
carry its secret in agent-visible events (the evidence event of an earlier session, memory reads,
the agent's patch): those are counted as `own_trap_hits`, not leaks. A leak is a secret in an
agent-visible event of another trap's run, or in a report. `status` is `pass` with zero leaks and
`fail` otherwise; without the pack's secret values (`membench report --pack`, or the finalized pack
found by digest in $MEMBENCH_HOME/packs) it is `not_run` with the reason — never a pass.

Values never enter the proof: a hit records the secret's name and trap, and where it was found.
Scored diffs (`PatchProduced.production_diff` / `stripped_diff`) are inline up to 64 KiB and part of
the payload; a larger one is only its digest in the event, its text a blob beside the log
(`runs/<run set>/blobs/<sha256>`, docs/design.md §9). Those blobs are agent-visible too (the agent
wrote the diff) and are searched through `read_blob` (digest -> bytes, None when absent or not
hashing to its name; the CLI reads `membench.bus.blobs`). A blob that cannot be read leaves the proof
`not_run` naming how many and where they were looked for — an unsearched diff is never a pass —
unless a leak was found anyway (`fail`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from membench.reports.model import CanaryHit, CanaryProof, CanarySearch
from membench.warehouse.read_model import ReadModel

NEEDLES_PER_QUERY = 200  # ClickHouse's multiSearch functions take at most 255 needles
DIFF_FIELDS = ("production_diff", "stripped_diff")  # PatchProduced: inline text, or null + a blob digest


@dataclass(frozen=True)
class Secret:
    name: str
    trap: str  # the sequence (trap) the secret belongs to
    value: str


def not_run(reason: str, pack: str | None = None) -> CanaryProof:
    return CanaryProof(status="not_run", reason=reason, pack=pack, secrets=0, searched=None, own_trap_hits=0, leaks=0,
                       hits=[])


def _trap_of(unit_id: str) -> str:
    parts = unit_id.split("/")  # suite/task/condition/seed
    return "/".join(parts[1:-2]) if len(parts) >= 4 else unit_id


def search_events(reads: ReadModel, run_set: str, secrets: list[Secret], pack: str,
                  read_blob: Callable[[str], bytes | None] | None = None, blob_place: str = "") -> CanaryProof:
    """The proof over the run set's agent-visible events and the diffs they store as blobs (read with
    `read_blob`; `blob_place` says where, for a reason; the reports are added by `search_reports`)."""
    if not secrets:
        return CanaryProof(status="no_secrets", reason="the pack has no secret placeholders", pack=pack, secrets=0,
                           searched=None, own_trap_hits=0, leaks=0, hits=[])
    events, payload_bytes = reads.agent_visible_totals(run_set)
    hits: list[CanaryHit] = []
    for start in range(0, len(secrets), NEEDLES_PER_QUERY):
        chunk = secrets[start:start + NEEDLES_PER_QUERY]
        for row in reads.agent_visible_hits(run_set, [s.value for s in chunk]):
            run_trap = _trap_of(row.unit_id)
            for secret, position in zip(chunk, row.at):
                if position:
                    hits.append(CanaryHit(secret=secret.name, trap=secret.trap,
                                          where=f"event {row.run_id} seq {row.seq} ({row.kind})",
                                          run_trap=run_trap))
    blobs, blob_bytes, missing = _search_blobs(reads, run_set, secrets, read_blob, hits)
    search = CanarySearch(agent_visible_events=events, agent_visible_bytes=payload_bytes,
                          reports=[], report_bytes=0, blobs=blobs, blob_bytes=blob_bytes,
                          blobs_missing=len(missing))
    own = sum(1 for h in hits if h.run_trap == h.trap)
    reason = None
    if missing:
        reason = (f"{len(missing)} scored diff{'s' if len(missing) > 1 else ''} stored as blobs could not be read "
                  f"{blob_place or 'here'} (first: {missing[0]}), so not everything agent-visible was searched")
    return _settle(CanaryProof(status="pass", reason=reason, pack=pack, secrets=len(secrets), searched=search,
                               own_trap_hits=own, leaks=0, hits=[h for h in hits if h.run_trap != h.trap]))


def _search_blobs(reads: ReadModel, run_set: str, secrets: list[Secret],
                  read_blob: Callable[[str], bytes | None] | None, hits: list[CanaryHit]) -> tuple[int, int, list[str]]:
    """Search every PatchProduced diff kept as a blob; appends to HITS; (blobs, bytes, missing).
    A missing entry names the event and field, never a value."""
    rows = reads.diffs_stored_as_blobs(run_set, DIFF_FIELDS)
    searched = size = 0
    missing: list[str] = []
    for row in rows:
        for diff in row.fields:
            digest = diff.sha256
            if not (diff.as_blob and digest):
                continue
            where = f"event {row.run_id} seq {row.seq} (PatchProduced {diff.name} blob {digest[:12]})"
            data = read_blob(digest) if read_blob is not None else None
            if data is None:
                missing.append(where)
                continue
            searched += 1
            size += len(data)
            text = data.decode("utf-8", errors="replace")
            run_trap = _trap_of(row.unit_id)
            hits.extend(CanaryHit(secret=secret.name, trap=secret.trap, where=where, run_trap=run_trap)
                        for secret in secrets if secret.value in text)
    return searched, size, missing


def search_reports(proof: CanaryProof, secrets: list[Secret], texts: Mapping[str, str]) -> CanaryProof:
    """PROOF with the rendered reports (file name -> text) searched too; any hit there is a leak."""
    if proof.searched is None:
        return proof
    hits = list(proof.hits)
    for name, text in texts.items():
        for secret in secrets:
            if secret.value in text:
                hits.append(CanaryHit(secret=secret.name, trap=secret.trap, where=f"report {name}", run_trap=None))
    search = replace(proof.searched, reports=list(proof.searched.reports) + list(texts),
                     report_bytes=proof.searched.report_bytes + sum(len(t.encode("utf-8")) for t in texts.values()))
    return _settle(replace(proof, searched=search, hits=hits))


def _settle(proof: CanaryProof) -> CanaryProof:
    """`hits` lists the leaks only (own-trap hits are counted: every memory read of a trap carries its
    secret); status from their number — `not_run` without a leak when a stored diff went unsearched."""
    unsearched = proof.searched is not None and proof.searched.blobs_missing
    status = "fail" if proof.hits else ("not_run" if unsearched else "pass")
    return replace(proof, leaks=len(proof.hits), status=status)
