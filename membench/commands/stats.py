"""`membench stats`: paired comparisons with Holm, and CCPF, from files. JSON on stdout."""

from __future__ import annotations

import json

import click

from membench.errors import UsageError
from analytics.ccpf import EvaluatorManifest, ccpf as compute_ccpf
from analytics.cells import Cell, gc_paused
from analytics.compare import FamilyResult, compare_family
from analytics.export import family_json
from analytics.loaders import InputError, load_cases_csv, load_cells_csv, load_manifest


@click.group("stats")
def stats() -> None:
    """Statistics from files: paired condition comparisons and CCPF."""


def _parse_pair(raw: str) -> tuple[str, str]:
    parts = raw.split(":")
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        raise UsageError(f"--pair {raw!r}: expected two condition names as A:B")
    return parts[0].strip(), parts[1].strip()


@stats.command("compare")
@click.option("--cells", "cells_path", required=True, metavar="FILE.csv",
              help="CSV with columns unit,seed,condition,passed and optional valid,construct.")
@click.option("--pair", "pair_args", multiple=True, required=True, metavar="A:B",
              help="A comparison of condition A against condition B; repeat for a family.")
@click.option("--family-size", type=click.IntRange(min=1), default=None,
              help="Registered family size for Holm; slots beyond the listed pairs are unavailable (p = 1).")
def compare(cells_path: str, pair_args: tuple[str, ...], family_size: int | None) -> None:
    """Exact trap-clustered sign-flip test, McNemar variants and Holm for each A:B pair.

    p_holm is the Holm-adjusted p_clustered over the listed pairs (plus unavailable slots up to
    --family-size). clustered_method says how p_clustered was computed: "exact", or
    "monte_carlo" (seeded, with its draws and a Clopper-Pearson 95% interval of the exact p) when
    the exact test would be too large (k * S > 2^24; analytics/exact.py).
    """
    pairs = [_parse_pair(raw) for raw in pair_args]
    if family_size is not None and family_size < len(pairs):
        raise UsageError(f"--family-size {family_size} is smaller than the {len(pairs)} pairs given")
    with gc_paused():  # hundreds of thousands of acyclic records: no collector passes over them
        try:
            cells = load_cells_csv(cells_path)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        family = _compare(cells_path, cells, pair_args, pairs, family_size)
    click.echo(json.dumps(family_json(family), indent=2))


def _compare(cells_path: str, cells: list[Cell], pair_args: tuple[str, ...], pairs: list[tuple[str, str]],
             family_size: int | None) -> FamilyResult:
    """The family over the loaded cells; a condition no row carries is a usage error naming --pair."""
    conditions = {c.condition for c in cells}
    for raw, (a, b) in zip(pair_args, pairs):
        for name in (a, b):
            if name not in conditions:
                known = ", ".join(sorted(conditions)) or "none"
                raise UsageError(f"{cells_path}: column 'condition': no data row has condition {name!r} "
                                 f"(--pair {raw}; conditions present: {known})")
    return compare_family(cells, pairs, family_size=family_size)


@stats.command("ccpf")
@click.option("--cases", "cases_path", required=True, metavar="FILE.csv",
              help="CSV with columns run,task,case,status (passed/failed/error/unreached/excluded), optional v1_checkpoint.")
@click.option("--manifest", "manifest_paths", multiple=True, metavar="M.json",
              help="Evaluator manifest (*.manifest.v2.json) of a task; repeat for several tasks.")
def ccpf(cases_path: str, manifest_paths: tuple[str, ...]) -> None:
    """Confirmed-Case Pass Fraction per task and overall, micro and macro (EngramBench §4.1)."""
    manifests: dict[str, EvaluatorManifest] = {}
    sources: dict[str, str] = {}
    try:
        for path in manifest_paths:
            m = load_manifest(path)
            key = m.task_id.lower()
            if key in manifests:
                raise InputError(path, f"task {m.task_id!r} already has a manifest ({sources[key]})", field="taskId")
            manifests[key], sources[key] = m, path
        cases = load_cases_csv(cases_path, manifests)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    report = compute_ccpf(cases.outcomes, manifests, v1_checkpoint_runs=cases.v1_checkpoint_runs)
    out = {
        "tasks": {
            name: {
                "micro": {"passed": t.micro.numerator, "applicable": t.micro.denominator, "ccpf": t.micro.value},
                "macro": {"ccpf": t.macro, "runs": t.runs},
            }
            for name, t in report.tasks.items()
        },
        "overall": {
            "micro": {"passed": report.micro.numerator, "applicable": report.micro.denominator,
                      "ccpf": report.micro.value},
            "macro": {"ccpf": report.macro, "runs": report.macro_runs,
                      "runs_without_cases": report.runs_without_cases},
            "macro_over_tasks": report.macro_over_tasks,
        },
        "runs": [
            {
                "run": r.run,
                "task": r.task,
                "passed": r.passed,
                "applicable": r.applicable,
                "ccpf": r.ccpf,
                "excluded": r.excluded,
                "not_applicable_v1": r.not_applicable_v1,
                "missing": r.missing,
                "statuses": r.statuses,
            }
            for r in report.runs
        ],
        "manifests": sorted(m.task_id for m in manifests.values()),
    }
    click.echo(json.dumps(out, indent=2))
