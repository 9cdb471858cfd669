"""The recorded root: a run set's log_root.json checked against the root recomputed by replay, and
its Ed25519 signature verified."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membench.audit.findings import Finding, ReplayResult


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
    from membench.audit.log_root_record import LogRootError, describes, read_record, verify_signature

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
        assert result.heads is not None  # every replay keeps its heads (membench.audit.replayer)
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
