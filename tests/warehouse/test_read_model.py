"""The in-memory read model against the warehouse's SQL: the same events and derived events, written
by the embedded pipeline's sink into a real chDB warehouse and fed to an `InMemoryReadModel`, give
the same answer to every read (values and their types) and the same report. The events cover what
the SQL's semantics turn on: a scored diff kept as a blob and one inline with a non-ASCII character
before a secret (byte positions), broken warm-ups and continuation starts, excluded units, a second
run set in the same store, and a retried insert (every row of a run twice). The controls show the
comparison sees a read that drops a row. tests/integration/test_read_model_parity.py does the same
on real run sets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from membench.reports.build import build_report
from membench.reports.model import to_json
from membench.warehouse.client import connect
from membench.warehouse.memory_read_model import InMemoryReadModel
from membench.warehouse.read_model import READS, WarehouseReadModel
from membench.warehouse.sink import decoded_row, insert_derived, insert_raw
from tests.reports.test_canary import SECRETS, _large_diff, _run
from tests.reports.test_exclusion_balance_report import _with_baseline_exclusions
from tests.reports.test_validity_gates_report import _grid
from tests.warehouse.read_model_fixtures import differing_reads, load_warehouse, sealed

pytestmark = pytest.mark.integration

NEEDLES = [s.value for s in SECRETS] + ["é", ""]


def _canary_runs(blobs) -> list[list]:
    return [_run("trap-a", _large_diff(SECRETS[1].value), blobs),
            _run("trap-b", f"+# naïve café\n+X = '{SECRETS[1].value}'\n", blobs),
            _run("trap-c", f"+Y = '{SECRETS[0].value}'\n", blobs)]


def _cases(blobs) -> dict[str, list[list]]:
    broken = {("c1-a", "B5", 1): {"warmup": (False, True)},
              ("c1-b", "B0", 2): {"starts": ("clean", "clean", "continuation")}}
    return {"canary": _canary_runs(blobs), "gates": _grid(broken), "exclusions": _with_baseline_exclusions()}


def _relabelled(runs: list[list], run_set: str) -> list[list]:
    """RUNS as another run set's (the same run ids: a store holds both, the reads must keep them apart)."""
    return [[dataclasses.replace(e, run_set=run_set) for e in events] for events in runs]


def _both(tmp_path, runs: list[list]):
    """(warehouse, in-memory model) holding RUNS, a second run set, and every row of the first run again."""
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    memory = InMemoryReadModel()
    other = _relabelled(runs[:2], "other")
    load_warehouse(warehouse, runs + other)
    for event, datum, fingerprint_hex, derived in sealed(runs + other):
        memory.add(event, datum, derived, fingerprint_hex)
    # a retried insert under another token (a redelivery): the warehouse holds the rows twice
    again = list(sealed(runs[:1]))
    insert_raw(warehouse, [decoded_row(d, f) for _, d, f, _ in again], "retry")
    insert_derived(warehouse, [x for *_, derived in again for x in derived], token_prefix="retry")
    for event, datum, fingerprint_hex, derived in again:
        memory.add(event, datum, derived, fingerprint_hex)
    return warehouse, memory


@pytest.mark.parametrize("case", ["canary", "gates", "exclusions"])
def test_every_read_and_the_report_match_the_warehouse(tmp_path, case):
    runs = _cases(tmp_path / "blobs")[case]
    warehouse, memory = _both(tmp_path, runs)
    try:
        sql = WarehouseReadModel(warehouse)
        for run_set in ("rs", "other", "absent"):
            assert differing_reads(sql, memory, run_set, NEEDLES) == [], run_set
        assert sql.agent_visible_hits("rs", NEEDLES), "the needles must be found for the positions to be compared"
        if case == "canary":  # the byte positions and the blob rows are there to compare
            assert any(0 < p for row in sql.agent_visible_hits("rs", ["é"]) for p in row.at)
            assert sql.diffs_stored_as_blobs("rs", ("production_diff",))
        assert json.dumps(to_json(build_report(sql, "rs"))) == json.dumps(to_json(build_report(memory, "rs")))
    finally:
        warehouse.close()


