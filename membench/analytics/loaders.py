"""Reading statistics inputs from files: cells CSV, case-outcome CSV, evaluator manifests.

The only module of ``analytics`` that does I/O. Every problem raises :class:`InputError`,
which names the file, the 1-based data row and its physical line number, and the column (or the
JSON field of a manifest).

Cells CSV: columns ``unit,seed,condition,passed`` and optional ``valid``, ``construct``; other
columns are ignored. ``passed``/``valid`` take 1/0, true/false, yes/no (any case). An empty
``valid`` means valid; an excluded row (``valid`` false) may leave ``passed`` empty. An empty
``construct`` means none. A repeated (unit, seed, condition) is an error (dedup belongs upstream).

Cases CSV: columns ``run,task,case,status`` with status one of passed, failed, error, unreached,
blocked, not_applicable, excluded (any case; the statuses membench's evaluator emits), and optional ``v1_checkpoint`` (binary, the same for every row of a
(run, task); absent or empty means no V1 checkpoint). A repeated (run, task, case) is an error, and
so is a case missing from its task's manifest when one is given.

Inputs are untrusted: a byte that is not UTF-8 is an error naming the file, the byte offset of the
first invalid byte and its line (found by re-reading the file only on that error path, so valid
files pay nothing), and an evaluator manifest is read within ``MAX_MANIFEST_BYTES`` (16 MiB).
(``membench.formats.fields`` does the same for packs; ``analytics`` imports nothing of the project, so the
few lines are repeated here.)

Speed: a cells CSV of 600,000 rows loads in about a second and a half (docs/benchmarks.md):
values are read by column index, and the per-row dictionaries error messages need are built
only for a row that has an error.
"""

from __future__ import annotations

import codecs
import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from .ccpf import CASE_STATUSES, CaseOutcome, EvaluatorManifest, ManifestCase
from .cells import Cell, gc_paused

CELL_COLUMNS = ("unit", "seed", "condition", "passed")
CASE_COLUMNS = ("run", "task", "case", "status")
_TRUE = frozenset({"1", "true", "t", "yes", "y"})
_FALSE = frozenset({"0", "false", "f", "no", "n"})
_BINARY = {**{v: True for v in _TRUE}, **{v: False for v in _FALSE}}
#: The largest evaluator manifest read: 16 MiB (the same limit as membench.formats.fields.MAX_INPUT_BYTES).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


class InputError(ValueError):
    """A malformed input file. ``row`` is the 1-based data row (header excluded), ``line`` the
    physical line number in the file, ``column`` the CSV column or the manifest field."""

    def __init__(self, path: str | Path, message: str, *, row: int | None = None, line: int | None = None,
                 column: str | None = None, field: str | None = None):
        self.path, self.problem, self.row, self.line = str(path), message, row, line
        self.column, self.field = column, field
        where = [self.path]
        if row is not None:
            where.append(f"data row {row} (line {line})" if line is not None else f"data row {row}")
        elif line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column '{column}'")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{', '.join(where)}: {message}")


@dataclass(frozen=True)
class _Row:
    number: int
    line: int
    values: dict[str, str]


def _utf8_error(path: Path) -> InputError:
    """The InputError for PATH's first invalid UTF-8 byte: its byte offset (0-based, from the start
    of the file) and line. Scans the file in 1 MiB pieces with an incremental decoder (the text
    layer that failed decodes ahead in blocks, so its position says nothing about the byte)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    consumed = newlines = 0
    with path.open("rb") as handle:
        while True:
            chunk = handle.read(1 << 20)
            pending = len(decoder.getstate()[0])  # bytes of an unfinished character, held back
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as exc:
                data = exc.object
                offset = consumed - pending + exc.start
                line = newlines + data.count(b"\n", 0, exc.start) + 1
                return InputError(path, f"not UTF-8: invalid byte 0x{data[exc.start]:02x} at byte offset {offset}",
                                  line=line)
            if not chunk:
                return InputError(path, "not UTF-8")
            consumed += len(chunk)
            newlines += chunk.count(b"\n")


def _read_rows(path: str | Path, required: Iterable[str]) -> tuple[list[str], Iterator[tuple[int, int, list[str]]]]:
    """The header's column names, and an iterator of (data row number, line number, raw fields)
    over the non-blank data rows (fields not stripped; a row may be shorter than the header)."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    reader = csv.reader(handle)
    try:
        header = next(reader)
    except StopIteration:
        handle.close()
        raise InputError(path, "empty file: no header line", line=1, column=next(iter(required))) from None
    except UnicodeDecodeError:
        handle.close()
        raise _utf8_error(path) from None
    except csv.Error as exc:
        handle.close()
        raise InputError(path, f"unreadable header: {exc}", line=1) from None
    names = [h.strip() for h in header]
    for col in required:
        if col not in names:
            handle.close()
            raise InputError(path, f"missing required column (header has: {', '.join(names) or 'nothing'})",
                             line=1, column=col)
    seen = set()
    for col in names:
        if col and col in seen:
            handle.close()
            raise InputError(path, "column appears twice in the header", line=1, column=col)
        seen.add(col)

    width = len(names)

    def rows() -> Iterator[tuple[int, int, list[str]]]:
        number = 0
        with handle:
            try:
                for fields in reader:
                    if not fields or (not fields[0].strip() and all(not f.strip() for f in fields)):
                        continue  # blank line
                    number += 1
                    if len(fields) > width:
                        raise InputError(path, f"{len(fields)} fields but the header has {width}",
                                         row=number, line=reader.line_num, column=names[-1] if names else None)
                    yield number, reader.line_num, fields
            except UnicodeDecodeError:  # the text layer decodes ahead of the rows: name the line, not a row
                raise _utf8_error(path) from None
            except csv.Error as exc:
                raise InputError(path, f"unreadable CSV: {exc}", row=number + 1, line=reader.line_num) from None

    return names, rows()


