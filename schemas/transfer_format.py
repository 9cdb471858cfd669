"""The transfer study format (EngramBench's two-phase protocol; docs/transfer.md documents every field).

A study is a directory with `study.json`:

- `learning[]`: ordered learning tasks, each a small repository, an instruction, a hidden pytest
  oracle and a hidden reference solution (the native solution format, `{{SLOT:name}}` slots);
- `projects[]`: transfer projects, each a starting workspace (with a README.md contract), a
  public interface check, a simulated-user scenario, and a hidden evaluator: an EngramBench
  `*.manifest.v2.json` (cases with id, dimension, weight, prerequisites; dimension weights; hard
  caps; spec gaps) plus `cases.json`, the executable check of every case;
- `native_bank`: a hand-authored skill bank (`<skill>/SKILL.md` + `MANIFEST.sha256`);
- `ablate_skill`: the learned skill the `ablated_bank` condition removes.

Every error names the file and the field (`TransferFormatError`, a usage error: exit 2). Only this
module reads the format; nothing here imports the rest of the project (layer 0).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.fields import MAX_INPUT_BYTES, is_plain_name, relative_path_problem
from schemas.pack_format import PackError, Solution, load_solution

FORMAT = "membench-transfer/1"
CONDITIONS = ("no_memory", "learned_bank", "native_bank", "ablated_bank")
PHASES = ("plan_handoff", "implementing", "delivery", "delivery_review", "freezing", "testing", "test_feedback",
          "finished")
#: prerequisites naming a checkpoint rather than a case: FINAL and PERF (the EngramBench manifests' final and
#: performance checkpoints) are both the frozen submission here, always there;
#: a V1 checkpoint does not exist in this protocol, so such a case is not applicable (analytics/ccpf.py)
CHECKPOINTS = frozenset({"FINAL", "PERF"})
V1_CHECKPOINTS = frozenset({"V1", "V1_CHECKPOINT", "FROZEN_V1_CHECKPOINT"})
DIMENSION = re.compile(r"[A-Z]")


class TransferFormatError(ValueError):
    """A malformed study: the message names the file and the field."""


@dataclass(frozen=True)
class LearningTask:
    task_id: str
    repo: Path
    instruction: str
    oracle: Path
    solution: Solution


@dataclass(frozen=True)
class Dimension:
    dimension: str
    title: str
    weight: float


@dataclass(frozen=True)
class HardCap:
    cap_id: str
    cap: float
    invariant: str
    cases: tuple[str, ...]  # membench's addition: the cap fires when any of these does not pass


@dataclass(frozen=True)
class EvalCase:
    case_id: str
    title: str
    dimension: str
    weight: float
    prerequisites: tuple[str, ...]


@dataclass(frozen=True)
class Evaluator:
    path: Path
    task_id: str
    max_score: float
    dimensions: tuple[Dimension, ...]
    hard_caps: tuple[HardCap, ...]
    spec_gaps: tuple[Any, ...]
    cases: tuple[EvalCase, ...]
    sha256: str
    checks_path: Path  # cases.json: {"module": ..., "cases": {case id: check}}


@dataclass(frozen=True)
class Scenario:
    path: Path
    plan: str
    answers: tuple[tuple[str, str], ...]  # (regex over the agent's question, reply)
    default_answer: str
    accept: str
    public_check_failed: str  # "{output}" is replaced by the check's output
    test_feedback: str  # "{passed}" and "{cases}" are replaced by counts
    max_review_rounds: int


@dataclass(frozen=True)
class Project:
    project_id: str
    workspace: Path
    public_check: Path
    scenario: Scenario
    evaluator: Evaluator
    solution: Solution


@dataclass(frozen=True)
class Study:
    name: str
    root: Path
    digest: str
    learning: tuple[LearningTask, ...]
    projects: tuple[Project, ...]
    native_bank: Path
    ablate_skill: str
    conditions: tuple[str, ...]

    def project(self, project_id: str) -> Project:
        for p in self.projects:
            if p.project_id == project_id:
                return p
        raise KeyError(project_id)


def _read_json(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise TransferFormatError(f"{path}: cannot read file: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise TransferFormatError(f"{path}: larger than the {MAX_INPUT_BYTES >> 20} MiB input limit")
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise TransferFormatError(f"{path}: not UTF-8 (byte offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise TransferFormatError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None


def _field(obj: Any, key: str, typ: type | tuple[type, ...], path: Path, where: str, default: Any = ...) -> Any:
    name = f"{where}.{key}" if where else key
    if not isinstance(obj, dict):
        raise TransferFormatError(f"{path}: field '{where or '$'}' must be an object")
    if key not in obj or obj[key] is None:
        if default is ...:
            raise TransferFormatError(f"{path}: field '{name}' is missing")
        return default
    value = obj[key]
    if not isinstance(value, typ) or (isinstance(value, bool) and typ in (int, float, (int, float))):
        tname = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise TransferFormatError(f"{path}: field '{name}' must be {tname}, got {type(value).__name__}")
    if isinstance(value, str) and not value and default is ...:
        raise TransferFormatError(f"{path}: field '{name}' must not be empty")
    return value


def _inside(root: Path, rel: Any, path: Path, name: str, *, directory: bool = False) -> Path:
    problem = relative_path_problem(rel)
    if problem:
        raise TransferFormatError(f"{path}: field '{name}' {problem}")
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise TransferFormatError(f"{path}: field '{name}' leaves the study directory")
    if directory and not target.is_dir():
        raise TransferFormatError(f"{path}: field '{name}': {rel} is not a directory")
    if not directory and not target.is_file():
        raise TransferFormatError(f"{path}: field '{name}': {rel} is not a file")
    return target


def _plain(value: str, path: Path, name: str) -> str:
    if not is_plain_name(value):
        raise TransferFormatError(f"{path}: field '{name}' must be a plain name (letters, digits, '.', '_', '-')")
    return value


def load_evaluator(path: Path, checks_path: Path) -> Evaluator:
    """An EngramBench `*.manifest.v2.json` (plus membench's `cases.json` of executable checks)."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TransferFormatError(f"{path}: field '$' must be an object")
    task_id = _field(data, "taskId", str, path, "")
    max_score = float(_field(data, "maxScore", (int, float), path, "", 100))
    raw_dims = _field(data, "dimensions", dict, path, "")
    dims = []
    for key in sorted(raw_dims):
        if not DIMENSION.fullmatch(key):
            raise TransferFormatError(f"{path}: field 'dimensions.{key}' must be one capital letter")
        d = raw_dims[key]
        weight = _field(d, "weight", (int, float), path, f"dimensions.{key}")
        if weight < 0:
            raise TransferFormatError(f"{path}: field 'dimensions.{key}.weight' must not be negative")
        dims.append(Dimension(key, _field(d, "title", str, path, f"dimensions.{key}", ""), float(weight)))
    if not dims:
        raise TransferFormatError(f"{path}: field 'dimensions' must name at least one dimension")
    raw_cases = _field(data, "cases", list, path, "")
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for i, c in enumerate(raw_cases):
        where = f"cases[{i}]"
        cid = _field(c, "id", str, path, where)
        if cid in seen:
            raise TransferFormatError(f"{path}: field '{where}.id' repeats case id {cid!r}")
        dim = _field(c, "dimension", str, path, where)
        if dim not in raw_dims:
            raise TransferFormatError(f"{path}: field '{where}.dimension' names unknown dimension {dim!r}")
        weight = _field(c, "weight", (int, float), path, where)
        if weight <= 0:
            raise TransferFormatError(f"{path}: field '{where}.weight' must be positive")
        prereq = _field(c, "prerequisites", list, path, where, [])
        for j, p in enumerate(prereq):
            if not isinstance(p, str):
                raise TransferFormatError(f"{path}: field '{where}.prerequisites[{j}]' must be str")
            # a prerequisite case must come earlier, so evaluation order is the manifest's order (no cycles)
            if p.upper() not in CHECKPOINTS | V1_CHECKPOINTS and p not in seen:
                raise TransferFormatError(f"{path}: field '{where}.prerequisites[{j}]': {p!r} is neither a "
                                          "checkpoint (FINAL, V1) nor an earlier case id")
        seen.add(cid)
        cases.append(EvalCase(cid, _field(c, "title", str, path, where, ""), dim, float(weight), tuple(prereq)))
    if not cases:
        raise TransferFormatError(f"{path}: field 'cases' must hold at least one case")
    caps = []
    for i, cap in enumerate(_field(data, "hardCaps", list, path, "", [])):
        where = f"hardCaps[{i}]"
        cap_cases = _field(cap, "cases", list, path, where, [])
        for j, cid in enumerate(cap_cases):
            if cid not in seen:
                raise TransferFormatError(f"{path}: field '{where}.cases[{j}]' names unknown case {cid!r}")
        caps.append(HardCap(_field(cap, "id", str, path, where), float(_field(cap, "cap", (int, float), path, where)),
                            _field(cap, "publicInvariant", str, path, where, ""), tuple(cap_cases)))
    gaps = tuple(_field(data, "specGaps", list, path, "", []))
    checks = _read_json(checks_path)
    module = _field(checks, "module", str, checks_path, "")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", module):
        raise TransferFormatError(f"{checks_path}: field 'module' must be a Python module name")
    defined = _field(checks, "cases", dict, checks_path, "")
    for case in cases:
        check = _field(defined, case.case_id, dict, checks_path, "cases")
        _field(check, "call", str, checks_path, f"cases.{case.case_id}")
        _field(check, "args", list, checks_path, f"cases.{case.case_id}", [])
        if "expect" not in check and "raises" not in check:
            raise TransferFormatError(f"{checks_path}: field 'cases.{case.case_id}.expect' is missing "
                                      "(or give 'raises')")
        if "raises" in check and not (isinstance(check["raises"], str) and check["raises"].isidentifier()):
            # a class name the case runner resolves itself: a built-in exception or the module's attribute
            raise TransferFormatError(f"{checks_path}: field 'cases.{case.case_id}.raises' must be an exception "
                                      "class name (a built-in exception or a name of the module)")
    for extra in sorted(set(defined) - seen):
        raise TransferFormatError(f"{checks_path}: field 'cases.{extra}' is not a case of {path.name}")
    return Evaluator(path, task_id, max_score, tuple(dims), tuple(caps), gaps, tuple(cases),
                     hashlib.sha256(path.read_bytes()).hexdigest(), checks_path)


def load_scenario(path: Path) -> Scenario:
    data = _read_json(path)
    answers = []
    for i, a in enumerate(_field(data, "answers", list, path, "", [])):
        pattern = _field(a, "match", str, path, f"answers[{i}]")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TransferFormatError(f"{path}: field 'answers[{i}].match' is not a regular expression: {exc}") from None
        answers.append((pattern, _field(a, "reply", str, path, f"answers[{i}]")))
    rounds = _field(data, "max_review_rounds", int, path, "", 2)
    if rounds < 1:
        raise TransferFormatError(f"{path}: field 'max_review_rounds' must be at least 1")
    return Scenario(path, _field(data, "plan", str, path, ""), tuple(answers),
                    _field(data, "default_answer", str, path, "", "Please follow the README contract."),
                    _field(data, "accept", str, path, ""), _field(data, "public_check_failed", str, path, ""),
                    _field(data, "test_feedback", str, path, ""), rounds)


def _solution(path: Path, owner: str) -> Solution:
    try:
        return load_solution(path, owner)
    except PackError as exc:
        raise TransferFormatError(str(exc)) from None


def study_digest(root: Path) -> str:
    """SHA-256 over every file of the study (path and content), in path order."""
    digest = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file() and "__pycache__" not in q.parts):
        digest.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return digest.hexdigest()


