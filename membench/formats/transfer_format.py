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

from membench.formats.fields import MAX_INPUT_BYTES, is_plain_name, relative_path_problem, unknown_key_problem
from membench.formats.pack_format import PackError, Solution, load_solution

FORMAT = "membench-transfer/1"
CONDITIONS = ("no_memory", "learned_bank", "native_bank", "ablated_bank")
PHASES = ("plan_handoff", "implementing", "delivery", "delivery_review", "freezing", "testing", "test_feedback",
          "finished")
#: prerequisites naming a checkpoint or an evaluator capability rather than a case, as EngramBench's
#: published v2 manifests use them (docs/transfer.md, "Prerequisites"): FINAL is the final submission;
#: PERF, PERFORMANCE and PERF_V1 the performance profile (version 1 of the evaluator's load profile) run
#: against that submission; CHROMIUM the headless browser the evaluator drives for UI cases. Here each is the frozen
#: submission or something the case's own executable check provides, so it is always there and the
#: case stays applicable. A V1 checkpoint (a frozen mid-project submission) does not exist in this
#: protocol, so such a case is not applicable (membench/analytics/ccpf.py keeps the same two sets).
CHECKPOINTS = frozenset({"FINAL", "PERF", "PERFORMANCE", "PERF_V1", "CHROMIUM"})
V1_CHECKPOINTS = frozenset({"V1", "V1_CHECKPOINT", "FROZEN_V1_CHECKPOINT"})

# the keys each object may carry (published manifest keys included); any other is refused naming the
# file, the key path and the nearest known key
STUDY_KEYS = frozenset({"format", "name", "description", "learning", "projects", "native_bank", "ablate_skill",
                        "conditions"})
LEARNING_KEYS = frozenset({"id", "repo", "instruction", "oracle", "solution"})
PROJECT_KEYS = frozenset({"id", "workspace", "public_check", "scenario", "evaluator", "cases", "solution"})
SCENARIO_KEYS = frozenset({"plan", "answers", "default_answer", "accept", "public_check_failed", "test_feedback",
                           "max_review_rounds"})
ANSWER_KEYS = frozenset({"match", "reply"})
CHECKS_KEYS = frozenset({"module", "cases", "hardCaps"})
CHECK_KEYS = frozenset({"call", "args", "expect", "raises"})
#: EngramBench's `*.manifest.v2.json` as published (schemaVersion 2): the keys membench reads
MANIFEST_READ_KEYS = frozenset({"taskId", "maxScore", "acceptance", "dimensions", "hardCaps", "specGaps", "cases"})
#: the published keys membench accepts and does not read, and why (docs/transfer.md lists them too).
#: The manifest itself is kept unmodified: its SHA-256 is recorded with every transfer run.
MANIFEST_IGNORED_KEYS = {
    "schemaVersion": "the manifest format's version (2); the keys below are what membench checks",
    "profile": "the evaluator profile label (e.g. transfer-v2)",
    "designVersion": "the label of the evaluator's design revision (e.g. hidden-test-v2)",
    "policyRevision": "the label of the task's policy revision",
    "evaluationScope": "what the authors' evaluator targets (e.g. final-system)",
    "semanticRevisions": "the authors' notes on how cases' meaning changed (case ids and a summary)",
    "formalReady": "the authors' release flag; it does not change how cases are scored",
    "alignmentNotes": "the authors' notes on the manifest's revision",
    "resolvedSpecGaps": "spec gaps closed in this revision (prose and the authors' regression tests)",
    "_provenance": "added by a copy of the manifest, not by its authors",
}
#: per case: `blockedAssertions` lists assertions the authors' executable check does not make yet
#: (each `blockedBy` a spec gap); membench runs cases.json's check, so they do not apply here
CASE_IGNORED_KEYS = {
    "blockedAssertions": "assertions of the authors' own check that a spec gap blocks",
    "policyRevision": "the policy revision the case was last revised under",
    "evaluationScope": "what the authors' check of the case targets",
}
MANIFEST_KEYS = MANIFEST_READ_KEYS | frozenset(MANIFEST_IGNORED_KEYS)
DIMENSION_KEYS = frozenset({"title", "name", "weight"})
CASE_KEYS = frozenset({"id", "title", "dimension", "weight", "prerequisites"}) | frozenset(CASE_IGNORED_KEYS)
ACCEPTANCE_KEYS = frozenset({"mode"})
#: the acceptance rule membench implements: every applicable case passed
ACCEPTANCE_MODE = "all_cases_pass"
HARD_CAP_KEYS = frozenset({"id", "cap", "publicInvariant", "cases"})
DIMENSION = re.compile(r"[A-Z]")


