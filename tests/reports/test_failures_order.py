"""The failures section does not depend on the order the warehouse returns its rows.

chDB returns rows in the order it reads its parts, which depends on how the inserts were batched
and on background merges, so the report `membench run` wrote and the one `membench report` rebuilds
later may see the same rows in different orders. Before stop 36 the memory-contract status and
runtime-failure counts kept the order their keys were first met, so a rebuild could reorder them
and change report.json's bytes (the likely cause of a test_hygiene_pack failure at stop 36).
A stand-in reader isolates the section from chDB: it answers each query with the same rows, in
the order the test chooses."""

from __future__ import annotations

import json
from dataclasses import asdict
from itertools import permutations

from membench.reports.failures import failures_section
from membench.warehouse.read_model import WarehouseReadModel
from tests.warehouse.row_fixtures import full_row, typed_row

RUNS = [typed_row("run_results", run_id=f"r{i}", condition="B5") for i in range(3)]
CONTRACTS = [
    {"run_id": "r0", "session_index": 3, "memory_contract_status": "failed",
     "runtime_contract_failure_reason": "stale_memory_used", "memory_helped": False, "memory_hurt": True},
    {"run_id": "r1", "session_index": 3, "memory_contract_status": "passed",
     "runtime_contract_failure_reason": None, "memory_helped": True, "memory_hurt": False},
    {"run_id": "r2", "session_index": 3, "memory_contract_status": "failed",
     "runtime_contract_failure_reason": "memory_read_over_budget", "memory_helped": False, "memory_hurt": False},
]
FAILURES = [{"run_id": "r0", "failure_reason": "stale_memory_followed", "memory_failure": True},
            {"run_id": "r2", "failure_reason": "over_context_budget", "memory_failure": False}]


class Rows:
    """A warehouse reader that answers every query by the table it reads, with rows in a fixed order."""

    def __init__(self, order: tuple[int, ...]):
        self.order = order

    def query_dicts(self, sql: str, parameters=None) -> list[dict]:
        for table, rows in (("memory_contracts", CONTRACTS), ("failures", FAILURES)):
            if f"FROM {table} " in sql:
                return [full_row(table, **rows[i]) for i in self.order if i < len(rows)]
        return []


def test_the_same_rows_in_any_order_give_the_same_section() -> None:
    documents = {json.dumps(asdict(failures_section(WarehouseReadModel(Rows(order)), "rs", RUNS))) for order in permutations(range(3))}
    assert len(documents) == 1
    (document,) = documents
    contract = json.loads(document)["conditions"]["B5"]["memory_contract"]
    assert list(contract["status_counts"].items()) == [("failed", 2), ("passed", 1)]
    assert list(contract["runtime_failure_counts"]) == ["memory_read_over_budget", "stale_memory_used"]
