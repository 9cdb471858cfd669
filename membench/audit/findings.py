"""What replay reports (docs/design.md §9): a `Finding` names the run and the seq it concerns; a
`ReplayResult` holds the counts, the findings and each run set's `RunSetSummary` (its runs, its log
root, its abandoned attempts and fenced events). `Logged` is an event as a source read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from membench.audit.run_heads import RunHeads

# An event as a source read it, with the schema it was written with (its hash is recomputed with it)
# and, when the source kept them, the bytes it was written as: (event, schema[, datum]).
Logged = tuple


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
    head is the recomputed hash of its chain's last event, `membench.schemas.chain.ChainVerifier`, the stored
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
    heads: RunHeads | None = None  # every run's head, on disk (membench.audit.run_heads)

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
