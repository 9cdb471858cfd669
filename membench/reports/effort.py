"""Report figures beside each condition's pass rate: what its cells cost and how reliably it passes.

Both read the base report's cells (`queries.run_results`: one row per unit) and cover a condition's
valid cells (completed, not excluded), the pass rate's denominator:

- `effort`: tokens (run_results input + output: the agent's turns or model calls and a
  model-driven memory's own sleep/judge calls, a simulated user's left out), USD (every ModelCall
  of the cells' runs: `queries.run_model_costs`; null when no call was priced) and
  wall time (`duration_ms`), each as total, per valid cell and per pass (total / passed cells, the
  failed cells' spend included: `membench.analytics.resources.per_cell_and_pass`); and the memory tokens
  read, the sum of the cells' MemoryRead `tokens_admitted` (`memory_tokens_admitted`) over all
  their sessions (warm-up and history sessions included), per session; and what the agent called
  memory for: `memory_calls`, the agent's memory tool calls over the cells' sessions (the MemoryUse
  fold's `agent_memory_calls`, membench/processors/memory_use.py: every MemoryRead but the harness's read
  before each session), `memory_calls_per_session` = memory_calls / sessions and
  `passes_per_memory_call` = passed cells / memory_calls (null with no call: a condition whose agent
  never called memory has no such rate; a low one marks an agent that calls memory for nothing).
  The memory figures are null when a cell's run has no MemoryUse row (a warehouse an older
  membench wrote: `membench rederive` adds them).
- `pass_hat_k`: `membench.analytics.reliability.pass_hat_k` over the condition's cells with k = the run
  set's seeds: a trap counts when it has a valid cell under every seed, and passes when every one
  of them passed.
"""

from __future__ import annotations

from collections import defaultdict

from membench.analytics.reliability import pass_hat_k
from membench.analytics.resources import per_cell_and_pass
from membench.reports.conventions import valid_run
from membench.reports.model import ConditionEffort, ConditionSummary, PassHatK, PerCellAndPass, Report, shallow_fields
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow


def condition_efforts(runs: list[RunSummaryRow], costs: dict[str, tuple[int, float]],
                      memory_calls: dict[str, int] | None = None) -> dict[str, ConditionEffort]:
    """condition -> its effort over RUNS' valid cells; COSTS is `queries.run_model_costs`, MEMORY_CALLS
    run_id -> the agent's memory tool calls (`agent_memory_calls` of `queries.memory_uses`)."""
    memory_calls = memory_calls or {}
    by_condition: dict[str, list[RunSummaryRow]] = defaultdict(list)
    for r in runs:
        by_condition[r.condition].append(r)
    out = {}
    for condition, rows in by_condition.items():
        valid = [r for r in rows if valid_run(r)]
        cells, passes = len(valid), sum(1 for r in valid if r.scored_passed)
        tokens = sum(r.input_tokens + r.output_tokens for r in valid)
        wall = sum(r.duration_ms for r in valid) / 1000
        priced = sum(costs.get(r.run_id, (0, 0.0))[0] for r in valid)
        usd = sum(costs.get(r.run_id, (0, 0.0))[1] for r in sorted(valid, key=lambda r: r.run_id))
        sessions = sum(r.sessions for r in valid)
        memory = sum(r.memory_tokens_admitted for r in valid)
        calls = (sum(memory_calls[r.run_id] for r in valid)
                 if all(r.run_id in memory_calls for r in valid) else None)

        def spread(total: float) -> PerCellAndPass:
            return PerCellAndPass(**shallow_fields(per_cell_and_pass(total, cells, passes)))

        out[condition] = ConditionEffort(
            cells=cells, passes=passes, sessions=sessions, tokens=spread(float(tokens)),
            cost_usd=spread(float(usd)) if priced else None, priced_calls=priced, wall_time_s=spread(wall),
            memory_tokens_read=memory, memory_tokens_per_session=memory / sessions if sessions else None,
            memory_calls=calls, memory_calls_per_session=calls / sessions if calls is not None and sessions else None,
            passes_per_memory_call=passes / calls if calls else None)
    return out


def condition_pass_hat_k(runs: list[RunSummaryRow]) -> dict[str, PassHatK]:
    """condition -> pass^k over its cells, k = every seed of the run set (all conditions')."""
    seeds = sorted({str(r.seed) for r in runs})
    cells: dict[str, list[tuple[str, str, bool | None]]] = defaultdict(list)
    for r in runs:
        cells[r.condition].append((r.task, str(r.seed), bool(r.scored_passed) if valid_run(r) else None))
    return {c: PassHatK(**shallow_fields(pass_hat_k(mine, seeds))) for c, mine in cells.items()}


