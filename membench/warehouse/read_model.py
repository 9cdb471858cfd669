"""The read model: every read a report makes, as one interface (`ReadModel`), and its warehouse
implementation (`WarehouseReadModel`).

The reports (membench/reports/) and the full report's inputs (membench/pipeline/report_inputs.py)
read every figure through a `ReadModel`: the methods are the typed reads of
`membench.warehouse.queries` of the same names and return types, without the warehouse argument —
the derived tables' rows as `membench.warehouse.rows` types, the raw-event reads' as
`membench.warehouse.raw_rows` types, never a dict a report would index by name.
Two implementations hold them:

- `WarehouseReadModel`, over a ClickHouse warehouse (chDB or a server): each method calls the
  `queries` function of its name, so the SQL stays in queries.py, the only product SQL;
- `membench.warehouse.memory_read_model.InMemoryReadModel`, fed with the raw events and the
  processors' derived events themselves, no engine: a test whose subject is the report, not the
  warehouse, builds its input there. Each of its methods mirrors its SQL's semantics in Python, and
  a parity test (tests/integration/test_read_model_parity.py) holds the two together: the reports of
  real run sets, and every read one by one, are the same from either.
"""

from __future__ import annotations

from typing import Protocol

from membench.warehouse import queries, rows
from membench.warehouse.protocol import WarehouseReader
from membench.warehouse.raw_rows import AgentVisibleHit, RunStart, SessionStart, StoredBlobDiff


class ReadModel(Protocol):
    """The reads a report makes of a run set (each as `membench.warehouse.queries` documents it)."""

    # the units' cells and runs
    def run_results(self, run_set: str) -> list[rows.RunSummaryRow]: ...

    def session_results(self, run_set: str) -> list[rows.SessionVerdictRow]: ...

    def run_started(self, run_set: str) -> list[RunStart]: ...

    def run_constructs(self, run_set: str) -> dict[str, str | None]: ...

    def scored_clean_start(self, run_set: str) -> dict[str, bool]: ...

    def session_starts(self, run_set: str) -> dict[str, list[SessionStart]]: ...

    def event_count(self, run_set: str) -> int: ...

    def log_root(self, run_set: str) -> str: ...

    def verdict_isolation(self, run_set: str) -> list[tuple[str, str, int]]: ...

    # the derived tables, typed
    def model_usage(self, run_set: str) -> list[rows.ModelUsageRow]: ...

    def run_model_costs(self, run_set: str) -> dict[str, tuple[int, float]]: ...

    def scored_failures(self, run_set: str) -> list[rows.FailureClassifiedRow]: ...

    def scored_contracts(self, run_set: str) -> list[rows.MemoryContractRow]: ...

    def scored_hygiene(self, run_set: str) -> list[rows.HygieneObservationRow]: ...

    def transfer_results(self, run_set: str) -> list[rows.TransferResultRow]: ...

    def has_transfer_results(self, run_set: str) -> bool: ...

    def transfer_dimensions(self, run_set: str) -> list[rows.TransferDimensionRow]: ...

    def transfer_cases(self, run_set: str) -> list[rows.TransferCaseRow]: ...

    def transfer_hard_caps(self, run_set: str) -> list[rows.TransferHardCapRow]: ...

    def skill_banks(self, run_set: str) -> list[rows.SkillBankRow]: ...

    def run_end_reasons(self, run_set: str) -> list[rows.RunEndReasonRow]: ...

    def memory_uses(self, run_set: str) -> list[rows.MemoryUseRow]: ...

    # the canary proof's search of what the agent could see
    def agent_visible_totals(self, run_set: str) -> tuple[int, int]: ...

    def agent_visible_hits(self, run_set: str, needles: list[str]) -> list[AgentVisibleHit]: ...

    def diffs_stored_as_blobs(self, run_set: str, fields: tuple[str, ...]) -> list[StoredBlobDiff]: ...


