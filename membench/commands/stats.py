"""`membench stats`: paired comparisons with Holm, and CCPF, from files. JSON on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import click

from membench.errors import UsageError
from membench.analytics.ccpf import EvaluatorManifest, ccpf as compute_ccpf
from membench.analytics.cells import Cell, gc_paused
from membench.analytics.compare import FamilyResult, compare_family
from membench.analytics.export import family_json
from membench.analytics.loaders import InputError, load_cases_csv, load_cells_csv, load_manifest


@click.group("stats")
def stats() -> None:
    """Statistics from files: paired condition comparisons and CCPF."""


def _parse_pair(raw: str, option: str = "--pair") -> tuple[str, str]:
    parts = raw.split(":")
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip() or parts[0].strip() == parts[1].strip():
        raise UsageError(f"{option} {raw!r}: expected two different condition names as A:B")
    return parts[0].strip(), parts[1].strip()


@stats.command("compare")
@click.option("--cells", "cells_path", required=True, metavar="FILE.csv",
              help="CSV with columns unit,seed,condition,passed and optional valid,construct.")
@click.option("--pair", "pair_args", multiple=True, metavar="A:B",
              help="A comparison of condition A against condition B; repeat for a family.")
@click.option("--family-size", type=click.IntRange(min=1), default=None,
              help="Registered family size for Holm; slots beyond the listed pairs are unavailable (p = 1).")
@click.option("--unavailable", "unavailable_args", multiple=True, metavar="COND|A:B",
              help="A registered comparison that did not run, kept in the family at p = 1: COND against the "
                   "pairs' common B, or A:B; repeatable.")
@click.option("--study", "study_path", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Take the family from a study file (docs/study.md); its pairs without cells are unavailable "
                   "slots (p = 1).")
@click.option("--family", "family_name", default=None, metavar="NAME",
              help="With --study: the family to compare (default: its primary family).")
def compare(cells_path: str, pair_args: tuple[str, ...], family_size: int | None, unavailable_args: tuple[str, ...],
            study_path: Path | None, family_name: str | None) -> None:
    """Exact trap-clustered sign-flip test, McNemar variants and Holm for each A:B pair.

    The Holm family is the study file's (--study), or the pairs given plus unavailable slots
    (--unavailable, --family-size), each unavailable slot at p = 1. With none of these it is the
    pairs given alone: said on stderr and in the JSON's `family`, since a registered family whose
    other pairs did not run is larger and its Holm p-values larger too. p_holm is the
    Holm-adjusted p_clustered over the family. clustered_method says how p_clustered was
    computed: "exact", or "monte_carlo" (seeded, with its draws and a Clopper-Pearson 95% interval
    of the exact p) when the exact test would be too large (k * S > 2^24; membench/analytics/exact.py).
    """
    pairs, unavailable, alpha, source = _registered_family(pair_args, family_size, unavailable_args, study_path,
                                                           family_name)
    with gc_paused():  # hundreds of thousands of acyclic records: no collector passes over them
        try:
            cells = load_cells_csv(cells_path)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        if study_path is not None:  # a registered pair whose conditions have no cells stays, at p = 1
            present = {c.condition for c in cells}
            unavailable = [p for p in pairs if not set(p) <= present]
            pairs = [p for p in pairs if set(p) <= present]
        family = _compare(cells_path, cells, pair_args, pairs, unavailable, family_size, alpha)
    out = family_json(family)
    out["family"] = _family_note(family, source, alpha)
    if source == "--pair":
        click.echo(f"stats compare: Holm over a family of the {len(pairs)} pair(s) given; if the registered "
                   "family had more comparisons, give --study FILE, --unavailable COND or --family-size N "
                   "(an unavailable slot counts at p = 1)", err=True)
    click.echo(json.dumps(out, indent=2))


def _registered_family(pair_args: tuple[str, ...], family_size: int | None, unavailable_args: tuple[str, ...],
                       study_path: Path | None, family_name: str | None
                       ) -> tuple[list[tuple[str, str]], list[tuple[str, str]], float, str]:
    """(pairs, unavailable slots, alpha, what registered the family) from the options; usage errors
    for a missing or contradictory registration."""
    if study_path is not None:
        if pair_args or unavailable_args or family_size is not None:
            raise UsageError("--study: the study file registers the family; give it without --pair, --unavailable "
                             "and --family-size")
        from membench.pipeline.report_inputs import load_study
        from membench.pipeline.run_errors import RequestInvalid

        try:  # `stats` reads CSV files alone, and its command is also called outside the group
            study = load_study(study_path)
        except RequestInvalid as exc:
            raise UsageError(str(exc)) from None
        if not study.families:
            raise UsageError(f"--study: {study_path.name}: field 'families': registers no family")
        names = [f.name for f in study.families]
        spec = (next((f for f in study.families if f.role == "primary"), study.families[0]) if family_name is None
                else next((f for f in study.families if f.name == family_name), None))
        if spec is None:
            raise UsageError(f"--family: {study_path.name} has no family {family_name!r} (its families: "
                             f"{', '.join(names)})")
        return list(spec.comparisons), [], study.alpha, f"--study {study_path.name} (family {spec.name})"
    if family_name is not None:
        raise UsageError("--family: names a family of a study file; give --study FILE")
    if not pair_args:
        raise UsageError("--pair: give at least one A:B pair, or --study FILE")
    pairs = [_parse_pair(raw) for raw in pair_args]
    unavailable = [_parse_unavailable(raw, pairs) for raw in unavailable_args]
    for slot, raw in zip(unavailable, unavailable_args):
        if slot in pairs or unavailable.count(slot) > 1:
            raise UsageError(f"--unavailable {raw}: {slot[0]}:{slot[1]} is registered twice")
    slots = len(pairs) + len(unavailable)
    if family_size is not None and family_size < slots:
        raise UsageError(f"--family-size {family_size} is smaller than the {slots} comparisons given "
                         f"({len(pairs)} --pair, {len(unavailable)} --unavailable)")
    source = " and ".join(o for o, given in (("--unavailable", unavailable), ("--family-size", family_size is not None))
                          if given) or "--pair"
    return pairs, unavailable, 0.05, source


def _parse_unavailable(raw: str, pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """COND (against the B every --pair shares) or A:B."""
    if ":" in raw:
        return _parse_pair(raw, option="--unavailable")
    baselines = sorted({b for _, b in pairs})
    if not raw.strip():
        raise UsageError("--unavailable: expected a condition name COND or a pair A:B")
    if len(baselines) != 1:
        raise UsageError(f"--unavailable {raw}: the pairs given have no common B ({', '.join(baselines)}); "
                         f"name the slot as A:B")
    return raw.strip(), baselines[0]


def _family_note(family: FamilyResult, source: str, alpha: float) -> dict[str, object]:
    """Which family Holm was applied over: what registered it, its size and its unavailable slots."""
    unavailable = [{"a": s[0] if s else None, "b": s[1] if s else None, "p": family.holm_clustered.raw[i],
                    "p_holm": family.holm_clustered.adjusted[i]}
                   for i, (s, c) in enumerate(zip(family.slots, family.comparisons)) if c is None]
    return {"source": source, "size": family.family_size, "alpha": alpha,
            "evaluated": sum(c is not None for c in family.comparisons), "unavailable": unavailable}


def _compare(cells_path: str, cells: list[Cell], pair_args: tuple[str, ...], pairs: list[tuple[str, str]],
             unavailable: list[tuple[str, str]], family_size: int | None, alpha: float) -> FamilyResult:
    """The family over the loaded cells; a condition no row carries is a usage error naming --pair."""
    conditions = {c.condition for c in cells}
    for raw, (a, b) in zip(pair_args, pairs):
        for name in (a, b):
            if name not in conditions:
                known = ", ".join(sorted(conditions)) or "none"
                raise UsageError(f"{cells_path}: column 'condition': no data row has condition {name!r} "
                                 f"(--pair {raw}; conditions present: {known}); a registered comparison that did "
                                 f"not run is --unavailable {a}:{b}")
    return compare_family(cells, pairs, unavailable=unavailable, family_size=family_size, alpha=alpha)


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