def _row(names: list[str], number: int, line: int, fields: list[str]) -> _Row:
    return _Row(number, line, {name: (fields[i].strip() if i < len(fields) else "") for i, name in enumerate(names)})


def _binary(path: Path | str, row: _Row, column: str, *, empty: bool | None = None) -> bool:
    raw = row.values.get(column, "")
    text = raw.lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if not text and empty is not None:
        return empty
    shown = f"{raw!r}" if raw else "an empty value"
    raise InputError(path, f"outcome must be binary (1/0, true/false, yes/no), got {shown}",
                     row=row.number, line=row.line, column=column)


def _required(path: Path | str, row: _Row, column: str) -> str:
    value = row.values.get(column, "")
    if not value:
        raise InputError(path, "empty value", row=row.number, line=row.line, column=column)
    return value


def _cell_slow(path: str | Path, row: _Row, has_valid: bool) -> NoReturn:
    """Raise the InputError of a row the fast path of `load_cells_csv` refused (an empty required
    value or a non-binary outcome), with the message the per-column checks give."""
    for column in ("unit", "seed", "condition"):
        _required(path, row, column)
    valid = _binary(path, row, "valid", empty=True) if has_valid else True
    _binary(path, row, "passed", empty=None if valid else False)
    raise AssertionError(f"{path}: data row {row.number} was refused but has no error")  # pragma: no cover


def load_cells_csv(path: str | Path) -> list[Cell]:
    """Read a cells CSV (see the module docstring) into :class:`~.cells.Cell` records.

    One tight loop (this is the hot path of `membench stats compare` on large files): a row whose
    values are all present and binary never leaves it; any other row goes to `_cell_slow`, which
    raises the error the column checks name."""
    with gc_paused():
        return _load_cells(path)


def _load_cells(path: str | Path) -> list[Cell]:
    names, rows = _read_rows(path, CELL_COLUMNS)
    width = len(names)
    iu, iseed, icond, ipass = (names.index(c) for c in CELL_COLUMNS)
    ivalid = names.index("valid") if "valid" in names else None
    iconstruct = names.index("construct") if "construct" in names else None
    binary = _BINARY.get
    cells: list[Cell] = []
    append = cells.append
    first_row: dict[tuple[str, str, str], int] = {}
    for number, line, fields in rows:
        if len(fields) < width:
            fields = fields + [""] * (width - len(fields))
        unit, seed, condition = fields[iu].strip(), fields[iseed].strip(), fields[icond].strip()
        valid: bool | None = True
        if ivalid is not None:
            raw = fields[ivalid].strip()
            if raw:
                valid = binary(raw) if raw in _BINARY else binary(raw.lower())
        raw = fields[ipass].strip()
        passed = binary(raw) if raw in _BINARY else binary(raw.lower())
        if passed is None and not raw and valid is False:
            passed = False  # an excluded row may leave passed empty
        if passed is None or valid is None or not (unit and seed and condition):
            _cell_slow(path, _row(names, number, line, fields), ivalid is not None)
        construct = (fields[iconstruct].strip() or None) if iconstruct is not None else None
        key = (unit, seed, condition)
        first = first_row.setdefault(key, number)
        if first != number:
            raise InputError(path, f"duplicate cell (unit {unit!r}, seed {seed!r}, condition {condition!r}) "
                             f"first seen in data row {first}",
                             row=number, line=line, column="unit,seed,condition")
        append(Cell(unit, seed, condition, passed, valid, construct, None, number))
    return cells


