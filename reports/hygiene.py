"""Report section: the condition ladder, construct strata, the clean-start subset and the validity
gates of a memory-hygiene run set (DreamBench-SWE §6, Appendix C.6/C.8; DESIGN.md §8).

A cell is one unit's scored (S3) outcome, as in the base report (excluded cells are counted, never
imputed). Each unit's construct comes from its RunStarted event (`construct`, event schema v2); for
logs written before that field existed it is looked up in the pack whose digest RunStarted records
(MEMBENCH_HOME/packs and the built-in fixtures). The clean-start flag comes from the scored
session's SessionStarted (`start_state == "clean"`).

Per entry of `conditions`:
- `by_construct`: construct -> {cells, valid, passed, pass_rate, ci95};
- `clean_start` and `continuation`: the same over clean-start S3 units and inherited-state units.
Top level:
- `ladder`: conditions ordered by pass rate (best first) with their trap-cluster bootstrap CIs;
- `strata`: {"constructs": {construct: {"traps": n, "pass_rate": {condition: rate}}},
  "clean_start": {"traps": n, "pass_rate": {...}}, "continuation": {...}};
- `validity_gates`: `b0_headroom` (overall and per construct, threshold 0.50 maximum, 0.40
  preferred), `exclusions` (per condition, ≤ 5% of the design grid of traps × seeds), and
  `paired_coverage` (per memory condition against B0: traps with ≥ 2 paired valid seeds, required
  ≥ 90% of the traps — the paper's 54 of 60), each with numerator and denominator.

Intervals: trap-cluster percentile bootstrap, the base report's resample count and seed.
"""

from __future__ import annotations

import inspect
import json
import math
import os
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from reports.build import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, condition_order, register_markdown_section,
                              register_section)
from analytics.bootstrap import trap_cluster_bootstrap_ci
from analytics.cells import Cell, pair_cells
from analytics.gates import b0_headroom, exclusion_gates, paired_units_gate

BASELINE = "B0"
PREFERRED_HEADROOM = 0.40
MAX_HEADROOM = 0.50
MAX_EXCLUSION = 0.05
PAIRED_COVERAGE = 0.90


def _unit_facts(warehouse: Any, run_set: str) -> tuple[dict[str, str | None], dict[str, bool]]:
    """run_id -> construct, run_id -> clean-start S3."""
    constructs: dict[str, str | None] = {}
    digests: dict[str, tuple[str, str]] = {}
    for row in warehouse.query_dicts(
            "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'RunStarted' "
            "ORDER BY run_id LIMIT 1 BY run_id", {"rs": run_set}):
        payload = json.loads(row["payload"])
        constructs[row["run_id"]] = payload.get("construct")
        digests[row["run_id"]] = (payload.get("pack_digest", ""), payload.get("task", ""))
    missing = {run: digests[run] for run, c in constructs.items() if not c}
    if missing:
        labels = _labels_from_packs({d for d, _ in missing.values()})
        for run, (digest, task) in missing.items():
            constructs[run] = labels.get(digest, {}).get(task)
    clean: dict[str, bool] = {}
    for row in warehouse.query_dicts(
            "SELECT run_id, payload FROM trajectory_events WHERE run_set = {rs:String} AND kind = 'SessionStarted' "
            "ORDER BY run_id, seq LIMIT 1 BY event_id", {"rs": run_set}):
        payload = json.loads(row["payload"])
        if payload.get("scored"):
            clean[row["run_id"]] = payload.get("start_state") == "clean"
    return constructs, clean


def _labels_from_packs(digests: set[str]) -> dict[str, dict[str, str]]:
    """digest -> {seq_id: construct}, for packs found under MEMBENCH_HOME/packs or the fixtures."""
    from schemas.pack_format import pack_digest

    roots = [Path(os.environ.get("MEMBENCH_HOME", ".membench")) / "packs",
             Path(__file__).resolve().parent.parent / "fixtures"]
    out: dict[str, dict[str, str]] = {}
    for root in roots:
        for manifest in sorted(root.glob("*/manifest.json")) if root.is_dir() else []:
            digest = pack_digest(manifest.parent)
            if digest in digests:
                raw = json.loads(manifest.read_text(encoding="utf-8"))
                out[digest] = {s.get("seq_id"): s.get("construct") for s in raw.get("sequences", [])}
    return out


