"""The report's exclusions by reason and exclusion-balance gate, read from an in-memory read
model: an agent that excludes its baseline cells (B0 excluded 3/3 on one trap, B5 none) fails the
gate in report.json, report.md and report.html; the same grid without the exclusions passes it."""

from __future__ import annotations

import json

import pytest

from membench.bus.emitter import RunEmitter
from membench.reports.model import Report, from_json, to_json
from tests.reports.test_html import render_html, render_markdown
from tests.reports.test_validity_gates_report import TRAPS, _grid, _report


def _excluded(task: str, condition: str, seed: int, reason: str) -> list:
    """A unit that crashed: RunStarted, then RunEnded{excluded, <reason>} (what a task exception leaves)."""
    emitted: list = []
    em = RunEmitter("rs", f"{task}-{condition}-{seed}", f"hyg/{task}/{condition}/{seed}", lambda e, d: emitted.append(e))
    em.emit("RunStarted", {"suite": "hyg", "task": task, "condition": condition, "seed": seed, "agent": "scripted:x",
                           "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                           "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1,
                           "construct": TRAPS[task], "family": "f"})
    em.emit("RunEnded", {"status": "excluded", "error_type": reason}, visibility="harness")
    return emitted


def _with_baseline_exclusions() -> list[list]:
    runs = [r for r in _grid() if not (r[0].payload["task"] == "c1-a" and r[0].payload["condition"] == "B0")]
    return runs + [_excluded("c1-a", "B0", seed, "task_exception") for seed in (1, 2)] \
        + [_excluded("c1-a", "B0", 3, "isolation_unavailable")]


def test_excluding_the_baselines_cells_fails_the_gate_in_every_rendering(tmp_path):
    report = _report(tmp_path, _with_baseline_exclusions())
    gates = report.validity_gates
    gate = gates.exclusion_balance["B5 vs B0"]
    assert (gate.excluded, gate.cells, gate.baseline_excluded, gate.baseline_cells) == (0, 9, 3, 9)
    assert gate.baseline_reasons == {"isolation_unavailable": 1, "task_exception": 2} and gate.reasons == {}
    assert gate.rule == "any_difference" and gate.p_value == pytest.approx(168 / 816)  # 2·C(9,3)/C(18,3)
    assert not gate.passed and gates.verdicts["exclusion_balance B5 vs B0"] is False and not gates.passed
    assert gates.exclusions["B0"].reasons == {"isolation_unavailable": 1, "task_exception": 2}

    data = json.loads(json.dumps(to_json(report)))
    assert from_json(Report, data) == report  # the key is part of the contract and reads back
    assert data["validity_gates"]["exclusion_balance"]["B5 vs B0"]["p_value"] == pytest.approx(gate.p_value)
    md = render_markdown(data)
    assert "## Exclusions by reason" in md
    assert "| condition | cells | excluded | rate | isolation_unavailable | task_exception |" in md
    assert "| B0 | 9 | 3 | 33.3% | 1 | 2 |" in md and "| B5 | 9 | 0 | 0.0% | 0 | 0 |" in md
    assert "- exclusion balance B5 vs B0: 0/9 (0.0%) vs 3/9 (33.3%)" in md and "FAIL: the rates differ" in md
    page = render_html(data)
    assert '<section id="exclusions">' in page and "exclusion balance" in page
    assert "<th>isolation_unavailable</th>" in page
    assert '<span class="fail">FAIL</span>' in page.split('<section id="exclusions">')[1].split("</section>")[0]


def test_control_the_same_grid_without_exclusions_passes_the_gate(tmp_path):
    report = _report(tmp_path, _grid())
    gate = report.validity_gates.exclusion_balance["B5 vs B0"]
    assert gate.passed and gate.rule == "no_exclusions" and report.validity_gates.passed
    md = render_markdown(json.loads(json.dumps(to_json(report))))
    assert "- exclusion balance B5 vs B0: 0/9 (0.0%) vs 0/9 (0.0%) — no exclusion on either side — pass" in md


def test_a_report_json_without_the_key_renders_without_the_section(tmp_path):
    data = json.loads(json.dumps(to_json(_report(tmp_path, _grid()))))
    del data["validity_gates"]["exclusion_balance"]
    assert "Exclusions by reason" not in render_markdown(data)
    assert '<section id="exclusions">' not in render_html(data)
