"""One verdict line per comparison: what a reader can quote about "A vs B" — the primary test (the
exact trap-clustered sign-flip) with its raw and Holm-adjusted p within the comparison's registered
family, the paired effect Δ with its 95% CI, and whether it is publishable or which failed validity
gates invalidate it (membench/reports/gate_failures.py's mapping, with the pair's own paired-coverage gate).

Read from the typed report (`membench.reports.model.Report`), like membench/reports/gate_failures.py, so a report.json
read back (`from_json`) renders the same and a report written before the `verdicts` key still gets its lines. A gate that
invalidates only a construct's stratum does not invalidate the comparison as a whole and is not
listed here (the failed-gates lines say which stratum). The paired-coverage gate of
`validity_gates` is measured against the baseline only; a family entry carries the same gate for
its own pair (`paired_coverage`), which is what a verdict uses, so "DF-hybrid vs B5" is judged by
its own paired traps. Exclusion balance is measured against the baseline only.

`requested(verdicts, a, b)` answers `--compare A:B`: the verdict of the first family (primary
first) that registers the pair, turned to read A vs B when the family has it as B vs A (Δ and its
CI change sign; the two-sided p does not).
"""

from __future__ import annotations

from dataclasses import replace

from membench.analytics.gates import Gate
from membench.reports.gate_failures import EVERY_COMPARISON, GateFailure, failed_gates
from membench.reports.model import ComparisonVerdict, FamilyComparison, Report

PUBLISHABLE = "publishable"
NOT_PUBLISHABLE = "not_publishable"
UNAVAILABLE = "unavailable"
NO_GATES = "no_gates"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _pp(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f} pp"


def _coverage_reason(gate: Gate, seeds: int | None) -> str:
    text = (f"paired coverage needs ≥ 2 paired valid seeds in ≥ {gate.threshold} of "
            f"{gate.denominator} traps (has {gate.numerator})")
    return text + ("; this run has 1 seed" if seeds == 1 else "")


def _reasons(report: Report, entry: FamilyComparison, failures: list[GateFailure]) -> list[str]:
    """The failed gates that invalidate ENTRY's comparison as a whole, each with its numbers."""
    a, b = entry.a, entry.b
    labels = {f"{a} vs {b}", f"{b} vs {a}"}
    sides = {f"every comparison with {a}", f"every comparison with {b}"}
    own = entry.paired_coverage
    seeds = report.validity_gates.seeds
    out = []
    for f in failures:
        if own is not None and f.gate.startswith("paired coverage "):
            continue  # the pair's own gate stands for it, below
        if EVERY_COMPARISON in f.invalidates or labels & set(f.invalidates) or sides & set(f.invalidates):
            out.append(f"{f.gate} {f.measured}")
    if own is not None and not own.passed:
        out.insert(0, _coverage_reason(own, seeds))
    return out


def line(v: ComparisonVerdict) -> str:
    """The verdict as one line, e.g. "B5 vs B0 (primary family of 1): Δ +100.0 pp [+100.0, +100.0];
    clustered p 0.25, Holm p 0.25: not rejected at α = 0.05 — NOT publishable: paired coverage …"."""
    head = f"{v.a} vs {v.b} ({v.family} family of {v.family_size})"
    if v.status == UNAVAILABLE:
        return f"{head}: unavailable — a side has no evaluated cells; p = 1 in the family, not an observed result"
    low, high = v.ci95 if v.ci95 else (None, None)
    ci = "" if low is None else f" [{_pp(low)[:-3]}, {_pp(high)}]"
    test = f"{v.test} p {_p(v.p)}, Holm p {_p(v.p_holm)}"
    result = f"{'rejected' if v.rejected else 'not rejected'} at α = {v.alpha:g}"
    if v.status == PUBLISHABLE:
        judged = "publishable (every validity gate that bears on it passed)"
    elif v.status == NO_GATES:
        judged = "no validity gates apply (transfer study)"
    else:
        judged = "NOT publishable: " + "; ".join(v.invalidated_by)
    return f"{head}: Δ {_pp(v.difference)}{ci}; {test}: {result} — {judged}"


