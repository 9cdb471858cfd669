"""The payload fields the warehouse's SQL reads by name are fields their event kinds declare. A
`JSONExtract*` of a renamed field answers 0, '' or false instead of failing, so a rename in the
event schema must fail here: each (kind, field) below is checked against the newest schema's
payload types, and each field's name must stand in the SQL of membench/warehouse/queries.py (an
entry for a read that is gone, or a read not listed, is caught by the count)."""

from __future__ import annotations

import re
from pathlib import Path

from membench.reports.canary import DIFF_FIELDS
from membench.schemas import payloads

QUERIES = Path(__file__).resolve().parents[2] / "membench" / "warehouse" / "queries.py"

# (event kind the query filters on, payload field it extracts)
READ_BY_SQL = [
    ("OracleVerdict", "isolation"),  # verdict_isolation
    ("SessionStarted", "scored"),  # scored_patch_counts
    ("PatchProduced", "files"),
    ("ToolResult", "name"),
    ("ToolResult", "exit_code"),
    *[("PatchProduced", f) for f in DIFF_FIELDS],  # diffs_stored_as_blobs: the text, or its blob digest
    *[("PatchProduced", f"{f}_sha256") for f in DIFF_FIELDS],
]
_EXTRACT = re.compile(r"JSONExtract\w*\(payload, '([^']+)'\)")


def undeclared(reads: list[tuple[str, str]], fields_of) -> list[tuple[str, str]]:
    """The (kind, field) pairs of READS whose kind does not declare the field (FIELDS_OF: kind -> names)."""
    return [(kind, field) for kind, field in reads if field not in fields_of(kind)]


def test_every_field_the_sql_extracts_is_declared_by_its_kind():
    assert undeclared(READ_BY_SQL, lambda kind: payloads.PAYLOADS[kind].__annotations__) == []


def test_the_list_is_the_sqls():
    source = QUERIES.read_text(encoding="utf-8")
    extracted = _EXTRACT.findall(source)
    # the diff fields are extracted through a placeholder ({f}, {f}_sha256), each name once per site
    literal = sorted({name for name in extracted if "{" not in name})
    assert literal == sorted({field for _, field in READ_BY_SQL if not field.startswith(DIFF_FIELDS)})
    assert sorted(name for name in extracted if "{" in name) == ["{f}", "{f}_sha256"]


def test_control_a_renamed_field_is_caught():
    def renamed(kind):
        fields = dict(payloads.PAYLOADS[kind].__annotations__)
        if kind == "ToolResult":
            fields["exit_status"] = fields.pop("exit_code")
        return fields

    assert undeclared(READ_BY_SQL, renamed) == [("ToolResult", "exit_code")]