class _Dropping(InMemoryReadModel):
    """A read model whose READ loses its first row (a control: the comparison must see it)."""

    def __init__(self, read: str):
        self.read = read  # first: every attribute read goes through __getattribute__, __init__'s too
        super().__init__()

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if name != super().__getattribute__("read"):
            return value

        def dropped(*args):
            answer = value(*args)
            if isinstance(answer, dict):
                return dict(list(answer.items())[1:])
            return answer[1:]
        return dropped


@pytest.mark.parametrize("read", ["run_results", "session_results", "scored_failures", "verdict_isolation", "agent_visible_hits"])
def test_control_a_read_that_drops_a_row_is_named(tmp_path, read):
    runs = _cases(tmp_path / "blobs")["gates"]
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        load_warehouse(warehouse, runs)
        altered = _Dropping(read)
        for event, datum, fingerprint_hex, derived in sealed(runs):
            altered.add(event, datum, derived, fingerprint_hex)
        assert differing_reads(WarehouseReadModel(warehouse), altered, "rs", NEEDLES) == [read]
        if read != "agent_visible_hits":  # the report has no canary proof here
            assert to_json(build_report(WarehouseReadModel(warehouse), "rs")) != to_json(build_report(altered, "rs"))
    finally:
        warehouse.close()


def test_each_model_has_every_read_of_the_protocol():
    assert len(READS) == 25 and "run_results" in READS and "diffs_stored_as_blobs" in READS
    for model in (InMemoryReadModel, WarehouseReadModel):
        assert all(callable(getattr(model, n, None)) for n in READS), model


def test_control_code_point_positions_are_not_the_engines(tmp_path, monkeypatch):
    """`multiSearchAllPositions` counts bytes: a model counting code points differs after the 'é'."""
    from membench.warehouse import memory_read_model

    monkeypatch.setattr(memory_read_model, "_positions",
                        lambda haystack, needles: [haystack.decode().find(n.decode()) + 1 for n in needles])
    warehouse, memory = _both(tmp_path, _canary_runs(tmp_path / "blobs"))
    try:
        assert differing_reads(WarehouseReadModel(warehouse), memory, "rs", NEEDLES) == ["agent_visible_hits"]
    finally:
        warehouse.close()


def test_a_report_from_memory_imports_no_engine():
    """What a report test that is not about the warehouse loads: no chDB, no ClickHouse client."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys
        from membench.reports.build import build_report
        from tests.reports.test_validity_gates_report import _grid
        from tests.warehouse.read_model_fixtures import in_memory

        build_report(in_memory(_grid()), "rs")
        print([m for m in ("chdb", "clickhouse_connect", "membench.warehouse.client") if m in sys.modules])
    """)
    root = Path(__file__).resolve().parents[2]  # the tests package is imported from the repository's top
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_viewers_run_rows_are_the_warehouses(tmp_path):
    """The live viewer hands the report's cell rules the RunSummary events it folded, as rows
    (`run_summary_row`): each is the `run_results` row the sink wrote of it, every column and its type,
    excluded and errored runs included."""
    from membench.processors import derive_all
    from membench.reports.conventions import run_summary_row

    runs = _with_baseline_exclusions()
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        load_warehouse(warehouse, runs)
        stored = WarehouseReadModel(warehouse).run_results("rs")
    finally:
        warehouse.close()
    folded = {d.run_id: run_summary_row(d) for events in runs for d in derive_all(events) if d.kind == "RunSummary"}
    assert len(stored) == len(runs) and {r.status for r in stored} > {"completed"}
    for row in stored:
        assert [(f, type(v), v) for f, v in vars(folded[row.run_id]).items()] == \
            [(f, type(v), v) for f, v in vars(row).items()]