def _with_line(v: ComparisonVerdict) -> ComparisonVerdict:
    return replace(v, line=line(v))


def comparison_verdicts(report: Report) -> list[ComparisonVerdict]:
    """One verdict per comparison of every registered family, in family order; empty for a report
    without families."""
    fams = report.families
    if fams is None:
        return []
    test = fams.primary_test or "clustered"
    failures = failed_gates(report)
    gated = report.transfer is None
    out = []
    for fam in fams.families:
        for entry in fam.comparisons:
            primary = entry.primary or entry.tests.get(test)
            effect = entry.effect
            reasons = _reasons(report, entry, failures) if gated and entry.available else []
            status = (UNAVAILABLE if not entry.available else NO_GATES if not gated
                      else NOT_PUBLISHABLE if reasons else PUBLISHABLE)
            out.append(_with_line(ComparisonVerdict(
                a=entry.a, b=entry.b, family=fam.name, role=fam.role, family_size=fam.family_size, test=test,
                alpha=fam.alpha, difference=None if effect is None else effect.difference,
                ci95=list(effect.ci95 if effect is not None and effect.ci95 else [None, None]),
                p=None if primary is None else primary.p, p_holm=1.0 if primary is None else primary.p_holm,
                rejected=primary is not None and bool(primary.rejected), status=status, invalidated_by=reasons,
                line="")))
    return out


def verdicts_of(report: Report) -> list[ComparisonVerdict]:
    """The report's `verdicts`, or, for a report.json written before the key, computed from it."""
    return report.verdicts if report.verdicts is not None else comparison_verdicts(report)


def requested(verdicts: list[ComparisonVerdict], a: str, b: str) -> ComparisonVerdict:
    """The verdict answering "A vs B" (module docstring); `unavailable` in family `none` when no
    family registers the pair (a side has no cells in the run set)."""
    for v in verdicts:
        if (v.a, v.b) == (a, b):
            return v
        if (v.a, v.b) == (b, a):
            low, high = v.ci95
            def neg(x: float | None) -> float | None:
                return None if x is None else 0.0 - x  # 0.0 - x: never a "-0.0"

            return _with_line(replace(v, a=a, b=b, difference=neg(v.difference), ci95=[neg(high), neg(low)]))
    return ComparisonVerdict(
        a=a, b=b, family="none", role="none", family_size=0, test="clustered", alpha=0.05, difference=None,
        ci95=[None, None], p=None, p_holm=1.0, rejected=False, status=UNAVAILABLE, invalidated_by=[],
        line=f"{a} vs {b}: not compared — no registered family has the pair (a side has no cells in this run set)")


VERDICTS_LEGEND = ("One line per comparison: the primary test (the exact trap-clustered sign-flip) with its raw p "
                   "and its Holm p within the comparison's registered family, the paired pass-rate difference "
                   "Δ = A − B with its trap-cluster bootstrap 95% CI, and \"publishable\" when every validity gate "
                   "that bears on the comparison passed — otherwise the failed gates that invalidate it, with their "
                   "numbers. The all_pairs family (every pair of the run set's conditions, Holm over all of them) is "
                   "secondary: never mixed into the primary family's Holm.")


def family_title(v: ComparisonVerdict) -> str:
    """"family primary (primary, 2 comparisons)"."""
    return f"family {v.family} ({v.role}, {v.family_size} comparison{'s' if v.family_size != 1 else ''})"


def grouped(report: Report) -> list[tuple[str, list[ComparisonVerdict]]]:
    """(heading, verdicts): the asked comparisons first (`requested`), then each family's in order."""
    out: list[tuple[str, list[ComparisonVerdict]]] = []
    if report.requested:
        out.append(("asked with --compare", list(report.requested)))
    for v in verdicts_of(report):
        title = family_title(v)
        if not out or out[-1][0] != title:
            out.append((title, []))
        out[-1][1].append(v)
    return out
