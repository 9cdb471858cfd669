"""CSV and manifest loading: every error names the file, the row (and line) and the column."""

from __future__ import annotations

import json

import pytest

from analytics.ccpf import EvaluatorManifest, ManifestCase
from analytics.cells import Cell
from analytics.loaders import InputError, load_cases_csv, load_cells_csv, load_manifest


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_cells_csv_round_trip(tmp_path):
    path = write(tmp_path, "cells.csv",
                 "unit,seed,condition,passed,valid,construct,notes\n"
                 "t1,1,B0,0,1,C1,x\n"
                 "t1,2,B0,TRUE,,C1,\n"
                 "\n"
                 "t1,3,B0,,false,,\n"
                 " t2 , 1 , B5 , yes , , , \n")
    cells = load_cells_csv(path)
    assert cells == [
        Cell("t1", "1", "B0", False, True, "C1", order=1),
        Cell("t1", "2", "B0", True, True, "C1", order=2),
        Cell("t1", "3", "B0", False, False, None, order=3),
        Cell("t2", "1", "B5", True, True, None, order=4),
    ]


@pytest.mark.parametrize(
    ("text", "row", "line", "column", "fragment"),
    [
        ("unit,seed,passed\nt,1,1\n", None, 1, "condition", "missing required column"),
        ("unit,seed,condition,passed\nt,1,A,1\nt,2,A,maybe\n", 2, 3, "passed", "binary"),
        ("unit,seed,condition,passed\nt,1,A,2\n", 1, 2, "passed", "binary"),
        ("unit,seed,condition,passed\nt,1,A,\n", 1, 2, "passed", "empty value"),
        ("unit,seed,condition,passed,valid\nt,1,A,1,ok\n", 1, 2, "valid", "binary"),
        ("unit,seed,condition,passed\nt,1,A,1\nu,1,A,0\nt,1,A,0\n", 3, 4, "unit,seed,condition",
         "duplicate cell"),
        ("unit,seed,condition,passed\n,1,A,1\n", 1, 2, "unit", "empty value"),
        ("unit,seed,condition,passed\nt,1,A,1,extra\n", 1, 2, "passed", "5 fields"),
        ("", None, 1, "unit", "empty file"),
        ("unit,seed,condition,passed,seed\n", None, 1, "seed", "twice"),
    ],
)
def test_cells_csv_errors(tmp_path, text, row, line, column, fragment):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(InputError) as info:
        load_cells_csv(path)
    err = info.value
    assert (err.row, err.line, err.column) == (row, line, column)
    assert fragment in str(err)
    assert str(path) in str(err) and f"column '{column}'" in str(err)
    if row is not None:
        assert f"data row {row} (line {line})" in str(err)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read file"):
        load_cells_csv(tmp_path / "nope.csv")


MANIFEST = EvaluatorManifest("toy", (ManifestCase("A-01", "A", 1, ("FINAL",)),
                                     ManifestCase("E-01", "E", 1, ("V1", "FINAL"))))


def test_cases_csv(tmp_path):
    path = write(tmp_path, "cases.csv",
                 "run,task,case,status,v1_checkpoint\n"
                 "r1,Toy,A-01,PASSED,1\n"
                 "r1,Toy,E-01,failed,1\n"
                 "r2,Toy,A-01,excluded,\n"
                 "r2,other,z,unreached,0\n")
    cases = load_cases_csv(path, {"toy": MANIFEST})
    assert [o.status for o in cases.outcomes] == ["passed", "failed", "excluded", "unreached"]
    assert cases.v1_checkpoint_runs == frozenset({("r1", "Toy")})


@pytest.mark.parametrize(
    ("text", "row", "column", "fragment"),
    [
        ("run,task,case\nr,t,c\n", None, "status", "missing required column"),
        ("run,task,case,status\nr,t,c,crashed\n", 1, "status", "unknown status 'crashed'"),
        ("run,task,case,status\nr,t,c,passed\nr,t,c,failed\n", 2, "run,task,case", "duplicate case"),
        ("run,task,case,status\nr,Toy,Z-9,passed\n", 1, "case", "not in the evaluator manifest"),
        ("run,task,case,status,v1_checkpoint\nr,t,a,passed,1\nr,t,b,passed,0\n", 2, "v1_checkpoint", "differs"),
    ],
)
def test_cases_csv_errors(tmp_path, text, row, column, fragment):
    path = write(tmp_path, "cases.csv", text)
    with pytest.raises(InputError) as info:
        load_cases_csv(path, {"toy": MANIFEST})
    assert (info.value.row, info.value.column) == (row, column)
    assert fragment in str(info.value)


def test_manifest_errors(tmp_path):
    good = {"taskId": "toy", "cases": [{"id": "A-01", "dimension": "A", "weight": 2, "prerequisites": ["FINAL"]}]}
    assert load_manifest(write(tmp_path, "m.json", json.dumps(good))).cases[0].prerequisites == ("FINAL",)
    cases = [
        ("{", "invalid JSON", None),
        (json.dumps({"cases": []}), "missing", "taskId"),
        (json.dumps({"taskId": "t", "cases": {}}), "not a list", "cases"),
        (json.dumps({"taskId": "t", "cases": [{"id": "A"}, {"id": "A"}]}), "duplicate case id", "cases[1].id"),
        (json.dumps({"taskId": "t", "cases": [{"id": "A", "prerequisites": "V1"}]}), "list of strings",
         "cases[0].prerequisites"),
        (json.dumps({"taskId": "t", "cases": [{"id": "A", "weight": "2"}]}), "number", "cases[0].weight"),
    ]
    for text, fragment, field in cases:
        with pytest.raises(InputError) as info:
            load_manifest(write(tmp_path, "bad.json", text))
        assert fragment in str(info.value) and info.value.field == field
