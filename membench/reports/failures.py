"""Report section: failure taxonomy, memory contract summary and the hygiene panel, per condition.

Per entry of `conditions`:
- `failure_counts`: failure_reason -> count over the condition's unresolved, non-excluded cells
  (the scored session of each unit's newest complete run);
- `memory_failure_counts`: the same restricted to memory-specific reasons, kept apart so memory
  failures are not mixed into ordinary coding failures;
- `memory_contract`: counts of `memory_contract_status` (passed / failed / not_applicable), of
  runtime contract failures by reason, and of memory_helped / memory_hurt, over the same cells;
  and `citations_without_memory`: the scored cells whose agent cited memory ids (the contract's
  `cited_memory_ids`, from the MemoryCitation events of the scored session) although its contract was `not_applicable` — a run without memory
  it learned from (B0, no_memory, curated_file, a scored label such as remem). As in the A/B
  benchmark such a run fails only as a task failure (membench/processors/failure.py), so its citations are
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

from membench.reports.model import ConditionFailures, MemoryContractSummary, Ratio
from membench.warehouse.read_model import ReadModel
from membench.warehouse.rows import RunSummaryRow


@dataclass(frozen=True)
class FailuresSection:
    conditions: dict[str, ConditionFailures]
    hygiene_by_construct: dict[str, dict[str, dict[str, Ratio]]]


def _rate(num: int, den: int) -> Ratio:
    return Ratio(numerator=num, denominator=den, rate=num / den if den else None)


def failures_section(reads: ReadModel, run_set: str, runs: list[RunSummaryRow]) -> FailuresSection:
    condition_of = {r.run_id: r.condition for r in runs}
    failures = [r for r in reads.scored_failures(run_set) if r.run_id in condition_of]
    contracts = [r for r in reads.scored_contracts(run_set) if r.run_id in condition_of]
    hygiene = [r for r in reads.scored_hygiene(run_set) if r.run_id in condition_of]

    out: dict[str, dict[str, Any]] = {}
    for condition in sorted(set(condition_of.values())):
        out[condition] = {"failure_counts": {}, "memory_failure_counts": {},
                          "memory_contract": {"status_counts": {}, "runtime_failure_counts": {},
                                              "memory_helped": 0, "memory_hurt": 0, "citations_without_memory": 0},
                          "hygiene": {}}
    for failure in failures:
        entry = out[condition_of[failure.run_id]]
        reason = failure.failure_reason
        entry["failure_counts"][reason] = entry["failure_counts"].get(reason, 0) + 1
        if failure.memory_failure:
            counts = entry["memory_failure_counts"]
            counts[reason] = counts.get(reason, 0) + 1
    for contract in contracts:
        summary = out[condition_of[contract.run_id]]["memory_contract"]
        status = contract.memory_contract_status
        summary["status_counts"][status] = summary["status_counts"].get(status, 0) + 1
        if contract.runtime_contract_failure_reason:
            reason = contract.runtime_contract_failure_reason
            summary["runtime_failure_counts"][reason] = summary["runtime_failure_counts"].get(reason, 0) + 1
        summary["memory_helped"] += int(bool(contract.memory_helped))
        summary["memory_hurt"] += int(bool(contract.memory_hurt))
        if status == "not_applicable" and contract.cited_memory_ids:
            summary["citations_without_memory"] += 1
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_construct: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for observation in hygiene:
        condition = condition_of[observation.run_id]
        for acc in (sums[(condition, observation.metric)],
                    by_construct[(condition, observation.construct or "", observation.metric)]):
            acc[0] += int(observation.numerator)
            acc[1] += int(observation.denominator)
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
