"""`replay --jobs N` of a log file: worker processes, each replaying the runs it owns, and the parent
that compares, merges and settles their results into what `membench.audit.replayer.replay` returns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from membench.audit.checks import BankLedger, SourceDirs
from membench.audit.comparison import _Comparer, _Forwarder
from membench.audit.file_source import events_from_file
from membench.audit.findings import Finding, ReplayResult, RunSetSummary
from membench.audit.replayer import _Replayer, _settle
from membench.audit.run_heads import RunHeads


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
    the whole file, walking over other workers' events without decoding them (`membench.audit.logscan`);
    the parent compares the derived events the workers send with the warehouse, merges heads, run
    sets and findings, and checks the skill banks across runs. The result equals `replay`'s."""
    import multiprocessing

    dirs = dirs or SourceDirs(file_dir=Path(path).parent)
    heads = RunHeads()
    result = ReplayResult(findings=findings, heads=heads)
    # each worker's heads in a file beside the parent's store (its temporary directory, removed with it)
    heads_paths = [str(heads.path.parent / f"worker-{k}.sqlite") for k in range(jobs)]
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
                assert comparer is not None  # workers send derived events only to compare them
                for run_id, derived in payload:
                    comparer.add_ended(run_id, derived)
            elif kind == "open":
                assert comparer is not None
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
        heads.absorb(Path(heads_paths[k]))
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