# the names of the reads, in the protocol's order: what a parity check walks
READS = tuple(name for name in vars(ReadModel) if not name.startswith("_"))


class WarehouseReadModel:
    """The read model over a warehouse: each read is the `queries` function of its name."""

    def __init__(self, warehouse: WarehouseReader):
        self.warehouse = warehouse

    def run_results(self, run_set: str) -> list[rows.RunSummaryRow]:
        return queries.run_results(self.warehouse, run_set)

    def session_results(self, run_set: str) -> list[rows.SessionVerdictRow]:
        return queries.session_results(self.warehouse, run_set)

    def run_started(self, run_set: str) -> list[RunStart]:
        return queries.run_started(self.warehouse, run_set)

    def run_constructs(self, run_set: str) -> dict[str, str | None]:
        return queries.run_constructs(self.warehouse, run_set)

    def scored_clean_start(self, run_set: str) -> dict[str, bool]:
        return queries.scored_clean_start(self.warehouse, run_set)

    def session_starts(self, run_set: str) -> dict[str, list[SessionStart]]:
        return queries.session_starts(self.warehouse, run_set)

    def event_count(self, run_set: str) -> int:
        return queries.event_count(self.warehouse, run_set)

    def log_root(self, run_set: str) -> str:
        return queries.log_root(self.warehouse, run_set)

    def verdict_isolation(self, run_set: str) -> list[tuple[str, str, int]]:
        return queries.verdict_isolation(self.warehouse, run_set)

    def model_usage(self, run_set: str) -> list[rows.ModelUsageRow]:
        return queries.model_usage(self.warehouse, run_set)

    def run_model_costs(self, run_set: str) -> dict[str, tuple[int, float]]:
        return queries.run_model_costs(self.warehouse, run_set)

    def scored_failures(self, run_set: str) -> list[rows.FailureClassifiedRow]:
        return queries.scored_failures(self.warehouse, run_set)

    def scored_contracts(self, run_set: str) -> list[rows.MemoryContractRow]:
        return queries.scored_contracts(self.warehouse, run_set)

    def scored_hygiene(self, run_set: str) -> list[rows.HygieneObservationRow]:
        return queries.scored_hygiene(self.warehouse, run_set)

    def transfer_results(self, run_set: str) -> list[rows.TransferResultRow]:
        return queries.transfer_results(self.warehouse, run_set)

    def has_transfer_results(self, run_set: str) -> bool:
        return queries.has_transfer_results(self.warehouse, run_set)

    def transfer_dimensions(self, run_set: str) -> list[rows.TransferDimensionRow]:
        return queries.transfer_dimensions(self.warehouse, run_set)

    def transfer_cases(self, run_set: str) -> list[rows.TransferCaseRow]:
        return queries.transfer_cases(self.warehouse, run_set)

    def transfer_hard_caps(self, run_set: str) -> list[rows.TransferHardCapRow]:
        return queries.transfer_hard_caps(self.warehouse, run_set)

    def skill_banks(self, run_set: str) -> list[rows.SkillBankRow]:
        return queries.skill_banks(self.warehouse, run_set)

    def run_end_reasons(self, run_set: str) -> list[rows.RunEndReasonRow]:
        return queries.run_end_reasons(self.warehouse, run_set)

    def memory_uses(self, run_set: str) -> list[rows.MemoryUseRow]:
        return queries.memory_uses(self.warehouse, run_set)

    def agent_visible_totals(self, run_set: str) -> tuple[int, int]:
        return queries.agent_visible_totals(self.warehouse, run_set)

    def agent_visible_hits(self, run_set: str, needles: list[str]) -> list[AgentVisibleHit]:
        return queries.agent_visible_hits(self.warehouse, run_set, needles)

    def diffs_stored_as_blobs(self, run_set: str, fields: tuple[str, ...]) -> list[StoredBlobDiff]:
        return queries.diffs_stored_as_blobs(self.warehouse, run_set, fields)