def effort_section(reads: ReadModel, run_set: str,
                   runs: list[RunSummaryRow]) -> tuple[dict[str, ConditionEffort], dict[str, PassHatK]]:
    calls = {u.run_id: u.agent_memory_calls for u in reads.memory_uses(run_set)}
    return condition_efforts(runs, reads.run_model_costs(run_set), calls), condition_pass_hat_k(runs)


# ------------------------------------------------------------------------------------- renderings

# the columns report.md and report.html show, in order; the CLI pairs each per-cell figure with its
# per-pass one in a column (CLI_EFFORT_COLUMNS) so the table fits a terminal
EFFORT_COLUMNS = ("condition", "pass rate", "pass^k", "tokens / cell", "tokens / pass", "USD / cell", "USD / pass",
                  "wall s / cell", "wall s / pass", "memory tokens / session", "memory calls / session",
                  "passes / memory call")
CLI_EFFORT_COLUMNS = ("condition", "pass^k", "tokens cell / pass", "USD cell / pass", "wall s cell / pass",
                      "memory tokens / session")
# the CLI prints the memory-call figures as a table of their own: one more column wraps an 80-column terminal
CLI_MEMORY_CALL_COLUMNS = ("condition", "memory calls / session", "passes / memory call")


def _number(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _usd(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def pass_hat_k_text(p: PassHatK | None, short: bool = False) -> str:
    """"50.0% (2/4 traps, k=2)", with the traps left out for a missing or excluded seed; SHORT:
    "50.0% 2/4" (and "+1 incomplete")."""
    if p is None:
        return "—"
    rate = "—" if p.value is None else f"{100 * p.value:.1f}%"
    if short:
        return f"{rate} {p.passed}/{p.complete}" + (f" +{p.incomplete} incomplete" if p.incomplete else "")
    left_out = f", {p.incomplete} incomplete" if p.incomplete else ""
    return f"{rate} ({p.passed}/{p.complete} traps, k={p.k}{left_out})"


def effort_row(entry: ConditionSummary, cli: bool = False) -> list[str] | None:
    """A condition's row of EFFORT_COLUMNS (CLI: CLI_EFFORT_COLUMNS) from its entry (`Report.conditions`);
    None for a report written before the figures existed."""
    e = entry.effort
    if e is None:
        return None
    tokens = (_number(e.tokens.per_cell), _number(e.tokens.per_pass))
    usd = e.cost_usd
    dollars = (_usd(None if usd is None else usd.per_cell), _usd(None if usd is None else usd.per_pass))
    wall = (_number(e.wall_time_s.per_cell, 1), _number(e.wall_time_s.per_pass, 1))
    memory = _number(e.memory_tokens_per_session, 1)
    calls = _memory_call_figures(e)
    reliability = pass_hat_k_text(entry.pass_hat_k, short=cli)
    if cli:
        return [entry.condition, reliability, " / ".join(tokens), " / ".join(dollars), " / ".join(wall), memory]
    rate = "—" if entry.pass_rate is None else f"{100 * entry.pass_rate:.1f}%"
    return [entry.condition, rate, reliability, *tokens, *dollars, *wall, memory, *calls]


def _memory_call_figures(e: ConditionEffort) -> tuple[str, str]:
    # a report written before the memory-call figures has them as None: shown as unknown
    return _number(e.memory_calls_per_session, 2), _number(e.passes_per_memory_call, 2)


def memory_call_row(entry: ConditionSummary) -> list[str] | None:
    """A condition's row of CLI_MEMORY_CALL_COLUMNS from its entry; None without the figures."""
    e = entry.effort
    return None if e is None else [entry.condition, *_memory_call_figures(e)]


EFFORT_LEGEND = ("Over each condition's valid cells: tokens are input + output of the agent's and the memory model's calls; USD is every "
                 "ModelCall of the cells' runs, the memory model's included (— when no call was priced, as "
                 "for scripted agents); wall time is the run's; per pass = the total over all valid cells, "
                 "failed ones included, / passed cells (— with no pass). Memory tokens / session = tokens "
                 "memory reads admitted (the harness's before each session and the agent's memory tool calls) / sessions. Memory "
                 "calls / session = memory tools the agent called (search, get, an MCP memory server's read tools; "
                 "the harness's read before each session left out) / sessions; passes / memory call = passed cells / "
                 "those calls (— when the agent made none). pass^k = traps passed under every one of "
                 "the run set's k seeds / traps with a valid cell under every seed (a trap with a missing or "
                 "excluded seed is left out and counted as incomplete).")


def effort_markdown(report: Report) -> str:
    """report.md's "Cost and reliability" part ("" for a report without the figures)."""
    rows = [row for row in (effort_row(c) for c in report.conditions) if row is not None]
    if not rows:
        return ""
    lines = ["## Cost and reliability", "", "| " + " | ".join(EFFORT_COLUMNS) + " |",
             "|---|" + "---:|" * (len(EFFORT_COLUMNS) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines + ["", EFFORT_LEGEND]) + "\n"
