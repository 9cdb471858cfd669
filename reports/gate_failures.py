"""Failed validity gates and the comparisons each one invalidates, for the places a pass rate is
shown: the CLI's table (`membench.commands.terminal_display.print_table`), the top of report.md and report.html, and
the exit status of `--strict` (membench/commands/cli_helpers.py); each comparison's verdict line
(reports/comparison_verdicts.py) names the ones that invalidate it. Read from the JSON form of a report
(`report.json`), so a report read back from disk gives the same list; a key an older report lacks
is a gate it does not judge.

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


def _ratio(g: dict[str, Any]) -> str:
    return f"{g.get('numerator')}/{g.get('denominator')}"


def _measured(g: dict[str, Any]) -> str:
    """"12.5 % > 5 % (9/72)": the value against the bound it breaks, or "not evaluated (0/0)"."""
    value = g.get("value")
    if value is None:
        return f"not evaluated ({_ratio(g)})"
    threshold = g.get("threshold")
    broken = {"max": ">", "min": "<", "above": "≤"}.get(str(g.get("direction")), "vs")
    if isinstance(value, float) or isinstance(threshold, float):
        return f"{_pct(value)} {broken} {_pct(threshold)} ({_ratio(g)})"
    return f"{value} {broken} {threshold}"


def comparison_labels(report: dict[str, Any]) -> list[str]:
    """Every comparison the report makes, "A vs B": the comparisons against the baseline, then the
    registered families' (each once, in order)."""
    labels: dict[str, None] = {}
    for c in (report.get("comparisons") or {}).get("comparisons") or []:
        labels[f"{c['a']} vs {c['b']}"] = None
    for family in (report.get("families") or {}).get("families") or []:
        for c in family.get("comparisons") or []:
            labels[f"{c['a']} vs {c['b']}"] = None
    return list(labels)


def _with(condition: str, comparisons: list[str]) -> tuple[str, ...]:
    """The comparisons with CONDITION as a side; none made: say so by the condition's name."""
    mine = tuple(label for label in comparisons if condition in label.split(" vs "))
    return mine or (f"every comparison with {condition}",)


def _stratum(construct: str) -> tuple[str, ...]:
    return (f"construct {construct}'s stratum in every comparison",)


def failed_gates(report: dict[str, Any]) -> list[GateFailure]:
    """The report's failed validity gates (the JSON form, `report.json`), in the order of its
    verdicts; empty when every gate passed, for a report without gates, and for a transfer study."""
    gates = report.get("validity_gates")
    if not gates or report.get("transfer") is not None:
        return []
    comparisons = comparison_labels(report)
    conditions = {c["condition"] for c in report.get("conditions") or []}
    reference = gates.get("reference") or {}
    b0 = reference.get("b0_headroom", "B0")
    verdicts = gates.get("verdicts")
    if verdicts is None:  # a report.json written before every gate had a verdict by name
        verdicts = {"b0_headroom": (gates.get("b0_headroom") or {}).get("passed", True)}
        verdicts.update({f"exclusions {c}": g["passed"] for c, g in (gates.get("exclusions") or {}).items()})
        verdicts.update({f"paired_coverage {k}": g["passed"] for k, g in (gates.get("paired_coverage") or {}).items()})
    out: list[GateFailure] = []
    for key, passed in verdicts.items():
        if passed:
            continue
        family, _, subject = key.partition(" ")
        if family == "b0_headroom":
            out += _headroom(gates.get("b0_headroom") or {}, b0)
        elif family == "exclusions":
            g = (gates.get("exclusions") or {}).get(subject) or {}
            out.append(GateFailure(f"exclusions {subject}", _measured(g) + " of its cells without a valid outcome",
                                   _with(subject, comparisons)))
        elif family == "paired_coverage":
            g = (gates.get("paired_coverage") or {}).get(subject) or {}
            out.append(GateFailure(
                f"paired coverage {subject}",
                f"{g.get('numerator')} of {g.get('denominator')} units with ≥ 2 paired valid seeds < {g.get('threshold')}",
                (subject,)))
        elif family == "exclusion_balance":
            g = (gates.get("exclusion_balance") or {}).get(subject) or {}
            out.append(GateFailure(
                f"exclusion balance {subject}",
                f"{g.get('excluded')}/{g.get('cells')} excluded against {g.get('baseline_excluded')}/"
                f"{g.get('baseline_cells')} (the exclusion rates differ)", (subject,)))
        elif family == "stratum_validity":
            out.append(GateFailure(f"stratum validity {subject}",
                                   _stratum_measured((gates.get("stratum_validity") or {}).get(subject) or {}, b0),
                                   _stratum(subject)))
        elif family == "warmup":
            if b0 not in conditions:  # a B0 gate without B0 cells: nothing it could judge
                continue
            g = gates.get("warmup") or {}
            why = ("the scoring harness or the agent did not work" if g.get("value") == 0 or g.get("value") is None
                   else f"{b0}'s S3 failures are not only memory failures")
            out.append(GateFailure(f"{b0} warm-up S1+S2", f"{_measured(g)}: {why}", (EVERY_COMPARISON,)))
        elif family == "continuation_audit":
            g = gates.get("continuation_audit") or {}
            out.append(GateFailure("continuation audit",
                                   f"{_ratio(g)} valid cells started as designed (required: all)",
                                   (EVERY_COMPARISON,)))
        else:
            out.append(GateFailure(key, "failed", (EVERY_COMPARISON,)))
    return out


def _stratum_measured(s: dict[str, Any], b0: str) -> str:
    """The clauses of a construct's stratum gate that failed (Table 10: best condition ≥ the floor,
    spread > 0, B0's rate)."""
    broken = []
    best, spread, base = (s[part] if isinstance(s.get(part), dict) else {} for part in
                          ("max_rate", "spread", "b0_rate"))
    if best and not best.get("passed"):
        broken.append(f"best condition ({s.get('max_condition')}) {_measured(best)}")
    if spread and not spread.get("passed"):
        broken.append(f"spread between conditions {_pct(spread.get('value'))} (required > 0)")
    if base and not base.get("passed"):
        broken.append(f"{b0} {_measured(base)}")
    return "; ".join(broken) or "failed"


def _headroom(head: dict[str, Any], b0: str) -> list[GateFailure]:
    overall = head.get("overall")
    if overall is None:  # no B0 cells at all: the gate has nothing to judge
        return []
    out = []
    if not overall.get("passed"):
        out.append(GateFailure(f"{b0} headroom", _measured(overall) + f": {b0} passes too often to show a memory "
                               "effect", (EVERY_COMPARISON,)))
    gated = {**(head.get("by_construct") or {}), **(head.get("reversed") or {})}
    for construct in head.get("failing_constructs") or []:
        g = gated.get(construct) or {}
        reversed_ = g.get("direction") == "min"
        out.append(GateFailure(f"{b0} {'passes reversed' if reversed_ else 'headroom'} {construct}", _measured(g),
                               _stratum(construct)))
    return out


def failure_lines(report: dict[str, Any]) -> list[str]:
    return [f.line() for f in failed_gates(report)]
