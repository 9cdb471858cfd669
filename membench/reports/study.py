"""A study's registered comparison families and its baseline: the study file (docs/study.md) or the
defaults, and the baseline a run set's comparisons are made against.

The baseline is, in this order: `--baseline`, the study file's `baseline`, `B0`, `no_memory`. A
run set with two or more conditions and none of these is refused (`BaselineError`) rather than
compared against whichever condition sorts first; a named baseline the run set lacks is refused
too. Both are usage errors for the CLI (exit 2).

A study declares exactly one primary family and any number of sensitivity families; each names
its comparisons (pairs A vs B) and the tests Holm is applied to within it. Without a study, the
primary family is every other condition vs the baseline, under every test.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

BASELINES = ("B0", "no_memory")
TESTS = ("clustered", "mcnemar", "majority", "per_seed")
ROLES = ("primary", "sensitivity")
# membench's own family beside a study's (membench/reports/comparisons.py: all_pairs): every pair of the run
# set's conditions, Holm over them alone, never mixed into the primary family; not a study file role
SECONDARY = "secondary"
ALL_PAIRS = "all_pairs"
DEFAULT_ALPHA = 0.05


class StudyError(ValueError):
    """A study file that does not have the declared shape; the message names the file and field."""


class BaselineError(ValueError):
    """No baseline can be chosen without guessing, or the named one is not in the run set."""


@dataclass(frozen=True)
class FamilySpec:
    name: str
    role: str  # "primary" or "sensitivity"
    comparisons: tuple[tuple[str, str], ...]  # (a, b): a vs b; a pair naming a condition without cells stays, at p = 1
    tests: tuple[str, ...]


@dataclass(frozen=True)
class Study:
    source: str  # the study file's name, or "default"
    baseline: str | None
    alpha: float
    families: tuple[FamilySpec, ...]  # empty: the default primary family, made once the baseline is known


DEFAULT_STUDY = Study(source="default", baseline=None, alpha=DEFAULT_ALPHA, families=())


def resolve_baseline(conditions: list[str], requested: str | None = None, study: Study = DEFAULT_STUDY,
                     *, option: str = "--baseline") -> str | None:
    """The baseline of a run set with these conditions (see the module docstring)."""
    named, where = (requested, option) if requested is not None else (study.baseline, f"{study.source}: field 'baseline'")
    if named is not None:
        if named not in conditions:
            raise BaselineError(f"{where}: condition '{named}' is not in the run set (its conditions: "
                                f"{', '.join(conditions) or 'none'})")
        return named
    for name in BASELINES:
        if name in conditions:
            return name
    if len(conditions) <= 1:  # nothing to compare: no choice to make
        return conditions[0] if conditions else None
    raise BaselineError(f"no baseline: the run set's conditions ({', '.join(conditions)}) include neither "
                        f"{' nor '.join(BASELINES)}; name one with {option} COND")


def families_for(study: Study, conditions: list[str], baseline: str | None) -> tuple[FamilySpec, ...]:
    """The study's families, or the default primary family: every other condition vs the baseline."""
    if study.families:
        return study.families
    pairs = tuple((c, baseline) for c in conditions if c != baseline) if baseline is not None else ()
    return (FamilySpec(name="primary", role="primary", comparisons=pairs, tests=TESTS),)


def parse_study(document: Any, source: str) -> Study:
    """A study from its JSON document; every error names SOURCE and the field."""
    def fail(field: str, message: str) -> StudyError:
        return StudyError(f"{source}: field '{field}': {message}")

    if not isinstance(document, dict):
        raise StudyError(f"{source}: expected a JSON object, got {type(document).__name__}")
    unknown = sorted(set(document) - {"baseline", "alpha", "families"})
    if unknown:
        raise fail(unknown[0], "unknown field (known: baseline, alpha, families)")
    baseline = document.get("baseline")
    if baseline is not None and (not isinstance(baseline, str) or not baseline):
        raise fail("baseline", "expected a condition name")
    alpha = document.get("alpha", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or not 0 < alpha < 1:
        raise fail("alpha", f"expected a number strictly between 0 and 1, got {alpha!r}")
    raw = document.get("families")
    if not isinstance(raw, list) or not raw:
        raise fail("families", "expected a non-empty list of families")
    families, names = [], set()
    for i, fam in enumerate(raw):
        where = f"families[{i}]"
        if not isinstance(fam, dict):
            raise fail(where, "expected an object")
        unknown = sorted(set(fam) - {"name", "role", "comparisons", "tests"})
        if unknown:
            raise fail(f"{where}.{unknown[0]}", "unknown field (known: name, role, comparisons, tests)")
        name = fam.get("name")
        if not isinstance(name, str) or not name:
            raise fail(f"{where}.name", "expected a non-empty string")
        if name in names:
            raise fail(f"{where}.name", f"family '{name}' is declared twice")
        if name == ALL_PAIRS:
            raise fail(f"{where}.name", f"'{ALL_PAIRS}' is membench's own secondary family (every pair of the run "
                       "set's conditions, added to every report); give yours another name")
        names.add(name)
        role = fam.get("role")
        if role not in ROLES:
            raise fail(f"{where}.role", f"expected one of {', '.join(ROLES)}, got {role!r}")
        pairs = fam.get("comparisons")
        if not isinstance(pairs, list) or not pairs:
            raise fail(f"{where}.comparisons", "expected a non-empty list of [A, B] pairs")
        seen: list[tuple[str, str]] = []
        for j, pair in enumerate(pairs):
            if (not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) and x for x in pair)
                    or pair[0] == pair[1]):
                raise fail(f"{where}.comparisons[{j}]", f"expected [A, B], two different condition names, got {pair!r}")
            if tuple(pair) in seen:
                raise fail(f"{where}.comparisons[{j}]", f"{pair[0]} vs {pair[1]} is registered twice")
            seen.append((pair[0], pair[1]))
        tests = fam.get("tests", list(TESTS))
        if (not isinstance(tests, list) or not tests or any(t not in TESTS for t in tests)
                or len(set(tests)) != len(tests)):
            raise fail(f"{where}.tests", f"expected a non-empty list of distinct tests among {', '.join(TESTS)}, "
                       f"got {tests!r}")
        families.append(FamilySpec(name=name, role=role, comparisons=tuple(seen),
                                   tests=tuple(t for t in TESTS if t in tests)))
    primaries = [f.name for f in families if f.role == "primary"]
    if len(primaries) != 1:
        raise fail("families", f"expected exactly one family with role 'primary', got {len(primaries)}")
    return Study(source=source, baseline=baseline, alpha=float(alpha), families=tuple(families))


def load_study_text(text: str, source: str) -> Study:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StudyError(f"{source}: not JSON: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    return parse_study(document, source)
