"""Reports of a run set, rebuilt from the warehouse (JSON is the contract; Markdown for people).

`report.json` keys (later versions add keys, never rename): `run_set`, `suite`, `agent`,
`conditions` (each: `condition`, `cells`, `passed`, `pass_rate`, `ci95` [low, high], `excluded`,
`bootstrap` {resamples, seed, level}), `inputs` (`events`, `pack_digest`).

A cell is one unit's scored (last) session: passed or not, or excluded (isolation unavailable,
harness error). `cells` counts every cell, `excluded` those not scored; `pass_rate` is
passed / (cells - excluded), and `ci95` its trap-cluster percentile bootstrap interval.

Section modules (SECTION_MODULES) add keys: failure counts and the hygiene panel
(`report_failures`), the ladder's strata and validity gates (`report_hygiene`), `comparisons`
and `resources` (`report_comparisons`). docs/reports.md lists them all.
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from warehouse import queries
from analytics.bootstrap import trap_cluster_bootstrap_ci

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260101


class ReportError(LookupError):
    pass


# Report sections: each is f(warehouse, run_set, runs) -> {"conditions": {condition: {key: value}},
# "top": {key: value}}, merged into the report. Modules that add report content (failure taxonomy,
# hygiene panel, ladder and validity gates) register here instead of editing build_report.
ReportSection = Callable[[Any, str, list[dict[str, Any]]], dict[str, Any]]
SECTIONS: list[ReportSection] = []


# Modules that register sections when imported (a module not built yet is skipped).
SECTION_MODULES = ["reports.failures", "reports.hygiene", "reports.comparisons"]


def register_section(section: ReportSection) -> ReportSection:
    SECTIONS.append(section)
    return section


# Markdown renderers of the sections' keys: f(report) -> Markdown text appended to report.md.
MARKDOWN_SECTIONS: list[Callable[[dict[str, Any]], str]] = []


def register_markdown_section(render: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], str]:
    MARKDOWN_SECTIONS.append(render)
    return render


def _load_sections() -> None:
    for name in SECTION_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


def condition_order(condition: str) -> tuple[int, str]:
    return (0, condition) if condition.startswith("B") else (1, condition)


def build_report(warehouse: Any, run_set: str) -> dict[str, Any]:
    runs = queries.run_results(warehouse, run_set)
    if not runs:
        raise ReportError(f"run set '{run_set}' has no completed runs in the warehouse")
    by_condition: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in runs:
        by_condition[row["condition"]].append(row)
    conditions = []
    for condition in sorted(by_condition, key=condition_order):
        rows = by_condition[condition]
        valid = [r for r in rows if not r["excluded"] and r["status"] == "completed"]
        outcomes: dict[str, list[bool]] = defaultdict(list)
        for r in valid:
            outcomes[r["task"]].append(bool(r["scored_passed"]))
        ci = trap_cluster_bootstrap_ci(outcomes, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
        passed = sum(1 for r in valid if r["scored_passed"])
        conditions.append({
            "condition": condition,
            "cells": len(rows),
            "passed": passed,
            "pass_rate": passed / len(valid) if valid else None,
            "ci95": [ci.low, ci.high],
            "excluded": len(rows) - len(valid),
            "bootstrap": {"resamples": ci.resamples, "seed": ci.seed, "level": ci.level},
        })
    _load_sections()
    report_extra: dict[str, Any] = {}
    for section in SECTIONS:
        added = section(warehouse, run_set, runs)
        for entry in conditions:
            entry.update(added.get("conditions", {}).get(entry["condition"], {}))
        report_extra.update(added.get("top", {}))
    digests = sorted({json.loads(r["payload"])["pack_digest"] for r in queries.run_started(warehouse, run_set)})
    return {
        "run_set": run_set,
        "suite": runs[0]["suite"],
        "agent": runs[0]["agent"],
        "conditions": conditions,
        "inputs": {"events": queries.event_count(warehouse, run_set),
                   "pack_digest": digests[0] if len(digests) == 1 else digests},
        **report_extra,
    }


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def render_markdown(report: dict[str, Any]) -> str:
    agent = report["agent"]
    lines = [
        f"# membench report — {report['run_set']}",
        "",
        f"- suite: `{report['suite']}`",
        f"- agent: `{agent}`" + (" (scripted reference agent, not a model)" if agent.startswith("scripted:") else ""),
        f"- raw events: {report['inputs']['events']}",
        f"- pack digest: `{report['inputs']['pack_digest']}`",
        "",
        "| condition | cells | passed | pass rate | 95% CI | excluded |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for c in report["conditions"]:
        low, high = c["ci95"]
        ci = "—" if low is None else f"[{_pct(low)}, {_pct(high)}]"
        lines.append(f"| {c['condition']} | {c['cells']} | {c['passed']} | {_pct(c['pass_rate'])} | {ci} | {c['excluded']} |")
    boot = report["conditions"][0]["bootstrap"] if report["conditions"] else {}
    lines += ["", f"CIs: trap-cluster percentile bootstrap, {boot.get('resamples')} resamples, seed {boot.get('seed')}."]
    family = report.get("comparisons") or {}
    if family.get("comparisons"):
        def p4(value: float | None) -> str:
            return "—" if value is None else f"{value:.4g}"

        lines += ["", f"## Comparisons vs {family['baseline']}", "",
                  "| A | B | D | A-only passes | B-only passes | units | paired cells | p clustered | p McNemar "
                  "| p majority | p per seed | p Holm |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
        for c in family["comparisons"]:
            per_seed = ", ".join(f"{seed}: {p4(p)}" for seed, p in c["p_per_seed"].items()) or "—"
            lines.append(f"| {c['a']} | {c['b']} | {c['D']} | {c['discordant_a']} | {c['discordant_b']} | {c['units']} "
                         f"| {c['paired_cells']} | {p4(c['p_clustered'])} | {p4(c['p_mcnemar'])} "
                         f"| {p4(c['p_majority'])} | {per_seed} | {p4(c['p_holm'])} |")
        lines += ["", f"Exact trap-clustered sign-flip test (D = Σ d_t); p Holm: Holm over the registered family of "
                      f"{family['family_size']} (α = {family.get('alpha', 0.05)})."]
    _load_sections()
    for render in MARKDOWN_SECTIONS:
        text = render(report)
        if text:
            lines += ["", text.rstrip()]
    return "\n".join(lines) + "\n"