@dataclass(frozen=True)
class CasesInput:
    outcomes: list[CaseOutcome]
    v1_checkpoint_runs: frozenset[tuple[str, str]]


def load_cases_csv(path: str | Path, manifests: Mapping[str, EvaluatorManifest] | None = None) -> CasesInput:
    """Read a case-outcome CSV; with ``manifests`` ({task id: manifest}), check every case id."""
    names, rows = _read_rows(path, CASE_COLUMNS)
    has_v1 = "v1_checkpoint" in names
    index = {k.lower(): m for k, m in (manifests or {}).items()}
    outcomes: list[CaseOutcome] = []
    first_row: dict[tuple[str, str, str], int] = {}
    v1: dict[tuple[str, str], tuple[bool, int]] = {}
    for number, line, fields in rows:
        row = _row(names, number, line, fields)
        run = _required(path, row, "run")
        task = _required(path, row, "task")
        case = _required(path, row, "case")
        status = _required(path, row, "status").lower()
        if status not in CASE_STATUSES:
            raise InputError(path, f"unknown status {row.values['status']!r} (expected one of {', '.join(CASE_STATUSES)})",
                             row=row.number, line=row.line, column="status")
        key = (run, task, case)
        if key in first_row:
            raise InputError(path, f"duplicate case (run {run!r}, task {task!r}, case {case!r}) "
                             f"first seen in data row {first_row[key]}",
                             row=row.number, line=row.line, column="run,task,case")
        first_row[key] = row.number
        manifest = index.get(task.lower())
        if manifest is not None and case not in {c.id for c in manifest.cases}:
            raise InputError(path, f"case {case!r} is not in the evaluator manifest of task {manifest.task_id!r}",
                             row=row.number, line=row.line, column="case")
        if has_v1:
            flag = _binary(path, row, "v1_checkpoint", empty=False)
            seen = v1.get((run, task))
            if seen is not None and seen[0] != flag:
                raise InputError(path, f"v1_checkpoint differs from data row {seen[1]} of the same run "
                                 f"(run {run!r}, task {task!r})", row=row.number, line=row.line, column="v1_checkpoint")
            v1.setdefault((run, task), (flag, row.number))
        outcomes.append(CaseOutcome(run=run, task=task, case=case, status=status))
    return CasesInput(outcomes, frozenset(k for k, (flag, _) in v1.items() if flag))


def load_manifest(path: str | Path) -> EvaluatorManifest:
    """Read an EngramBench evaluator manifest (``*.manifest.v2.json``): ``taskId`` and ``cases``."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        limit = MAX_MANIFEST_BYTES // (1024 * 1024)
        raise InputError(path, f"larger than the {limit} MiB input limit (refused unread)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8: invalid byte 0x{data[exc.start]:02x} at byte offset {exc.start}",
                         line=data.count(b"\n", 0, exc.start) + 1) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError(path, "a manifest must be a JSON object", field="$")
    task_id = data.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InputError(path, "missing or empty string", field="taskId")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise InputError(path, "missing or not a list", field="cases")
    parsed: list[ManifestCase] = []
    seen: set[str] = set()
    for i, case in enumerate(cases):
        where = f"cases[{i}]"
        if not isinstance(case, dict):
            raise InputError(path, "a case must be an object", field=where)
        cid = case.get("id")
        if not isinstance(cid, str) or not cid:
            raise InputError(path, "missing or empty string", field=f"{where}.id")
        if cid in seen:
            raise InputError(path, f"duplicate case id {cid!r}", field=f"{where}.id")
        seen.add(cid)
        prereq = case.get("prerequisites", [])
        if not isinstance(prereq, list) or not all(isinstance(p, str) for p in prereq):
            raise InputError(path, "must be a list of strings", field=f"{where}.prerequisites")
        weight = case.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
            raise InputError(path, "must be a number", field=f"{where}.weight")
        dimension = case.get("dimension")
        if dimension is not None and not isinstance(dimension, str):
            raise InputError(path, "must be a string", field=f"{where}.dimension")
        parsed.append(ManifestCase(id=cid, dimension=dimension, weight=weight, prerequisites=tuple(prereq)))
    return EvaluatorManifest(task_id=task_id, cases=tuple(parsed))
