"""Failed validity gates and the comparisons each one invalidates, for the places a pass rate is
shown: the CLI's table (`membench.commands.terminal_display.print_table`), the top of report.md and report.html, and
the exit status of `--strict` (membench/commands/cli_helpers.py); each comparison's verdict line
(membench/reports/comparison_verdicts.py) names the ones that invalidate it. Read from the typed report
(`membench.reports.model.Report`, as built or as `from_json` reads a report.json back), so a report read back
from disk gives the same list; a key an older report lacks is a gate it does not judge.

What a failed gate invalidates, from DreamBench-SWE's definitions (docs/reports.md, "Failed gates"):

| gate | its definition | invalidates |
|---|---|---|
| `exclusions X` | App. C.6: "If exclusions exceed 5% for either side, P1 may be reported only as incomplete" | every comparison with X as a side |
| `paired_coverage X vs B` | App. C.6: "P1 requires at least 54 traps with at least two paired valid seeds" | X vs B |
| `exclusion_balance X vs B` | membench's: exclusions on one side remove cells from that comparison only | X vs B |
| `b0_headroom` overall | App. C.8 go/no-go: a final B0 S3 pass rate above 0.50 downgrades the fold to descriptive | every comparison |
| `b0_headroom` of a construct | Table 10: "C9 and C10 are invalid as anti-hoarding or abstention evidence" | that construct's stratum |
| `stratum_validity Cx` | §6.3, the strengthened stratum-validity gate | that construct's stratum |
| `warmup` | §5: below 0.80 "B0 S3 failures cannot all be interpreted cleanly as isolated memory failures"; at 0, the scoring harness or the agent did not work | every comparison |
| `continuation_audit` | App. C.3: sessions that did not start as designed are not the benchmark's cells | every comparison |

Not applied: the B0 gates (headroom, warm-up) when the run set has no B0 cells (there is no B0 to
measure), and every gate to a transfer study's report — EngramBench defines no validity gates, and
DreamBench's trap × seed grid does not describe its learning and transfer units. A failed gate whose
name this module does not know invalidates every comparison: unknown is never read as harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from membench.analytics.gates import Gate
from membench.reports.model import HeadroomGates, Report, StratumGate

EVERY_COMPARISON = "every comparison"


@dataclass(frozen=True)
class GateFailure:
    """One failed gate: its name, what was measured against what was required, and what it invalidates
    (comparison labels "A vs B", "construct C9's stratum", or `EVERY_COMPARISON`)."""

    gate: str
    measured: str
    invalidates: tuple[str, ...]

    def text(self) -> str:
        return f"{self.gate} {self.measured} — invalidates {', '.join(self.invalidates)}"

    def line(self) -> str:
        return f"GATE FAILED: {self.text()}"


def _pct(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{100 * value:.1f} %".replace(".0 %", " %")


def _ratio(g: Gate | None) -> str:
    return "None/None" if g is None else f"{g.numerator}/{g.denominator}"


def _measured(g: Gate | None) -> str:
    """"12.5 % > 5 % (9/72)": the value against the bound it breaks, or "not evaluated (0/0)"."""
    value = None if g is None else g.value
    if g is None or value is None:
        return f"not evaluated ({_ratio(g)})"
    threshold = g.threshold
    broken = {"max": ">", "min": "<", "above": "≤"}.get(str(g.direction), "vs")
    if isinstance(value, float) or isinstance(threshold, float):
        return f"{_pct(value)} {broken} {_pct(threshold)} ({_ratio(g)})"
    return f"{value} {broken} {threshold}"


def comparison_labels(report: Report) -> list[str]:
    """Every comparison the report makes, "A vs B": the comparisons against the baseline, then the
    registered families' (each once, in order)."""
    labels: dict[str, None] = {}
    for c in report.comparisons.comparisons:
        labels[f"{c.a} vs {c.b}"] = None
    for family in report.families.families if report.families is not None else []:
        for fc in family.comparisons:
            labels[f"{fc.a} vs {fc.b}"] = None
    return list(labels)


def _with(condition: str, comparisons: list[str]) -> tuple[str, ...]:
    """The comparisons with CONDITION as a side; none made: say so by the condition's name."""
    mine = tuple(label for label in comparisons if condition in label.split(" vs "))
    return mine or (f"every comparison with {condition}",)


def _stratum(construct: str) -> tuple[str, ...]:
    return (f"construct {construct}'s stratum in every comparison",)


