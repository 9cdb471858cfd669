"""Report section: what the run set is made of — the trap × seed outcome matrix per condition, the
agent / model / code versions and seeds (from RunStarted), and USD cost (from ModelCall, event v4).

Top level:
- `outcome_matrix`: {"traps", "seeds", "conditions": condition -> trap -> seed -> `pass` | `fail` |
  the reason the cell is not valid}; cells are the base report's (`queries.run_results`: a unit's
  completed run when it has one).
- `provenance`: {"agents", "agent_kinds", "models", "code_digests", "pack_digests", "seeds",
  "conditions", "runs"}: distinct values over every RunStarted of the run set, attempts included;
  and `memory_policies`: condition -> {"policy": `model_free` | `model_driven`, "memory_model",
  "sleep_calls", "judge_calls", "input_tokens", "output_tokens", "cost_usd"} — a condition is
  model_driven when its RunStarted names a memory model (event v6), and the calls are its ModelCall
  events whose `purpose` is sleep or judge (docs/design.md §5).
- `cost_usd`: {"status", "model_calls", "priced_calls", "cost_usd", "conditions": condition ->
  {"model_calls", "priced_calls", "cost_usd", "successes", "cost_per_success_usd"}}: every ModelCall
  of the run set's runs, as the `model_usages` table sums them per run and purpose
  (membench/processors/model_usage.py) (the gateway records one per upstream call; a call is priced when its `price`
  names the price-table entry used — a model without one costs 0 with a null `price`); a call's
  condition is its unit's. Cost per success = the condition's USD over its
  passed valid cells (null without a pass or without a priced call).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from membench.reports.conventions import condition_order, exclusion_of, valid_run
from membench.reports.model import ConditionCost, CostUsd, MemoryPolicy, OutcomeMatrix, RunProvenance
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow


# the purposes of a memory model's calls (docs/design.md §5)
MEMORY_PURPOSES = ("sleep", "judge", "embed")


def _unit_condition(unit_id: str) -> str:
    """A unit's condition, the third part of its id (`suite/task/condition/seed`)."""
    parts = unit_id.split("/")
    return parts[-2] if len(parts) >= 2 else unit_id


def _seed_key(seed: str) -> tuple[int, int | str]:
    return (0, int(seed)) if seed.lstrip("-").isdigit() else (1, seed)


def outcome_matrix(runs: list[RunSummaryRow]) -> OutcomeMatrix:
    cells: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
    for r in runs:
        outcome = ("pass" if r.scored_passed else "fail") if valid_run(r) else str(exclusion_of(r))
        cells[r.condition][r.task][str(r.seed)] = outcome
    traps = sorted({r.task for r in runs})
    seeds = sorted({str(r.seed) for r in runs}, key=_seed_key)
    return OutcomeMatrix(traps=traps, seeds=seeds, conditions={
        c: {t: {s: cells[c][t][s] for s in seeds if s in cells[c][t]} for t in traps if t in cells[c]}
        for c in sorted(cells, key=condition_order)})


def run_provenance(reads: ReadModel, run_set: str) -> RunProvenance:
    starts = [start.payload for start in reads.run_started(run_set)]

    def distinct(key: str) -> list:
        return sorted({p[key] for p in starts if p.get(key) is not None})

    conditions = sorted({p["condition"] for p in starts}, key=condition_order)
    return RunProvenance(agents=distinct("agent"), agent_kinds=distinct("agent_kind"), models=distinct("model"),
                         code_digests=distinct("code_digest"), pack_digests=distinct("pack_digest"),
                         seeds=sorted({int(p["seed"]) for p in starts}), conditions=conditions, runs=len(starts),
                         memory_policies=memory_policies(reads, run_set, starts, conditions))


def memory_policies(reads: ReadModel, run_set: str, starts: list[dict[str, Any]],
                    conditions: list[str]) -> dict[str, MemoryPolicy]:
    """Per condition: model_free or model_driven (RunStarted.memory_model) and its sleep/judge calls."""
    models: dict[str, set[str]] = defaultdict(set)
    for p in starts:
        if p.get("memory_model"):
            models[p["condition"]].add(p["memory_model"])
    calls: dict[str, list] = defaultdict(lambda: [0, 0, 0, 0, 0.0])  # sleep, judge, input, output, usd
    for usage in reads.model_usage(run_set):  # by run: the float sums add in one order
        if usage.purpose not in MEMORY_PURPOSES:
            continue
        acc = calls[_unit_condition(usage.unit_id)]
        if usage.purpose != "embed":  # a library's embedding calls count in its tokens and cost, not its calls
            acc[0 if usage.purpose == "sleep" else 1] += usage.calls
        acc[2] += usage.input_tokens
        acc[3] += usage.output_tokens
        acc[4] += usage.priced_cost_usd
    out = {}
    for c in conditions:
        sleep, judge, n_in, n_out, usd = calls.get(c, [0, 0, 0, 0, 0.0])
        named = sorted(models.get(c, ()))
        out[c] = MemoryPolicy(policy="model_driven" if named else "model_free",
                              memory_model=", ".join(named) if named else None, sleep_calls=sleep, judge_calls=judge,
                              input_tokens=n_in, output_tokens=n_out, cost_usd=float(usd))
    return out


def cost_usd(reads: ReadModel, run_set: str, runs: list[RunSummaryRow]) -> CostUsd:
    """USD of every ModelCall of the run set, per condition (the condition is the unit id's third part)."""
    successes: dict[str, int] = defaultdict(int)
    for r in runs:
        if valid_run(r) and r.scored_passed:
            successes[r.condition] += 1
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for usage in reads.model_usage(run_set):
        acc = per[_unit_condition(usage.unit_id)]
        acc[0] += usage.calls
        acc[1] += usage.priced_calls
        acc[2] += usage.cost_usd
    conditions = {}
    for c in sorted(set(per) | {r.condition for r in runs}, key=condition_order):
        calls, priced, usd = per.get(c, [0, 0, 0.0])
        wins = successes.get(c, 0)
        conditions[c] = ConditionCost(model_calls=int(calls), priced_calls=int(priced), cost_usd=float(usd),
                                      successes=wins, cost_per_success_usd=usd / wins if wins and priced else None)
    all_calls = sum(int(v[0]) for v in per.values())
    all_priced = sum(int(v[1]) for v in per.values())
    status = "no_model_calls" if not all_calls else ("recorded" if all_priced else "unpriced")
    return CostUsd(status=status, model_calls=all_calls, priced_calls=all_priced,
                   cost_usd=float(sum(v[2] for v in per.values())), conditions=conditions)
