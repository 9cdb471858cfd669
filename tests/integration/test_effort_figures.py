"""Cost and reliability beside the pass rate, as a user sees them on a real run (the session's shared
smoke run set: bubblewrap oracles, chDB): the CLI table and report.md show pass^k, tokens, USD and
wall time per cell and per pass, memory tokens and the agent's memory calls per session and passes
per memory call, with the values SQL over the warehouse gives."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.integration


def sql(home, query: str) -> list[dict]:
    out = run_cli("sql", query, "--format", "JSONEachRow", home=home, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def expected_figures(home, run_set: str) -> dict[str, dict]:
    """Per condition, straight from the tables (docs/tables.md): the valid cells of `scored_cells`
    with their `run_results` rows, pass^k over `scored_cells`, ModelCall events for USD."""
    rs = run_set.replace("'", "''")
    cells = sql(home, (
        "SELECT r.condition AS condition, count() AS cells, countIf(r.scored_passed) AS passes, "
        "sum(r.input_tokens + r.output_tokens) AS tokens, sum(r.duration_ms) AS ms, sum(r.sessions) AS sessions, "
        "sum(r.memory_tokens_admitted) AS memory "
        f"FROM (SELECT * FROM run_results WHERE run_set = '{rs}' LIMIT 1 BY run_id) AS r "
        f"WHERE r.run_id IN (SELECT run_id FROM scored_cells WHERE run_set = '{rs}' AND valid) "
        "GROUP BY r.condition ORDER BY r.condition"))
    k = sql(home, f"SELECT uniqExact(seed) AS k FROM scored_cells WHERE run_set = '{rs}'")[0]["k"]
    traps = sql(home, (
        "SELECT condition, countIf(valid_seeds = {k} AND passed_seeds = {k}) AS passed, "
        "countIf(valid_seeds = {k}) AS complete, count() AS traps FROM (SELECT condition, task, "
        "countIf(valid) AS valid_seeds, countIf(passed) AS passed_seeds FROM scored_cells "
        f"WHERE run_set = '{rs}' GROUP BY condition, task) GROUP BY condition").replace("{k}", str(k)))
    uses = sql(home, (
        "SELECT condition, sum(agent_memory_calls) AS agent_calls, sum(harness_reads) AS harness_reads "
        f"FROM (SELECT * FROM memory_uses WHERE run_set = '{rs}' LIMIT 1 BY run_id) "
        f"WHERE run_id IN (SELECT run_id FROM scored_cells WHERE run_set = '{rs}' AND valid) GROUP BY condition"))
    # every MemoryRead event of the valid cells, the harness's and the agent's (the unit id ends condition/seed)
    reads = sql(home, (
        "SELECT splitByChar('/', unit_id)[-2] AS condition, count() AS n FROM "
        f"(SELECT * FROM trajectory_events WHERE run_set = '{rs}' AND kind = 'MemoryRead' LIMIT 1 BY event_id) "
        f"WHERE run_id IN (SELECT run_id FROM scored_cells WHERE run_set = '{rs}' AND valid) GROUP BY condition"))
    calls = sql(home, f"SELECT count() AS n FROM trajectory_events WHERE run_set = '{rs}' AND kind = 'ModelCall'")
    out = {row["condition"]: {**row, "k": int(k), "model_calls": int(calls[0]["n"])} for row in cells}
    for row in uses:
        out[row["condition"]].update(agent_calls=int(row["agent_calls"]), harness_reads=int(row["harness_reads"]))
    for row in reads:
        out[row["condition"]]["memory_read_events"] = int(row["n"])
    for row in traps:
        out[row["condition"]].update(traps_passed=int(row["passed"]), complete=int(row["complete"]),
                                     traps=int(row["traps"]))
    return out


def test_cli_table_and_report_md_show_cost_and_reliability_as_the_warehouse_has_them(smoke_run_set):
    figures = expected_figures(smoke_run_set.home, smoke_run_set.run_set)
    assert set(figures) == {"B0", "B5"}
    md = (smoke_run_set.home / "runs" / smoke_run_set.run_set / "report.md").read_text(encoding="utf-8")
    report = json.loads((smoke_run_set.home / "runs" / smoke_run_set.run_set / "report.json").read_text())
    printed = smoke_run_set.stdout
    assert "cost and reliability" in printed and f"pass^k over k={figures['B0']['k']} seeds" in printed
    for condition, f in figures.items():
        cells, passes = int(f["cells"]), int(f["passes"])
        assert f["model_calls"] == 0  # scripted agents: no model, so no USD, shown as a dash
        tokens = (f"{int(f['tokens']) / cells:,.0f}", f"{int(f['tokens']) / passes:,.0f}" if passes else "—")
        wall = (f"{int(f['ms']) / 1000 / cells:,.1f}", f"{int(f['ms']) / 1000 / passes:,.1f}" if passes else "—")
        memory = f"{int(f['memory']) / int(f['sessions']):,.1f}"
        # scripted:memory-literal calls no memory tool: every MemoryRead is the harness's read before a session
        assert f["agent_calls"] == 0 and f["harness_reads"] == f.get("memory_read_events", 0)
        entry_effort = next(c for c in report["conditions"] if c["condition"] == condition)["effort"]
        assert (entry_effort["memory_calls"], entry_effort["memory_calls_per_session"],
                entry_effort["passes_per_memory_call"]) == (0, 0.0, None)
        calls = ("0.00", "—")
        rate = f"{100 * f['traps_passed'] / f['complete']:.1f}%"
        entry = next(c for c in report["conditions"] if c["condition"] == condition)
        md_row = (f"| {condition} | {100 * entry['pass_rate']:.1f}% | {rate} ({f['traps_passed']}/{f['complete']} traps, "
                  f"k={f['k']}) | {tokens[0]} | {tokens[1]} | — | — | {wall[0]} | {wall[1]} | {memory} | "
                  f"{calls[0]} | {calls[1]} |")
        assert md_row in md, md[md.index("## Cost and reliability"):][:900]
        cli_row = next(line for line in printed.splitlines()
                       if line.split()[:1] == [condition] and " / " in line)
        assert re.sub(r"\s+", " ", cli_row).strip() == (
            f"{condition} {rate} {f['traps_passed']}/{f['complete']} {tokens[0]} / {tokens[1]} — / — "
            f"{wall[0]} / {wall[1]} {memory}")
        # the memory-call figures: a CLI table of their own (one more column wraps an 80-column terminal)
        printed_calls = printed[printed.index("memory the agent called"):]
        calls_row = next(line for line in printed_calls.splitlines() if line.split()[:1] == [condition])
        assert re.sub(r"\s+", " ", calls_row).strip() == f"{condition} {calls[0]} {calls[1]}"
    # the memory condition reads memory into its prompt, the baseline does not
    assert int(figures["B5"]["memory"]) > 0 == int(figures["B0"]["memory"])
    # control: B5's harness reads are real MemoryRead events, which a count of every read would take for calls
    assert figures["B5"]["harness_reads"] == figures["B5"]["memory_read_events"] == int(figures["B5"]["sessions"]) > 0
    assert report["conditions"][0]["effort"]["cost_usd"] is None
