"""The derived-table rows readers get (`membench/warehouse/rows.py`): generated from the DDL, and what
`membench.warehouse.queries` returns from real chDB for the rows the processors derived."""

from __future__ import annotations

import dataclasses

from membench.processors import derive_all
from tests.processors.model_call_fixtures import model_call
from tests.processors.test_transfer_fold import events_of
from membench.warehouse import queries, rows
from membench.warehouse.client import connect
from membench.warehouse.row_types import TARGET, render
from membench.warehouse.sink import insert_derived
from membench.warehouse.tables import ensure_tables, table_columns


def test_the_module_is_the_generated_one():
    assert TARGET.read_text(encoding="utf-8") == render(), (
        "membench/warehouse/rows.py is stale or edited by hand: run `python -m membench.warehouse.row_types`")


def test_every_row_type_has_its_tables_columns_in_order():
    columns = table_columns()
    for table, row_type in rows.ROW_TYPES.items():
        assert [f.name for f in dataclasses.fields(row_type)] == [name for name, _ in columns[table]], table
        assert row_type.__dataclass_params__.frozen


def test_typed_reads_return_what_the_folds_derived(tmp_path):
    caps = [{"cap_id": "CONSERVE", "cap": 35.0, "invariant": "money is conserved", "cases": ["B-01"]},
            {"cap_id": "BOOT", "cap": 25.0, "invariant": "", "cases": []}]
    frozen = {"bank": "learned", "digest": "d" * 64, "files": [{"path": "a.md", "sha256": "1" * 64}],
              "ablated_skill": None, "distiller": "scripted"}
    extra = [("ModelCall", model_call("a1", usd=0.25, price="m@1")), ("ModelCall", model_call("a2", usd=0.5)),
             ("ModelCall", model_call("s1", purpose="sleep", usd=0.125, price="m@1")), ("SkillBankFrozen", frozen)]
    derived = derive_all(events_of({"A-01": "passed", "B-01": "failed"}, caps=caps, extra=extra))
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        ensure_tables(warehouse)
        insert_derived(warehouse, derived)
        insert_derived(warehouse, derived)  # a retried insert reads once
        by_kind = {kind: [d.payload for d in derived if d.kind == kind]
                   for kind in ("ModelUsage", "TransferCase", "TransferHardCap", "SkillBank")}
        reads = {"ModelUsage": queries.model_usage(warehouse, "rs"),
                 "TransferCase": queries.transfer_cases(warehouse, "rs"),
                 "TransferHardCap": queries.transfer_hard_caps(warehouse, "rs"),
                 "SkillBank": queries.skill_banks(warehouse, "rs")}
        for kind, got in reads.items():
            want = sorted((tuple(tuple(v) if isinstance(v, list) else v for v in p.values()) for p in by_kind[kind]))
            have = sorted(tuple(getattr(r, k) for k in by_kind[kind][0]) for r in got)
            assert have == want and got, kind
        assert queries.run_model_costs(warehouse, "rs") == {"r1": (2, 0.875)}
        assert [c.case_id for c in queries.transfer_cases(warehouse, "rs")] == ["A-01", "A-02", "B-01", "B-02",
                                                                                "B-03", "B-04"]  # manifest order
        assert queries.model_usage(warehouse, "other") == []
    finally:
        warehouse.close()