def _construct_sort(label: str) -> tuple[int, str]:
    return (int(label[1:]) if label[1:].isdigit() else 99, label)


def _summary(cells: list[Cell]) -> dict[str, Any]:
    valid = [c for c in cells if c.valid]
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for c in valid:
        outcomes[c.unit].append(bool(c.passed))
    ci = trap_cluster_bootstrap_ci(outcomes, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    passed = sum(1 for c in valid if c.passed)
    return {"cells": len(cells), "valid": len(valid), "passed": passed,
            "pass_rate": passed / len(valid) if valid else None, "ci95": [ci.low, ci.high]}


def _gate(gate: Any) -> dict[str, Any]:
    return asdict(gate)


def hygiene_section(warehouse: Any, run_set: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    constructs, clean = _unit_facts(warehouse, run_set)
    cells: list[Cell] = []
    clean_units: set[str] = set()
    for r in runs:
        valid = not r["excluded"] and r["status"] == "completed"
        cells.append(Cell(unit=r["task"], seed=r["seed"], condition=r["condition"], passed=bool(r["scored_passed"]),
                          valid=valid, construct=constructs.get(r["run_id"]),
                          exclusion=None if valid else (r.get("exclusion_reason") or r.get("error_type") or r["status"])))
        if clean.get(r["run_id"]):
            clean_units.add(r["task"])
    conditions = sorted({c.condition for c in cells}, key=condition_order)
    traps = sorted({c.unit for c in cells})
    seeds = sorted({c.seed for c in cells})
    trap_construct = {c.unit: c.construct for c in cells if c.construct}
    per_condition: dict[str, dict[str, Any]] = {}
    strata: dict[str, Any] = {"constructs": {}, "clean_start": {"traps": len(clean_units), "pass_rate": {}},
                              "continuation": {"traps": len(set(traps) - clean_units), "pass_rate": {}}}
    construct_labels = sorted({c for c in trap_construct.values()}, key=_construct_sort)
    for label in construct_labels:
        strata["constructs"][label] = {"traps": sum(1 for c in trap_construct.values() if c == label), "pass_rate": {}}
    ladder = []
    for condition in conditions:
        mine = [c for c in cells if c.condition == condition]
        by_construct = {label: _summary([c for c in mine if c.construct == label]) for label in construct_labels}
        clean_sum = _summary([c for c in mine if c.unit in clean_units])
        cont_sum = _summary([c for c in mine if c.unit not in clean_units])
        per_condition[condition] = {"by_construct": by_construct, "clean_start": clean_sum, "continuation": cont_sum}
        for label, s in by_construct.items():
            strata["constructs"][label]["pass_rate"][condition] = s["pass_rate"]
        strata["clean_start"]["pass_rate"][condition] = clean_sum["pass_rate"]
        strata["continuation"]["pass_rate"][condition] = cont_sum["pass_rate"]
        overall = _summary(mine)
        ladder.append({"condition": condition, "pass_rate": overall["pass_rate"], "ci95": overall["ci95"],
                       "passed": overall["passed"], "valid": overall["valid"]})
    ladder.sort(key=lambda e: (-(e["pass_rate"] if e["pass_rate"] is not None else -1), condition_order(e["condition"])))
    for rank, entry in enumerate(ladder, 1):
        entry["rank"] = rank
    gates: dict[str, Any] = {"baseline": BASELINE, "traps": len(traps), "seeds": len(seeds)}
    if any(c.condition == BASELINE for c in cells):
        headroom = b0_headroom(cells, baseline=BASELINE, threshold=MAX_HEADROOM)
        overall_rate = headroom.overall.value
        gates["b0_headroom"] = {
            "overall": {**_gate(headroom.overall),
                        "preferred_threshold": PREFERRED_HEADROOM,
                        "preferred_passed": overall_rate is not None and overall_rate <= PREFERRED_HEADROOM},
            "by_construct": {k: _gate(g) for k, g in headroom.by_construct.items()},
            "passed": headroom.passed,
            "failing_constructs": [k for k, g in headroom.by_construct.items() if not g.passed],
        }
    else:
        gates["b0_headroom"] = {"overall": None, "by_construct": {}, "passed": False,
                                "failing_constructs": [], "note": f"no {BASELINE} cells in this run set"}
    expected = len(traps) * len(seeds)
    accepts_expected = "expected_cells" in inspect.signature(exclusion_gates).parameters
    min_units = math.ceil(PAIRED_COVERAGE * len(traps))
    gates["exclusions"] = {}
    gates["paired_coverage"] = {}
    for condition in conditions:
        other = BASELINE if condition != BASELINE and any(c.condition == BASELINE for c in cells) else condition
        paired = pair_cells(cells, condition, other)
        kwargs = {"max_fraction": MAX_EXCLUSION}
        if accepts_expected:
            kwargs["expected_cells"] = max(expected, len(paired.grid))
        gates["exclusions"][condition] = _gate(exclusion_gates(paired, **kwargs)[0])
        gates["exclusions"][condition]["reasons"] = dict(sorted(
            _count(c.exclusion or "unknown" for c in cells if c.condition == condition and not c.valid).items()))
        if condition != other:
            gates["paired_coverage"][f"{condition} vs {other}"] = _gate(
                paired_units_gate(paired, min_units=min_units, min_paired_seeds=2))
    gates["passed"] = bool(gates["b0_headroom"]["passed"]) and all(g["passed"] for g in gates["exclusions"].values()) \
        and all(g["passed"] for g in gates["paired_coverage"].values())
    return {"conditions": per_condition,
            "top": {"ladder": ladder, "strata": strata, "validity_gates": gates}}


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for item in items:
        out[item] += 1
    return dict(out)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def render_hygiene_markdown(report: dict[str, Any]) -> str:
    """Markdown for the keys this section adds (append it to the base report's Markdown)."""
    if "ladder" not in report:
        return ""
    lines = ["", "## Ladder", "", "| rank | condition | passed/valid | pass rate | 95% CI |", "|---:|---|---:|---:|---|"]
    for e in report["ladder"]:
        low, high = e["ci95"]
        ci = "—" if low is None else f"[{_pct(low)}, {_pct(high)}]"
        lines.append(f"| {e['rank']} | {e['condition']} | {e['passed']}/{e['valid']} | {_pct(e['pass_rate'])} | {ci} |")
    strata = report["strata"]
    conditions = [e["condition"] for e in sorted(report["ladder"], key=lambda e: condition_order(e["condition"]))]
    lines += ["", "## Construct strata (descriptive)", "",
              "| stratum | traps | " + " | ".join(conditions) + " |", "|---|---:|" + "---:|" * len(conditions)]
    rows = [(label, s) for label, s in strata["constructs"].items()]
    rows += [("clean-start S3", strata["clean_start"]), ("continuation S3", strata["continuation"])]
    for label, s in rows:
        lines.append(f"| {label} | {s['traps']} | " + " | ".join(_pct(s["pass_rate"].get(c)) for c in conditions) + " |")
    gates = report["validity_gates"]
    head = gates["b0_headroom"]
    lines += ["", "## Validity gates", ""]
    if head.get("overall"):
        o = head["overall"]
        lines.append(f"- B0 headroom overall: {o['numerator']}/{o['denominator']} = {_pct(o['value'])} "
                     f"(≤ {_pct(o['threshold'])} required, ≤ {_pct(o['preferred_threshold'])} preferred): "
                     f"{'pass' if o['passed'] else 'FAIL'}")
        failing = head["failing_constructs"]
        lines.append("- B0 headroom per construct: " + ("pass in every construct" if not failing else
                     "FAIL in " + ", ".join(f"{k} ({head['by_construct'][k]['numerator']}/"
                                            f"{head['by_construct'][k]['denominator']})" for k in failing)))
    else:
        lines.append("- B0 headroom: not evaluable (no B0 cells)")
    for condition, g in gates["exclusions"].items():
        if not g["passed"] or g["numerator"]:
            lines.append(f"- exclusions {condition}: {g['numerator']}/{g['denominator']} "
                         f"({'pass' if g['passed'] else 'FAIL'}) {g.get('reasons') or ''}")
    if all(g["numerator"] == 0 for g in gates["exclusions"].values()):
        lines.append("- exclusions: none in any condition (≤ 5% required)")
    for name, g in gates["paired_coverage"].items():
        lines.append(f"- paired coverage {name}: {g['numerator']}/{g['denominator']} traps with ≥ 2 paired seeds "
                     f"(≥ {g['threshold']} required): {'pass' if g['passed'] else 'FAIL'}")
    return "\n".join(lines) + "\n"


register_section(hygiene_section)

# the ladder, strata and gates in report.md
register_markdown_section(render_hygiene_markdown)