def failed_gates(report: Report) -> list[GateFailure]:
    """The report's failed validity gates, in the order of its verdicts; empty when every gate
    passed, and for a transfer study."""
    gates = report.validity_gates
    if report.transfer is not None:
        return []
    comparisons = comparison_labels(report)
    conditions = {c.condition for c in report.conditions}
    reference = gates.reference or {}
    b0 = reference.get("b0_headroom", "B0")
    verdicts = gates.verdicts
    if verdicts is None:  # a report.json written before every gate had a verdict by name
        verdicts = {"b0_headroom": gates.b0_headroom.passed}
        verdicts.update({f"exclusions {c}": g.passed for c, g in gates.exclusions.items()})
        verdicts.update({f"paired_coverage {k}": g.passed for k, g in gates.paired_coverage.items()})
    out: list[GateFailure] = []
    for key, passed in verdicts.items():
        if passed:
            continue
        family, _, subject = key.partition(" ")
        if family == "b0_headroom":
            out += _headroom(gates.b0_headroom, b0)
        elif family == "exclusions":
            out.append(GateFailure(f"exclusions {subject}",
                                   _measured(gates.exclusions.get(subject)) + " of its cells without a valid outcome",
                                   _with(subject, comparisons)))
        elif family == "paired_coverage":
            g = gates.paired_coverage.get(subject)
            numerator, denominator, threshold = (None, None, None) if g is None else (g.numerator, g.denominator,
                                                                                     g.threshold)
            out.append(GateFailure(
                f"paired coverage {subject}",
                f"{numerator} of {denominator} units with ≥ 2 paired valid seeds < {threshold}",
                (subject,)))
        elif family == "exclusion_balance":
            bal = (gates.exclusion_balance or {}).get(subject)
            counts = (None, None, None, None) if bal is None else (bal.excluded, bal.cells, bal.baseline_excluded,
                                                                   bal.baseline_cells)
            out.append(GateFailure(
                f"exclusion balance {subject}",
                f"{counts[0]}/{counts[1]} excluded against {counts[2]}/{counts[3]} (the exclusion rates differ)",
                (subject,)))
        elif family == "stratum_validity":
            out.append(GateFailure(f"stratum validity {subject}",
                                   _stratum_measured((gates.stratum_validity or {}).get(subject), b0),
                                   _stratum(subject)))
        elif family == "warmup":
            if b0 not in conditions:  # a B0 gate without B0 cells: nothing it could judge
                continue
            warmup = gates.warmup
            value = None if warmup is None else warmup.value
            why = ("the scoring harness or the agent did not work" if value == 0 or value is None
                   else f"{b0}'s S3 failures are not only memory failures")
            out.append(GateFailure(f"{b0} warm-up S1+S2", f"{_measured(warmup)}: {why}", (EVERY_COMPARISON,)))
        elif family == "continuation_audit":
            out.append(GateFailure("continuation audit",
                                   f"{_ratio(gates.continuation_audit)} valid cells started as designed "
                                   "(required: all)", (EVERY_COMPARISON,)))
        else:
            out.append(GateFailure(key, "failed", (EVERY_COMPARISON,)))
    return out


def _stratum_measured(s: StratumGate | None, b0: str) -> str:
    """The clauses of a construct's stratum gate that failed (Table 10: best condition ≥ the floor,
    spread > 0, B0's rate)."""
    if s is None:
        return "failed"
    broken = []
    if not s.max_rate.passed:
        broken.append(f"best condition ({s.max_condition}) {_measured(s.max_rate)}")
    if not s.spread.passed:
        broken.append(f"spread between conditions {_pct(s.spread.value)} (required > 0)")
    if not s.b0_rate.passed:
        broken.append(f"{b0} {_measured(s.b0_rate)}")
    return "; ".join(broken) or "failed"


def _headroom(head: HeadroomGates, b0: str) -> list[GateFailure]:
    overall = head.overall
    if overall is None:  # no B0 cells at all: the gate has nothing to judge
        return []
    out = []
    if not overall.passed:
        out.append(GateFailure(f"{b0} headroom", _measured(overall) + f": {b0} passes too often to show a memory "
                               "effect", (EVERY_COMPARISON,)))
    gated = {**head.by_construct, **(head.reversed or {})}
    for construct in head.failing_constructs:
        g = gated.get(construct)
        reversed_ = g is not None and g.direction == "min"
        out.append(GateFailure(f"{b0} {'passes reversed' if reversed_ else 'headroom'} {construct}", _measured(g),
                               _stratum(construct)))
    return out


def failure_lines(report: Report) -> list[str]:
    return [f.line() for f in failed_gates(report)]