class TransferFormatError(ValueError):
    """A malformed study: the message names the file and the field."""


class MissingChecksError(TransferFormatError):
    """Manifest cases without an executable check in cases.json: every one of them, in one message."""

    def __init__(self, checks_path: Path, manifest: Path, missing: list[str], total: int, *, absent: bool = False):
        self.checks_path, self.manifest, self.missing, self.total, self.absent = (checks_path, manifest, missing,
                                                                                  total, absent)
        super().__init__(f"{self.summary()} {MAPPING_HELP}")

    def summary(self) -> str:
        where = f"{self.checks_path}: does not exist, so" if self.absent else f"{self.checks_path}:"
        verb = "has" if len(self.missing) == 1 else "have"
        return (f"{where} {len(self.missing)} of the {self.total} cases of {self.manifest.name} {verb} no executable "
                f"check: {', '.join(self.missing)}.")


#: what a user who points a study at a published manifest needs to hear: the manifest names cases,
#: cases.json is where each one becomes something runnable
MAPPING_HELP = ("A published EngramBench manifest carries each case's id, title, weight and prerequisites, not its "
                "check (the authors' checks are their own evaluator's code); cases.json is the mapping file that "
                "gives every case id one executable check: {\"module\": M, \"cases\": {\"A-01\": {\"call\": F, "
                "\"args\": [...], \"expect\": V}}} (or \"raises\": \"ValueError\" instead of \"expect\"), run as "
                "M.F(*args) against the frozen submission (docs/transfer.md, \"cases.json\").")


def _known(obj: Any, known: frozenset[str], path: Path, where: str) -> None:
    if isinstance(obj, dict):
        problem = unknown_key_problem(obj, known, where)
        if problem is not None:
            raise TransferFormatError(f"{path}: {problem}")


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
    cases: tuple[str, ...]  # the cap fires when any of these does not pass: cases.json's hardCaps mapping


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
    checks_path: Path  # cases.json: {"module": ..., "cases": {case id: check}, "hardCaps": {cap id: [case id]}}
    warnings: tuple[str, ...] = ()  # e.g. a hard cap with no case mapping, which can never fire
    ignored_keys: tuple[str, ...] = ()  # keys of this manifest accepted and not read (MANIFEST_IGNORED_KEYS, ...)


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


