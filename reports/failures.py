"""Report section: failure taxonomy, memory contract summary and the hygiene panel, per condition.

Per entry of `conditions`:
- `failure_counts`: failure_reason -> count over the condition's unresolved, non-excluded cells
  (the scored session of each unit's newest complete run);
- `memory_failure_counts`: the same restricted to memory-specific reasons, kept apart so memory
  failures are not mixed into ordinary coding failures;
- `memory_contract`: counts of `memory_contract_status` (passed / failed / not_applicable), of
  runtime contract failures by reason, and of memory_helped / memory_hurt, over the same cells;
  and `citations_without_memory`: the scored cells whose agent cited memory ids (MemoryCitation
  events of the scored session) although its contract was `not_applicable` — a run without memory
  it learned from (B0, no_memory, curated_file, a scored label such as remem). As in the A/B
  benchmark such a run fails only as a task failure (processors/failure.py), so its citations are
  counted here instead of as `agent_hallucinated_memory`;
- `hygiene`: metric -> {numerator, denominator, rate} summed over the condition's scored sessions.
Top level `hygiene_by_construct`: condition -> construct -> metric -> {numerator, denominator, rate}.

Every number here is a plain aggregate of the derived tables, so `SELECT failure_reason, count()
FROM failures WHERE scored AND NOT resolved AND NOT excluded` over the same runs gives the same counts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from reports.model import ConditionFailures, MemoryContractSummary, Ratio
from warehouse.protocol import WarehouseReader


@dataclass(frozen=True)
class FailuresSection:
    conditions: dict[str, ConditionFailures]
    hygiene_by_construct: dict[str, dict[str, dict[str, Ratio]]]


def _by_run(rows: list[dict[str, Any]], runs: dict[str, str]) -> list[dict[str, Any]]:
    return [r for r in rows if r["run_id"] in runs]


def _rate(num: int, den: int) -> Ratio:
    return Ratio(numerator=num, denominator=den, rate=num / den if den else None)


def failures_section(warehouse: WarehouseReader, run_set: str, runs: list[dict[str, Any]]) -> FailuresSection:
    condition_of = {r["run_id"]: r["condition"] for r in runs}
    params = {"rs": run_set}
    failures = _by_run(warehouse.query_dicts(
        "SELECT run_id, failure_reason, memory_failure FROM failures WHERE run_set = {rs:String} AND scored "
        "AND NOT resolved AND NOT excluded LIMIT 1 BY run_id, session_index", params), condition_of)
    contracts = _by_run(warehouse.query_dicts(
        "SELECT run_id, session_index, memory_contract_status, runtime_contract_failure_reason, memory_helped, "
        "memory_hurt FROM memory_contracts WHERE run_set = {rs:String} AND scored LIMIT 1 BY run_id, session_index",
        params), condition_of)
    cited = {(r["run_id"], int(r["session_index"])) for r in warehouse.query_dicts(
        "SELECT DISTINCT run_id, session_index FROM trajectory_events WHERE run_set = {rs:String} "
        "AND kind = 'MemoryCitation' AND length(JSONExtractArrayRaw(payload, 'memory_ids')) > 0", params)}
    hygiene = _by_run(warehouse.query_dicts(
        "SELECT run_id, construct, metric, numerator, denominator FROM hygiene_observations "
        "WHERE run_set = {rs:String} AND scored LIMIT 1 BY derived_id", params), condition_of)

    out: dict[str, dict[str, Any]] = {}
    for condition in sorted(set(condition_of.values())):
        out[condition] = {"failure_counts": {}, "memory_failure_counts": {},
                          "memory_contract": {"status_counts": {}, "runtime_failure_counts": {},
                                              "memory_helped": 0, "memory_hurt": 0, "citations_without_memory": 0},
                          "hygiene": {}}
    for row in failures:
        entry = out[condition_of[row["run_id"]]]
        entry["failure_counts"][row["failure_reason"]] = entry["failure_counts"].get(row["failure_reason"], 0) + 1
        if row["memory_failure"]:
            counts = entry["memory_failure_counts"]
            counts[row["failure_reason"]] = counts.get(row["failure_reason"], 0) + 1
    for row in contracts:
        summary = out[condition_of[row["run_id"]]]["memory_contract"]
        status = row["memory_contract_status"]
        summary["status_counts"][status] = summary["status_counts"].get(status, 0) + 1
        if row["runtime_contract_failure_reason"]:
            reason = row["runtime_contract_failure_reason"]
            summary["runtime_failure_counts"][reason] = summary["runtime_failure_counts"].get(reason, 0) + 1
        summary["memory_helped"] += int(bool(row["memory_helped"]))
        summary["memory_hurt"] += int(bool(row["memory_hurt"]))
        if status == "not_applicable" and (row["run_id"], int(row["session_index"])) in cited:
            summary["citations_without_memory"] += 1
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_construct: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in hygiene:
        condition = condition_of[row["run_id"]]
        for acc in (sums[(condition, row["metric"])], by_construct[(condition, row["construct"] or "", row["metric"])]):
            acc[0] += int(row["numerator"])
            acc[1] += int(row["denominator"])
    for (condition, metric), (num, den) in sorted(sums.items()):
        out[condition]["hygiene"][metric] = _rate(num, den)
    constructs: dict[str, dict[str, dict[str, Ratio]]] = defaultdict(dict)
    for (condition, construct, metric), (num, den) in sorted(by_construct.items()):
        constructs[condition].setdefault(construct, {})[metric] = _rate(num, den)
    # every count in key order, and only integer sums above: the rows come in whatever order the
    # warehouse reads its parts (batching and merges change it), and the report must not
    for entry in out.values():
        for key in ("failure_counts", "memory_failure_counts"):
            entry[key] = dict(sorted(entry[key].items()))
        for key in ("status_counts", "runtime_failure_counts"):
            entry["memory_contract"][key] = dict(sorted(entry["memory_contract"][key].items()))
    return FailuresSection(
        conditions={condition: ConditionFailures(
            failure_counts=entry["failure_counts"], memory_failure_counts=entry["memory_failure_counts"],
            memory_contract=MemoryContractSummary(**entry["memory_contract"]), hygiene=entry["hygiene"])
            for condition, entry in out.items()},
        hygiene_by_construct=dict(constructs))
