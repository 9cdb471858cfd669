"""Confirmed-Case Pass Fraction (CCPF), EngramBench §4.1 and §5.2.

For a task run with applicable hidden case set C:  CCPF = (1/|C|) Σ_{i∈C} 1[i passes] = P/|C|.

Applicability (EngramBench §4.1 and ``shared/external/README.md``):

- with an evaluator manifest for the task, the scheduled cases are the manifest's ``cases``; a
  case whose ``prerequisites`` include a V1 checkpoint (``V1``, ``V1_CHECKPOINT``,
  ``frozen_v1_checkpoint``) is not applicable when the run has no V1 checkpoint (the default);
  every other scheduled case is applicable whether it passed, failed, errored or was never
  reached — a scheduled case with no outcome row counts as unreached;
- without a manifest, the case rows given are the scheduled cases;
- a case with status ``excluded`` is dropped from the denominator (it is "non-excluded
  evaluation cases" that form C), and so is one the evaluator marked ``not_applicable`` (a V1
  prerequisite it found unmet); a ``blocked`` case (a prerequisite case did not pass) stays in it;
- agent-written tests never appear here: only hidden-evaluator cases are inputs.

Averages: the *micro* average pools case-runs, Σ passed / Σ applicable, over all runs (the
paper's headline, Table 2); the *macro* average is the unweighted mean of per-run CCPFs (each
(run, task) counts once); ``macro_over_tasks`` is the unweighted mean of per-task micro CCPFs.
Runs with no applicable case have no CCPF and are left out of the macro averages (counted).
A run is identified by (run, task); manifests are matched to tasks case-insensitively.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

#: every status membench's evaluator emits (membench/transfer_protocol/evaluator.py) and EngramBench's CSVs use:
#: ``blocked`` (a prerequisite case did not pass) stays in the denominator like a failure;
#: ``not_applicable`` (the evaluator found a V1 prerequisite unmet) leaves it, like ``excluded``
CASE_STATUSES = ("passed", "failed", "error", "unreached", "blocked", "not_applicable", "excluded")
DROPPED_STATUSES = frozenset({"excluded", "not_applicable"})
#: the same V1 checkpoint names as ``membench.formats.transfer_format.V1_CHECKPOINTS`` (analytics imports nothing
#: of the project; tests/analytics/test_ccpf_vocabulary.py keeps the two equal)
V1_PREREQUISITES = frozenset({"V1", "V1_CHECKPOINT", "FROZEN_V1_CHECKPOINT"})


@dataclass(frozen=True)
class CaseOutcome:
    run: str
    task: str
    case: str
    status: str  # one of CASE_STATUSES


@dataclass(frozen=True)
class ManifestCase:
    id: str
    dimension: str | None
    weight: float | None
    prerequisites: tuple[str, ...]

    @property
    def needs_v1(self) -> bool:
        return any(p.upper() in V1_PREREQUISITES for p in self.prerequisites)


@dataclass(frozen=True)
class EvaluatorManifest:
    """The part of an EngramBench ``*.manifest.v2.json`` that CCPF needs."""

    task_id: str
    cases: tuple[ManifestCase, ...]

    def applicable(self, *, v1_checkpoint: bool) -> tuple[ManifestCase, ...]:
        return tuple(c for c in self.cases if v1_checkpoint or not c.needs_v1)


class UnknownCaseError(ValueError):
    def __init__(self, run: str, task: str, case: str):
        self.run, self.task, self.case = run, task, case
        super().__init__(f"run {run!r}, task {task!r}: case {case!r} is not in the task's evaluator manifest")


@dataclass(frozen=True)
class Ratio:
    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None


@dataclass(frozen=True)
class RunCCPF:
    """One (run, task): ``passed``/``applicable``; ``statuses`` counts applicable cases by status
    (a manifest case without a row is counted as ``unreached`` and in ``missing``)."""

    run: str
    task: str
    passed: int
    applicable: int
    excluded: int  # status "excluded": dropped from the denominator
    not_applicable_v1: int  # V1-prerequisite cases without a V1 checkpoint, or marked not_applicable
    missing: int
    statuses: dict[str, int]

    @property
    def ccpf(self) -> float | None:
        return self.passed / self.applicable if self.applicable else None


@dataclass(frozen=True)
class TaskCCPF:
    task: str
    runs: int
    micro: Ratio
    macro: float | None  # mean of the task's per-run CCPFs


@dataclass(frozen=True)
class CCPFReport:
    runs: tuple[RunCCPF, ...]
    tasks: dict[str, TaskCCPF]
    micro: Ratio
    macro: float | None  # mean over (run, task) CCPFs
    macro_runs: int  # runs that entered the macro average
    runs_without_cases: int
    macro_over_tasks: float | None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _manifest_index(manifests: Mapping[str, EvaluatorManifest] | Iterable[EvaluatorManifest]) -> dict[str, EvaluatorManifest]:
    items = manifests.values() if isinstance(manifests, Mapping) else manifests
    return {m.task_id.lower(): m for m in items}


def ccpf(
    outcomes: Iterable[CaseOutcome],
    manifests: Mapping[str, EvaluatorManifest] | Iterable[EvaluatorManifest] = (),
    *,
    v1_checkpoint_runs: Collection[tuple[str, str]] = (),
) -> CCPFReport:
    """Per-run, per-task and overall (micro and macro) CCPF from per-case outcomes.

    ``v1_checkpoint_runs`` lists the (run, task) pairs whose V1 checkpoint is present (their
    V1-prerequisite cases are applicable). Raises ValueError on an unknown status, a repeated
    (run, task, case) and :class:`UnknownCaseError` for a case missing from a task's manifest.
    """
    index = _manifest_index(manifests)
    v1_runs = set(v1_checkpoint_runs)
    grouped: dict[tuple[str, str], dict[str, str]] = {}
    for o in outcomes:
        if o.status not in CASE_STATUSES:
            raise ValueError(f"unknown case status {o.status!r} (expected one of {', '.join(CASE_STATUSES)})")
        cases = grouped.setdefault((o.run, o.task), {})
        if o.case in cases:
            raise ValueError(f"duplicate case outcome: run {o.run!r}, task {o.task!r}, case {o.case!r}")
        cases[o.case] = o.status

    runs: list[RunCCPF] = []
    for (run, task), cases in grouped.items():
        manifest = index.get(task.lower())
        statuses: Counter[str] = Counter()
        excluded = not_v1 = missing = 0
        if manifest is not None:
            known = {c.id for c in manifest.cases}
            for case in cases:
                if case not in known:
                    raise UnknownCaseError(run, task, case)
            has_v1 = (run, task) in v1_runs
            for declared in manifest.cases:
                if declared.needs_v1 and not has_v1:
                    not_v1 += 1
                    continue
                status = cases.get(declared.id)
                if status is None:
                    missing += 1
                    status = "unreached"
                if status in DROPPED_STATUSES:
                    excluded += status == "excluded"
                    not_v1 += status == "not_applicable"
                    continue
                statuses[status] += 1
        else:
            for status in cases.values():
                if status == "not_applicable":
                    not_v1 += 1
                elif status == "excluded":
                    excluded += 1
                else:
                    statuses[status] += 1
        runs.append(
            RunCCPF(
                run=run,
                task=task,
                passed=statuses["passed"],
                applicable=sum(statuses.values()),
                excluded=excluded,
                not_applicable_v1=not_v1,
                missing=missing,
                statuses={s: statuses[s] for s in CASE_STATUSES if s not in DROPPED_STATUSES},
            )
        )
    runs.sort(key=lambda r: (r.task, r.run))

    tasks: dict[str, TaskCCPF] = {}
    for task in sorted({r.task for r in runs}):
        mine = [r for r in runs if r.task == task]
        tasks[task] = TaskCCPF(
            task=task,
            runs=len(mine),
            micro=Ratio(sum(r.passed for r in mine), sum(r.applicable for r in mine)),
            macro=_mean([r.ccpf for r in mine if r.ccpf is not None]),
        )
    run_values = [r.ccpf for r in runs if r.ccpf is not None]
    return CCPFReport(
        runs=tuple(runs),
        tasks=tasks,
        micro=Ratio(sum(r.passed for r in runs), sum(r.applicable for r in runs)),
        macro=_mean(run_values),
        macro_runs=len(run_values),
        runs_without_cases=len(runs) - len(run_values),
        macro_over_tasks=_mean([t.micro.value for t in tasks.values() if t.micro.value is not None]),
    )