def _inside(root: Path, rel: Any, path: Path, name: str, *, directory: bool = False, must_exist: bool = True) -> Path:
    problem = relative_path_problem(rel)
    if problem:
        raise TransferFormatError(f"{path}: field '{name}' {problem}")
    target = (root / rel).resolve()
    if not target.is_relative_to(root.resolve()):
        raise TransferFormatError(f"{path}: field '{name}' leaves the study directory")
    if directory and not target.is_dir():
        raise TransferFormatError(f"{path}: field '{name}': {rel} is not a directory")
    if not directory and must_exist and not target.is_file():
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
    _known(data, MANIFEST_KEYS, path, "")
    ignored = [k for k in data if k in MANIFEST_IGNORED_KEYS]
    task_id = _field(data, "taskId", str, path, "")
    acceptance = _field(data, "acceptance", dict, path, "", {})
    _known(acceptance, ACCEPTANCE_KEYS, path, "acceptance")
    mode = _field(acceptance, "mode", str, path, "acceptance", ACCEPTANCE_MODE)
    if mode != ACCEPTANCE_MODE:
        raise TransferFormatError(f"{path}: field 'acceptance.mode' is {mode!r}; membench accepts a transfer run "
                                  f"when every applicable case passed ({ACCEPTANCE_MODE!r}) and implements no other")
    max_score = float(_field(data, "maxScore", (int, float), path, "", 100))
    raw_dims = _field(data, "dimensions", dict, path, "")
    dims = []
    for key in sorted(raw_dims):
        if not DIMENSION.fullmatch(key):
            raise TransferFormatError(f"{path}: field 'dimensions.{key}' must be one capital letter")
        d = raw_dims[key]
        _known(d, DIMENSION_KEYS, path, f"dimensions.{key}")
        weight = _field(d, "weight", (int, float), path, f"dimensions.{key}")
        if weight < 0:
            raise TransferFormatError(f"{path}: field 'dimensions.{key}.weight' must not be negative")
        # published manifests title a dimension with `title` or (escrowguard's form) `name`
        title = _field(d, "title", str, path, f"dimensions.{key}", "") or _field(d, "name", str, path,
                                                                                 f"dimensions.{key}", "")
        dims.append(Dimension(key, title, float(weight)))
    if not dims:
        raise TransferFormatError(f"{path}: field 'dimensions' must name at least one dimension")
    raw_cases = _field(data, "cases", list, path, "")
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for i, c in enumerate(raw_cases):
        where = f"cases[{i}]"
        _known(c, CASE_KEYS, path, where)
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
                raise TransferFormatError(
                    f"{path}: field '{where}.prerequisites[{j}]': {p!r} is neither a checkpoint "
                    f"({', '.join(sorted(CHECKPOINTS | V1_CHECKPOINTS))}) nor an earlier case id"
                    + (f" (earlier cases: {', '.join(sorted(seen))})" if seen else " (no case comes before it)"))
        seen.add(cid)
        ignored += [f"cases[].{k}" for k in c if k in CASE_IGNORED_KEYS and f"cases[].{k}" not in ignored]
        cases.append(EvalCase(cid, _field(c, "title", str, path, where, ""), dim, float(weight), tuple(prereq)))
    if not cases:
        raise TransferFormatError(f"{path}: field 'cases' must hold at least one case")
    if not checks_path.is_file():
        raise MissingChecksError(checks_path, path, [c.case_id for c in cases], len(cases), absent=True)
    checks = _read_json(checks_path)
    _known(checks, CHECKS_KEYS, checks_path, "")
    # published hard caps carry no case list: the mapping from a cap to the cases whose failure fires
    # it is authored in cases.json's `hardCaps` ({cap id: [case id]}), so the manifest stays unmodified
    cap_map = _field(checks, "hardCaps", dict, checks_path, "", {})
    caps, warnings = [], []
    for i, cap in enumerate(_field(data, "hardCaps", list, path, "", [])):
        where = f"hardCaps[{i}]"
        _known(cap, HARD_CAP_KEYS, path, where)
        cap_id = _field(cap, "id", str, path, where)
        cap_cases = _field(cap, "cases", list, path, where, [])
        mapped = _field(cap_map, cap_id, list, checks_path, "hardCaps", [])
        if cap_cases and mapped:
            raise TransferFormatError(f"{checks_path}: field 'hardCaps.{cap_id}' maps a cap whose manifest entry "
                                      f"{path.name} '{where}.cases' already lists its cases (give one of the two)")
        for j, cid in enumerate(cap_cases):
            if cid not in seen:
                raise TransferFormatError(f"{path}: field '{where}.cases[{j}]' names unknown case {cid!r}")
        for j, cid in enumerate(mapped):
            if cid not in seen:
                raise TransferFormatError(f"{checks_path}: field 'hardCaps.{cap_id}[{j}]' names unknown case {cid!r} "
                                          f"(not a case of {path.name})")
        cases_of_cap = tuple(cap_cases or mapped)
        if not cases_of_cap:
            warnings.append(f"{path}: hard cap {cap_id} cannot fire without a case mapping: list the cases whose "
                            f"failure breaks its invariant in {checks_path.name} as \"hardCaps\": "
                            f"{{\"{cap_id}\": [case id, ...]}}")
        caps.append(HardCap(cap_id, float(_field(cap, "cap", (int, float), path, where)),
                            _field(cap, "publicInvariant", str, path, where, ""), cases_of_cap))
    for extra in sorted(set(cap_map) - {c.cap_id for c in caps}):
        raise TransferFormatError(f"{checks_path}: field 'hardCaps.{extra}' is not a hard cap of {path.name}")
    gaps = tuple(_field(data, "specGaps", list, path, "", []))
    module = _field(checks, "module", str, checks_path, "")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", module):
        raise TransferFormatError(f"{checks_path}: field 'module' must be a Python module name")
    defined = _field(checks, "cases", dict, checks_path, "")
    # every case without a check at once: a study built on a published manifest lacks them all
    missing = [c.case_id for c in cases if defined.get(c.case_id) is None]
    if missing:
        raise MissingChecksError(checks_path, path, missing, len(cases))
    for case in cases:
        check = _field(defined, case.case_id, dict, checks_path, "cases")
        _known(check, CHECK_KEYS, checks_path, f"cases.{case.case_id}")
        _field(check, "call", str, checks_path, f"cases.{case.case_id}")
        _field(check, "args", list, checks_path, f"cases.{case.case_id}", [])
        if "expect" in check and "raises" in check:
            # the case runner would check only `raises`: the expected value would be dead text
            raise TransferFormatError(f"{checks_path}: field 'cases.{case.case_id}' gives both 'expect' and "
                                      "'raises': a case either returns a value or raises, give one")
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
                     hashlib.sha256(path.read_bytes()).hexdigest(), checks_path, tuple(warnings), tuple(ignored))


def load_scenario(path: Path) -> Scenario:
    data = _read_json(path)
    _known(data, SCENARIO_KEYS, path, "")
    answers = []
    for i, a in enumerate(_field(data, "answers", list, path, "", [])):
        _known(a, ANSWER_KEYS, path, f"answers[{i}]")
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


