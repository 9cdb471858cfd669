"""CSV and manifest loading: every error names the file, the row (and line) and the column."""

from __future__ import annotations

import json

import pytest

from membench.analytics.ccpf import EvaluatorManifest, ManifestCase
from membench.analytics.cells import Cell
from membench.analytics.loaders import MAX_MANIFEST_BYTES, InputError, load_cases_csv, load_cells_csv, load_manifest


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


# -- hostile bytes -------------------------------------------------------------------


def test_non_utf8_cells_csv_names_byte_offset_and_line(tmp_path):
    head = "unit,seed,condition,passed\nt1,1,A,1\n".encode()
    path = tmp_path / "cells.csv"
    path.write_bytes(head + b"t\xe9,2,A,0\n")  # Latin-1 'é'
    with pytest.raises(InputError) as info:
        load_cells_csv(path)
    assert str(info.value) == f"{path}, line 3: not UTF-8: invalid byte 0xe9 at byte offset {len(head) + 1}"


def test_non_utf8_header_and_bom(tmp_path):
    path = tmp_path / "cells.csv"
    path.write_bytes(b"\xef\xbb\xbfunit,seed,cond\xffition,passed\n")
    with pytest.raises(InputError, match="line 1: not UTF-8: invalid byte 0xff at byte offset 17$"):
        load_cells_csv(path)


def test_byte_offset_past_the_first_mebibyte_with_a_character_split_across_pieces(tmp_path):
    # the offset is found by an incremental decoder reading 1 MiB pieces: a valid 2-byte 'é' that
    # straddles the piece boundary must not shift it
    boundary = 1 << 20
    head = b"unit,seed,condition,passed\n" + b"".join(f"u{i},1,A,1\n".encode() for i in range(80_000))
    tail = b",1,A,1\n"
    body = head + b"x" * (boundary - 1 - len(head) - len(tail)) + tail + b"\xc3\xa9,1,A,1\n" + b"t,1,A,1\n"
    assert body.index(b"\xc3\xa9") == boundary - 1
    path = tmp_path / "big.csv"
    path.write_bytes(body + b"\x80,1,A,1\n")
    with pytest.raises(InputError) as info:
        load_cells_csv(path)
    assert str(info.value).endswith(f"invalid byte 0x80 at byte offset {len(body)}")
    assert info.value.line == body.count(b"\n") + 1


def test_non_utf8_cases_csv_and_manifest(tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_bytes(b"run,task,case,status\nr1,T\xfe,A-01,passed\n")
    with pytest.raises(InputError, match=r"cases\.csv, line 2: not UTF-8: invalid byte 0xfe at byte offset 25$"):
        load_cases_csv(cases)
    manifest = tmp_path / "m.json"
    manifest.write_bytes(b'{"taskId": "t",\n "cases": ["\xff"]}')
    with pytest.raises(InputError, match=r"m\.json, line 2: not UTF-8: invalid byte 0xff at byte offset 28$"):
        load_manifest(manifest)


def test_an_evaluator_manifest_over_the_limit_is_refused(tmp_path):
    manifest = tmp_path / "m.json"
    with manifest.open("wb") as handle:
        handle.truncate(MAX_MANIFEST_BYTES + 1)
    with pytest.raises(InputError, match="larger than the 16 MiB input limit"):
        load_manifest(manifest)


def test_errors_deep_in_a_large_file_keep_their_row_and_column(tmp_path):
    lines = ["unit,seed,condition,passed,valid"] + [f"u{i},{i % 3 + 1},A,{i % 2},1" for i in range(5000)]
    lines.insert(4000, "u3999x,1,A,1,perhaps")
    path = write(tmp_path, "cells.csv", "\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        load_cells_csv(path)
    assert (info.value.row, info.value.line, info.value.column) == (4000, 4001, "valid")
    assert "'perhaps'" in str(info.value)
