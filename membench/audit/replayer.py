"""Replay and audit (docs/design.md §9): read a run set's raw events from a log file, the warehouse's
raw table or a Kafka topic; verify every run's hash chain and seq continuity, each hash recomputed
with the schema the event was written with; check the scored diffs a PatchProduced carries inline
or by digest; check transfer runs' skill-bank digests against their seed's frozen banks; re-run
the processors; diff the re-derived events against what the warehouse recorded; recompute each
run set's log root and check it (and its signature) against the run set's log_root.json.

`replay` does it in this process (this module); `membench.audit.parallel_replay.replay_file_jobs` splits a
log file's runs over worker processes with the same result. The sources are `membench.audit.file_source`,
`membench.audit.warehouse_source` and `membench.audit.kafka_source`; the checks beside the chains `membench.audit.checks`; the
comparison with the warehouse `membench.audit.comparison`; the recorded root `membench.audit.root_check`. Every
problem is reported with the run and the seq it concerns, in one order (run, seq, reason).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from membench.audit.checks import BankLedger, BlobStore, diff_findings, model_call_findings
from membench.audit.comparison import _Comparer
from membench.audit.findings import Finding, Logged, ReplayResult, RunSetSummary
from membench.audit.run_heads import RunHeads
from membench.processors import RunSetProcessor
from membench.schemas.chain import ChainVerifier, sealed_as_written
from membench.schemas.events import Event


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
        # redelivery would be. Its open runs' stored hashes by seq tell a duplicate.
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
        # the fencing rule of the processors (and membench.bus.attempts.RunChain): a run's chain is its
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
    heads = result.heads
    assert heads is not None  # every replay keeps its heads (Replayer)
    counts = heads.counts()
    result.runs = sum(counts.values())
    for summary in result.run_sets.values():
        summary.runs = counts.get(summary.run_set, 0)
        summary.log_root = heads.log_root(summary.run_set)
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
    ended run's head goes to disk (`membench.audit.run_heads`), so memory does not grow with the log."""
    replayer = _Replayer(findings, None, blobs_for, file_log=file_log)
    if warehouse is not None:
        replayer.comparer = _Comparer(warehouse, replayer.result, findings)
    replayer.feed_all(events)
    replayer.finish()
    return _settle(replayer.result, replayer.banks, banks_for)