def load_study(root: Path) -> Study:
    root = Path(root)
    path = root / "study.json"
    if not path.is_file():
        raise TransferFormatError(f"{path}: no study.json (not a transfer study)")
    data = _read_json(path)
    fmt = _field(data, "format", str, path, "")
    if fmt != FORMAT:
        raise TransferFormatError(f"{path}: field 'format' must be {FORMAT!r}, got {fmt!r}")
    name = _plain(_field(data, "name", str, path, ""), path, "name")
    learning = []
    ids: set[str] = set()
    raw_learning = _field(data, "learning", list, path, "")
    if not raw_learning:
        raise TransferFormatError(f"{path}: field 'learning' must list at least one learning task")
    for i, t in enumerate(raw_learning):
        where = f"learning[{i}]"
        tid = _plain(_field(t, "id", str, path, where), path, f"{where}.id")
        if tid in ids:
            raise TransferFormatError(f"{path}: field '{where}.id' repeats {tid!r}")
        ids.add(tid)
        learning.append(LearningTask(
            tid, _inside(root, _field(t, "repo", str, path, where), path, f"{where}.repo", directory=True),
            _field(t, "instruction", str, path, where),
            _inside(root, _field(t, "oracle", str, path, where), path, f"{where}.oracle"),
            _solution(_inside(root, _field(t, "solution", str, path, where), path, f"{where}.solution"), tid)))
    projects = []
    raw_projects = _field(data, "projects", list, path, "")
    if not raw_projects:
        raise TransferFormatError(f"{path}: field 'projects' must list at least one transfer project")
    for i, p in enumerate(raw_projects):
        where = f"projects[{i}]"
        pid = _plain(_field(p, "id", str, path, where), path, f"{where}.id")
        if pid in ids or pid == "learning":
            raise TransferFormatError(f"{path}: field '{where}.id' repeats {pid!r}")
        ids.add(pid)
        workspace = _inside(root, _field(p, "workspace", str, path, where), path, f"{where}.workspace", directory=True)
        if not (workspace / "README.md").is_file():
            raise TransferFormatError(f"{path}: field '{where}.workspace': no README.md (the project's contract)")
        evaluator = load_evaluator(
            _inside(root, _field(p, "evaluator", str, path, where), path, f"{where}.evaluator"),
            _inside(root, _field(p, "cases", str, path, where), path, f"{where}.cases"))
        projects.append(Project(
            pid, workspace, _inside(root, _field(p, "public_check", str, path, where), path, f"{where}.public_check"),
            load_scenario(_inside(root, _field(p, "scenario", str, path, where), path, f"{where}.scenario")),
            evaluator,
            _solution(_inside(root, _field(p, "solution", str, path, where), path, f"{where}.solution"), pid)))
    native = _inside(root, _field(data, "native_bank", str, path, ""), path, "native_bank", directory=True)
    ablate = _field(data, "ablate_skill", str, path, "")
    if ablate not in {t.task_id for t in learning}:
        raise TransferFormatError(f"{path}: field 'ablate_skill': {ablate!r} is not a learning task id "
                                  "(the scripted distiller names each skill after its task)")
    conditions = _field(data, "conditions", list, path, "", list(CONDITIONS))
    for j, c in enumerate(conditions):
        if c not in CONDITIONS:
            raise TransferFormatError(f"{path}: field 'conditions[{j}]': unknown condition {c!r} "
                                      f"(known: {', '.join(CONDITIONS)})")
    return Study(name, root, study_digest(root), tuple(learning), tuple(projects), native, ablate, tuple(conditions))
