"""A run set as the SWE-bench harness's run summary (docs/exports/swebench.md).

The SWE-bench evaluation harness ends a run with one JSON summary (`make_run_report`, schema
version 2): counts `total_instances`, `submitted_instances`, `completed_instances`,
`resolved_instances`, `unresolved_instances`, `empty_patch_instances`, `error_instances` and the
sorted id lists `completed_ids`, `incomplete_ids`, `empty_patch_ids`, `submitted_ids`,
`resolved_ids`, `unresolved_ids`, `error_ids`. This module computes the same fields from the
warehouse, one summary per (condition, seed) of a run set, with the instance id being the unit's
task id (for an imported pack, the id of its task; for SWE-bench predictions, their `instance_id`).

Each unit started in a group is submitted, and falls in exactly one of these, checked in order:
1. error — a given patch (an `external` agent's: `membench score`) did not apply: the harness has no
   evaluation of a patch that does not apply;
2. empty patch — the scored session changed no file (the scored diff lists none), as the harness
   never evaluates an empty `model_patch`;
3. error — the unit has no valid cell: excluded (isolation, model unavailable, ...), an agent error,
   a timeout, an abandoned attempt, or no RunSummary at all;
4. resolved — its scored session passed; else unresolved.
Resolved and unresolved ids are the completed ids. `total_instances` counts the tasks the run set
started under any condition and seed (the warehouse knows no task a run set never started), and
`incomplete_ids` are those of them without a run in the group.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from membench.reports.conventions import condition_order, valid_run
from membench.warehouse import queries
from membench.warehouse.protocol import WarehouseReader

SCHEMA_VERSION = 2  # the harness's run-summary schema these fields follow
COUNT_FIELDS = ("total_instances", "submitted_instances", "completed_instances", "resolved_instances",
                "unresolved_instances", "empty_patch_instances", "error_instances")
ID_FIELDS = ("completed_ids", "incomplete_ids", "empty_patch_ids", "submitted_ids", "resolved_ids",
             "unresolved_ids", "error_ids")


class SwebenchExportError(LookupError):
    """A run set (or a condition or seed of it) the warehouse holds no run of."""


@dataclass(frozen=True)
class Instance:
    """One unit's outcome, in the harness's terms."""

    task: str
    condition: str
    seed: int
    agent: str
    status: str  # "resolved" | "unresolved" | "empty_patch" | "error"


def _started(warehouse: WarehouseReader, run_set: str) -> dict[str, dict[str, Any]]:
    """unit_id -> a RunStarted payload of it (task, condition, seed, agent, agent_kind: the same in
    every attempt of a unit)."""
    out: dict[str, dict[str, Any]] = {}
    for row in queries.unit_starts(warehouse, run_set):
        out.setdefault(row["unit_id"], json.loads(row["payload"]))
    return out


def instances(warehouse: WarehouseReader, run_set: str) -> list[Instance]:
    """Every unit the run set started, classified as the harness would (the module's docstring)."""
    started = _started(warehouse, run_set)
    runs = {row.unit_id: row for row in queries.run_results(warehouse, run_set)}
    patches = queries.scored_patch_counts(warehouse, run_set)
    out = []
    for unit_id in sorted(set(started) | set(runs)):
        row, begun = runs.get(unit_id), started.get(unit_id, {})
        task = row.task if row else begun.get("task", unit_id)
        condition = row.condition if row else begun.get("condition", "")
        seed = int(row.seed if row else begun.get("seed", 0))
        agent = row.agent if row else begun.get("agent", "")
        files, failed = patches.get(row.run_id, (None, 0)) if row else (None, 0)
        if failed and begun.get("agent_kind") == "external":
            status = "error"
        elif files == 0:
            status = "empty_patch"
        elif row is None or not valid_run(row):
            status = "error"
        else:
            status = "resolved" if row.scored_passed else "unresolved"
        out.append(Instance(task, condition, seed, agent, status))
    return out


def summary(group: list[Instance], all_tasks: set[str]) -> dict[str, Any]:
    """The harness's run summary of one (condition, seed) group; `all_tasks` is its dataset."""
    by_status: dict[str, set[str]] = defaultdict(set)
    for inst in group:
        by_status[inst.status].add(inst.task)
    submitted = {inst.task for inst in group}
    completed = by_status["resolved"] | by_status["unresolved"]
    return {
        "total_instances": len(all_tasks),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(by_status["resolved"]),
        "unresolved_instances": len(by_status["unresolved"]),
        "empty_patch_instances": len(by_status["empty_patch"]),
        "error_instances": len(by_status["error"]),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(all_tasks - submitted),
        "empty_patch_ids": sorted(by_status["empty_patch"]),
        "submitted_ids": sorted(submitted),
        "resolved_ids": sorted(by_status["resolved"]),
        "unresolved_ids": sorted(by_status["unresolved"]),
        "error_ids": sorted(by_status["error"]),
        "schema_version": SCHEMA_VERSION,
    }


def swebench_report(warehouse: WarehouseReader, run_set: str, condition: str | None = None,
                    seed: int | None = None) -> dict[str, Any]:
    """The run set's SWE-bench run summary (docs/exports/swebench.md).

    One (condition, seed) group — the run set has one, or `condition` and `seed` select one — gives
    the harness's summary itself, with a `membench` key naming run set, condition, seed and agent.
    Several give `{"run_set": ..., "reports": {KEY: summary, ...}}`, KEY being the condition when
    every condition ran one seed, else `CONDITION/SEED`; conditions in the report's order."""
    every = instances(warehouse, run_set)
    if not every:
        raise SwebenchExportError(f"run set '{run_set}' has no runs in the warehouse")
    all_tasks = {inst.task for inst in every}
    chosen = [i for i in every if (condition is None or i.condition == condition) and (seed is None or i.seed == seed)]
    if not chosen:
        present = sorted({f"{i.condition}/{i.seed}" for i in every})
        wanted = "/".join(str(x) for x in (condition, seed) if x is not None)
        raise SwebenchExportError(f"run set '{run_set}' has no runs of {wanted} (it has {', '.join(present)})")
    groups: dict[tuple[str, int], list[Instance]] = defaultdict(list)
    for inst in chosen:
        groups[(inst.condition, inst.seed)].append(inst)
    keys = sorted(groups, key=lambda k: (condition_order(k[0]), k[1]))

    def one(key: tuple[str, int]) -> dict[str, Any]:
        agents = sorted({i.agent for i in groups[key]})
        return {**summary(groups[key], all_tasks),
                "membench": {"run_set": run_set, "condition": key[0], "seed": key[1],
                             "agent": agents[0] if len(agents) == 1 else agents}}

    if len(keys) == 1:
        return one(keys[0])
    one_seed = len({c for c, _ in keys}) == len(keys)
    return {"run_set": run_set,
            "reports": {(c if one_seed else f"{c}/{s}"): one((c, s)) for c, s in keys}}
