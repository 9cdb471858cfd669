"""`citations_without_memory` counts the scored cells whose contract is not_applicable although the
agent cited memory ids — read from the contract's `cited_memory_ids` (the fold's), not from raw
MemoryCitation events. A stand-in reader answers with full derived rows (no chDB needed)."""

from __future__ import annotations

from membench.reports.failures import failures_section
from membench.warehouse.read_model import WarehouseReadModel
from tests.warehouse.row_fixtures import full_row, typed_row

RUNS = [typed_row("run_results", run_id=f"r{i}", condition="B0") for i in range(3)]


class Contracts:
    def __init__(self, rows: list[dict]):
        self.rows = rows

    def query_dicts(self, sql: str, parameters=None) -> list[dict]:
        return [full_row("memory_contracts", **row) for row in self.rows] if "FROM memory_contracts " in sql else []


def counted(contracts: list[dict]) -> int:
    return failures_section(WarehouseReadModel(Contracts(contracts)), "rs", RUNS).conditions["B0"].memory_contract.citations_without_memory


def test_a_not_applicable_contract_with_cited_ids_counts_once():
    cited = {"run_id": "r0", "session_index": 2, "memory_contract_status": "not_applicable",
             "cited_memory_ids": ["m-1", "m-2"]}
    quiet = {"run_id": "r1", "session_index": 2, "memory_contract_status": "not_applicable"}
    applicable = {"run_id": "r2", "session_index": 2, "memory_contract_status": "passed", "cited_memory_ids": ["m-3"]}
    assert counted([cited, quiet, applicable]) == 1
    assert counted([quiet, applicable]) == 0  # control: without the citing cell nothing counts