BANK_MANIFEST = "MANIFEST.sha256"


def _verify_native_bank(bank: Path, path: Path) -> None:
    """The hand-authored bank must match its `MANIFEST.sha256` (`sha256sum` format: one line
    `<64 hex>  <path relative to the bank>` per file, the manifest itself not listed), as
    membench/memory_systems/skill_bank.py verifies every bank it mounts. A missing or stale manifest
    is the author's mistake to fix, not something to re-freeze silently: the run would otherwise
    record a digest of a bank nobody reviewed."""
    manifest = bank / BANK_MANIFEST
    fix = (f"regenerate it after editing the skills: (cd {bank.name} && find . -type f ! -name {BANK_MANIFEST} "
           f"-printf '%P\\n' | sort | xargs sha256sum > {BANK_MANIFEST})")
    if not manifest.is_file():
        raise TransferFormatError(f"{path}: field 'native_bank': {manifest} is missing; {fix}")
    listed: dict[str, str] = {}
    text = manifest.read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        digest, _, rel = line.partition("  ")
        if not re.fullmatch(r"[0-9a-f]{64}", digest) or not rel:
            raise TransferFormatError(f"{manifest}: line {n}: expected '<sha256>  <path>'")
        listed[rel] = digest
    present = {q.relative_to(bank).as_posix() for q in bank.rglob("*") if q.is_file() and q.name != BANK_MANIFEST}
    for rel in sorted(present - set(listed)):
        raise TransferFormatError(f"{path}: field 'native_bank': {rel} is not listed in {manifest} (stale); {fix}")
    for rel, digest in sorted(listed.items()):
        target = bank / rel
        if not target.is_file():
            raise TransferFormatError(f"{path}: field 'native_bank': {rel} is listed in {manifest} but missing; {fix}")
        if hashlib.sha256(target.read_bytes()).hexdigest() != digest:
            raise TransferFormatError(f"{path}: field 'native_bank': {rel} does not match its SHA-256 in {manifest} "
                                      f"(stale); {fix}")


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
    _known(data, STUDY_KEYS, path, "")
    name = _plain(_field(data, "name", str, path, ""), path, "name")
    learning = []
    ids: set[str] = set()
    raw_learning = _field(data, "learning", list, path, "")
    if not raw_learning:
        raise TransferFormatError(f"{path}: field 'learning' must list at least one learning task")
    for i, t in enumerate(raw_learning):
        where = f"learning[{i}]"
        _known(t, LEARNING_KEYS, path, where)
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
    missing_checks: list[MissingChecksError] = []
    raw_projects = _field(data, "projects", list, path, "")
    if not raw_projects:
        raise TransferFormatError(f"{path}: field 'projects' must list at least one transfer project")
    for i, p in enumerate(raw_projects):
        where = f"projects[{i}]"
        _known(p, PROJECT_KEYS, path, where)
        pid = _plain(_field(p, "id", str, path, where), path, f"{where}.id")
        if pid in ids or pid == "learning":
            raise TransferFormatError(f"{path}: field '{where}.id' repeats {pid!r}")
        ids.add(pid)
        workspace = _inside(root, _field(p, "workspace", str, path, where), path, f"{where}.workspace", directory=True)
        if not (workspace / "README.md").is_file():
            raise TransferFormatError(f"{path}: field '{where}.workspace': no README.md (the project's contract)")
        try:
            # a missing cases.json is reported with the cases it leaves without a check
            evaluator = load_evaluator(
                _inside(root, _field(p, "evaluator", str, path, where), path, f"{where}.evaluator"),
                _inside(root, _field(p, "cases", str, path, where), path, f"{where}.cases", must_exist=False))
        except MissingChecksError as exc:
            missing_checks.append(exc)  # the other projects' missing checks go in the same message
            continue
        projects.append(Project(
            pid, workspace, _inside(root, _field(p, "public_check", str, path, where), path, f"{where}.public_check"),
            load_scenario(_inside(root, _field(p, "scenario", str, path, where), path, f"{where}.scenario")),
            evaluator,
            _solution(_inside(root, _field(p, "solution", str, path, where), path, f"{where}.solution"), pid)))
    if len(missing_checks) == 1:
        raise missing_checks[0]
    if missing_checks:
        count = sum(len(e.missing) for e in missing_checks)
        raise TransferFormatError(f"{path}: {count} manifest cases have no executable check: "
                                  + " ".join(e.summary() for e in missing_checks) + " " + MAPPING_HELP)
    native = _inside(root, _field(data, "native_bank", str, path, ""), path, "native_bank", directory=True)
    _verify_native_bank(native, path)
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
