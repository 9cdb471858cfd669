"""The rows of the read model's raw-event reads, as frozen dataclasses (the derived tables' rows are
`membench/warehouse/rows.py`, generated from the DDL): what `membench.warehouse.queries` and the
in-memory read model (`memory_read_model.py`) both return, so a report reads attributes mypy checks
instead of dict keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RunStart:
    """A run's RunStarted event (`queries.run_started`): its run id and payload, decoded from the JSON
    the raw table holds."""

    run_id: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class SessionStart:
    """A SessionStarted payload as the continuation audit reads it (`queries.session_starts`)."""

    session_index: int
    start_state: str | None
    scored: bool


@dataclass(frozen=True)
class AgentVisibleHit:
    """An agent-visible event whose payload holds a searched needle (`queries.agent_visible_hits`):
    `at` is each needle's 1-based byte position in the payload, 0 where it is absent."""

    run_id: str
    seq: int
    kind: str
    unit_id: str
    at: tuple[int, ...]


@dataclass(frozen=True)
class DiffField:
    """One diff field of a PatchProduced payload: its blob digest ('' when none) and whether its text
    is not inline (missing or null: the text is in the content store)."""

    name: str
    sha256: str
    as_blob: bool


@dataclass(frozen=True)
class StoredBlobDiff:
    """An agent-visible PatchProduced event that keeps a diff as a blob (`queries.diffs_stored_as_blobs`):
    each asked field, in the order asked."""

    run_id: str
    seq: int
    unit_id: str
    fields: tuple[DiffField, ...]
