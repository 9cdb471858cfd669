"""The native task-pack format (docs/design.md §4): a manifest, fixture repositories, hidden parts.

```
PACK/manifest.json           the sequences (agent-visible instructions and events; labels)
PACK/repos/<name>/           small fixture repositories (the clean base of a sequence)
PACK/hidden/<seq_id>/<oracle_id>.py         hidden pytest oracle of one session
PACK/hidden/<seq_id>/s<index>.solution.json reference solution of one session, as a template:
    {"files": {path: text with {{SLOT:name}}}, "slots": {name: {"answer", "pattern", "default"}}}
PACK/hidden/<seq_id>/<oracle_id>/<path>      hidden files of a session scored by `scoring` rules
```
Optional, backward-compatible manifest fields (imported packs use them; native packs need none):
- top level `curated_context` (the text a `curated_file` condition shows) and `conditions` (the
  conditions the pack was published with: for an imported pack its source benchmark's condition
  names, which `membench score` accepts as labels of predictions made elsewhere);
- top level `resolution_policy` (`RESOLUTION_POLICIES`, default `patch_as_submitted`): how a
  session's resolution is decided, carried into every run's `RunStarted` (membench/processors/failure.py):
  `patch_as_submitted` — the oracle's verdict on the submitted patch decides (DreamBench-SWE, the
  native packs); `agent_must_finish` — an agent that timed out or overflowed its context fails the
  session even when its patch passes (the coding-agent A/B benchmark; its importer declares it);
- per session `mode`: `task` (default: the agent acts, the oracle scores) or `history` (a recorded
  earlier session replayed as evidence: no agent, no scoring, its events follow it);
- per session `scoring`: `commands` (argv lists run in the scoring checkout), `hidden_files`
  (paths written into that checkout only at scoring time), `allowed_paths`, `forbidden_paths`,
  `required_patch_patterns`, `forbidden_patch_patterns` (substrings on added diff lines),
  `timeout_s`; such a session is scored by these rules instead of a pytest oracle file;
- per sequence `gold_labels`: labels in the OracleLabel event shape (`label_id`, `label_type`,
  `active_session`, `event_ids`, `fact_ids`) delivered to processors as harness-visible events;
- per sequence `source_memories`: {condition: {memory id: pack event id}} — for an imported pack,
  the memories a source condition's own memory store held, under the ids its agent cites (the A/B
  benchmark's `remem` numbers a fresh database's memories `memory:#1`, `#2`, … in the order they
  were seeded), each with the pack event that carries it. `membench score` records them for
  predictions under that label (membench/memory_systems/declared.py), so their memory contract
  is known without membench running that memory system. Each condition must be one of `conditions`
  and each event one of the sequence's events.
`hidden/` never enters an agent's sandbox. The loader rejects a malformed pack before any run,
naming the file, the sequence and the field.

A pack is untrusted input, so the loader also confines it: the manifest and every reference
solution are read within `MAX_INPUT_BYTES` (16 MiB) as strict UTF-8; the pack name, sequence ids
and oracle ids are plain names (`membench.formats.fields.PLAIN_NAME`: they become path components); every
field naming a file — `repos`, `visible_files`, event `scope.files`, `scoring.hidden_files`,
`skill_bank`, a solution's `files` — is a relative path without '..' that resolves inside its
directory (the pack, the repository, the session's hidden directory, the workspace); and no
symbolic link anywhere in the pack points outside it (a finalized copy or a scoring checkout would
otherwise carry a host file such as a private key into an agent's reach).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.formats.fields import (PLAIN_NAME_RULE, is_plain_name, read_input_text, relative_path_problem, typed_field,
                           unknown_key_problem)

FORMAT = "membench-pack"
CONSTRUCTS = tuple(f"C{i}" for i in range(1, 11))
# the constructs' names, DreamBench-SWE Table 30 ("Construct labels from the construct-taxonomy appendix")
CONSTRUCT_NAMES = {
    "C1": "Verbatim retention",
    "C2": "Retrieval precision under interference",
    "C3": "Staleness detection and supersession",
    "C4": "Update propagation / regression avoidance",
    "C5": "Scope discipline",
    "C6": "Contradiction handling / provenance conflict",
    "C7": "Cross-session synthesis / paraphrase-retention application",
    "C8": "Procedural / source-of-truth memory",
    "C9": "Spurious-lesson rejection / disconfirmation",
    "C10": "Abstention / confabulation resistance",
}
SLOT = re.compile(r"\{\{SLOT:([A-Za-z0-9_]+)\}\}")
SECRET = re.compile(r"\{\{SECRET:([A-Za-z0-9_]+):([A-Za-z0-9_]+)\}\}")
# anything that starts like a secret placeholder, well-formed or not (a leftover after finalize)
SECRET_LIKE = re.compile(r"\{\{\s*SECRET\b[^}]*\}?\}?")
# the format classes of generated secrets (membench/packs/finalize.py holds one generator per class)
SECRET_CLASSES = ("hex8", "hex12", "hex16", "token", "word", "int")
# constructs whose trap must not be solvable from one injected event (docs/design.md §4)
NO_SINGLE_EVENT_CONSTRUCTS = ("C2", "C3", "C6", "C7")


class PackError(ValueError):
    """A pack that cannot be used; the message names the file, the sequence and the field."""


# Every key the format knows, per object (docs/authoring.md lists them with their meaning). Any other
# key is refused with its key path and the nearest known key: a misspelt optional field would
# otherwise fall back to its default silently. Keys marked "recorded" are kept in the manifest for
# provenance and never read by membench (docs/authoring.md, "Fields membench does not read").
MANIFEST_KEYS = frozenset({
    "format", "format_version", "pack", "description", "repos", "sequences", "curated_context", "conditions",
    "resolution_policy", "skill_bank",
    "source",  # recorded: where an imported pack came from
})
SEQUENCE_KEYS = frozenset({
    "seq_id", "construct", "family", "repo", "sessions", "events", "clean_start_s3", "oracle_labels",
    "decisive_literals", "required_fact_ids", "event_fact_map", "why_not_verbatim", "gold_labels",
    "curated_context", "secrets", "anti_hoarding", "skeleton_id", "source_memories",
    # recorded: DreamBench-SWE's record fields and an importer's notes
    "initial_state", "newest_event_heuristic_fails", "smoke", "timeout_ms", "seq_type", "commission_checks",
    "omission_checks", "single_event_complete_answer", "validation_metadata",
})
SESSION_KEYS = frozenset({"index", "instruction", "oracle_id", "visible_files", "inject_after", "start_state", "mode",
                          "scoring"})
EVENT_KEYS = frozenset({"event_id", "after_session", "kind", "content", "scope"})
SCOPE_KEYS = frozenset({"files", "symbols", "repo", "sequence_id"})
SCORING_KEYS = frozenset({"commands", "hidden_files", "allowed_paths", "forbidden_paths", "required_patch_patterns",
                          "forbidden_patch_patterns", "timeout_s"})
ORACLE_LABEL_KEYS = frozenset({
    "label_id", "type", "active_session", "event_ids", "fact_ids", "cases",
    # recorded: DreamBench-SWE's per-type label detail (kept in the OracleLabel's `detail`)
    "metric", "stale_fact", "active_fact", "old_memory", "new_memory", "bad_action", "required_memory",
    "harmful_memory",
})
GOLD_LABEL_KEYS = frozenset({"label_id", "label_type", "active_session", "event_ids", "fact_ids"})
SOLUTION_KEYS = frozenset({"files", "slots"})
SLOT_KEYS = frozenset({"answer", "pattern", "default"})


def _known(obj: dict[str, Any], known: frozenset[str], where: str, path: str = "") -> None:
    problem = unknown_key_problem(obj, known, path)
    if problem is not None:
        raise PackError(f"{where}: {problem}")


SESSION_MODES = ("task", "history")
# how a session's resolution is decided (module doc; membench/processors/failure.py applies it)
RESOLUTION_POLICIES = ("patch_as_submitted", "agent_must_finish")


@dataclass(frozen=True)
class ScoringRules:
    """Scoring by commands plus path and patch-pattern rules (the coding-agent A/B benchmark's
    oracle shape), used instead of a pytest oracle file when a session declares `scoring`."""

    commands: tuple[tuple[str, ...], ...]
    hidden_files: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = ()
    required_patch_patterns: tuple[str, ...] = ()
    forbidden_patch_patterns: tuple[str, ...] = ()
    timeout_s: float | None = None


@dataclass(frozen=True)
class SessionSpec:
    index: int
    instruction: str
    oracle_id: str
    visible_files: tuple[str, ...] = ()
    inject_after: tuple[str, ...] = ()
    start_state: str = "continuation"  # or "clean"
    mode: str = "task"  # or "history": replayed evidence, no agent, no scoring
    scoring: ScoringRules | None = None


@dataclass(frozen=True)
class PackEvent:
    event_id: str
    after_session: int
    kind: str  # human_feedback / review / decision / contradiction / failure / ...
    content: str
    scope_files: tuple[str, ...] = ()
    scope_symbols: tuple[str, ...] = ()


@dataclass(frozen=True)
class Slot:
    name: str
    answer: str
    pattern: str  # a regex with one group, searched in the agent's context
    default: str  # the plausible wrong value a memory-less agent writes


@dataclass(frozen=True)
class Solution:
    files: dict[str, str]
    slots: dict[str, Slot]

    def render(self, values: dict[str, str]) -> dict[str, str]:
        return {path: SLOT.sub(lambda m: values[m.group(1)], text) for path, text in self.files.items()}

    def reference(self) -> dict[str, str]:
        return self.render({name: slot.answer for name, slot in self.slots.items()})


@dataclass(frozen=True)
class Sequence:
    seq_id: str
    construct: str
    family: str
    repo: str
    sessions: tuple[SessionSpec, ...]
    events: tuple[PackEvent, ...]
    clean_start_s3: bool = False
    oracle_labels: tuple[dict[str, Any], ...] = ()
    decisive_literals: tuple[str, ...] = ()
    required_fact_ids: tuple[str, ...] = ()
    event_fact_map: dict[str, list[str]] = field(default_factory=dict)
    why_not_verbatim: str | None = None
    gold_labels: tuple[dict[str, Any], ...] = ()
    # native hygiene packs (format_version 2): the trap's own curated MEMORY.md text, its declared
    # secrets {name: class}, the anti-hoarding flag and the skeleton it was authored from
    curated_context: str = ""
    secrets: dict[str, str] = field(default_factory=dict)
    anti_hoarding: bool = False
    skeleton_id: str | None = None
    # condition -> memory id -> pack event id (module doc: `source_memories`)
    source_memories: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def scored_session(self) -> SessionSpec:
        return self.sessions[-1]


@dataclass(frozen=True)
class Pack:
    name: str
    root: Path
    sequences: tuple[Sequence, ...]
    repos: dict[str, Path]
    digest: str
    description: str = ""
    curated_context: str = ""
    conditions: tuple[str, ...] = ()
    skill_bank: Path | None = None  # a frozen SKILL.md directory with a SHA-256 manifest
    format_version: int = 1
    resolution_policy: str = "patch_as_submitted"  # RESOLUTION_POLICIES

    def sequence(self, seq_id: str) -> Sequence:
        for seq in self.sequences:
            if seq.seq_id == seq_id:
                return seq
        raise KeyError(seq_id)

    def oracle_path(self, seq: Sequence, session: SessionSpec) -> Path:
        return self.root / "hidden" / seq.seq_id / f"{session.oracle_id}.py"

    def hidden_files_dir(self, seq: Sequence, session: SessionSpec) -> Path:
        """Where the hidden files of a `scoring`-rules session live."""
        return self.root / "hidden" / seq.seq_id / session.oracle_id

    def solution_path(self, seq: Sequence, session: SessionSpec) -> Path:
        return self.root / "hidden" / seq.seq_id / f"s{session.index}.solution.json"

    def solution(self, seq: Sequence, session: SessionSpec) -> Solution:
        return load_solution(self.solution_path(seq, session), seq.seq_id)


def pack_digest(root: Path) -> str:
    """SHA-256 over every file of the pack (path and content), the pack's frozen identity."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        rel = path.relative_to(root).as_posix()
        if rel == "provenance.json":
            continue
        digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _require(obj: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str) -> Any:
    # a manifest's null is a wrong type, not an absent field
    return typed_field(obj, key, typ, where, error=PackError, none_is_missing=False)


def _plain_name(obj: dict[str, Any], key: str, where: str) -> str:
    """obj[key], a string that is safe as one path component (`membench.formats.fields.PLAIN_NAME`)."""
    value = _require(obj, key, str, where)
    if not is_plain_name(value):
        raise PackError(f"{where}: field '{key}' must be a plain name ({PLAIN_NAME_RULE}), got {value!r}")
    return value


def _confined(base: Path, rel: Any, where: str, key: str, inside: str) -> Path:
    """BASE / REL when REL is a relative path without '..' that resolves (symbolic links
    followed) inside BASE; otherwise a PackError naming `where` and the field. REL need not exist."""
    problem = relative_path_problem(rel)
    if problem is not None:
        raise PackError(f"{where}: field '{key}' names {rel!r}, which {problem}; it must name a path inside {inside}")
    path = base / rel
    if not _resolve(path, where).is_relative_to(base.resolve()):
        raise PackError(f"{where}: field '{key}' names '{rel}', which resolves outside {inside} (symbolic link)")
    return path


def _resolve(path: Path, where: str) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # a symbolic link loop
        raise PackError(f"{where}: cannot resolve {path} ({exc})") from None


def _check_links(root: Path) -> None:
    """Refuse a symbolic link anywhere under ROOT that points outside it (dangling or not)."""
    real = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink() and not _resolve(path, str(path)).is_relative_to(real):
                raise PackError(f"{path}: symbolic link to '{os.readlink(path)}' points outside the pack {root}")


def load_solution(path: Path, seq_id: str = "?") -> Solution:
    where = f"{path}: sequence {seq_id}"
    if not path.exists():
        raise PackError(f"{where}: missing reference solution file")
    try:
        raw = json.loads(read_input_text(path, PackError))
    except json.JSONDecodeError as exc:
        raise PackError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise PackError(f"{where}: must be a JSON object")
    _known(raw, SOLUTION_KEYS, where)
    files = _require(raw, "files", dict, where)
    for rel in files:  # written into the agent's workspace by the scripted agents
        problem = relative_path_problem(rel)
        if problem is not None:
            raise PackError(f"{where}: field 'files' names {rel!r}, which {problem}; it must stay inside the workspace")
    slots = {}
    for name, spec in _require(raw, "slots", dict, where).items():
        slot_where = f"{where}: slot '{name}'"
        if not isinstance(spec, dict):
            raise PackError(f"{slot_where}: must be an object {{answer, pattern, default}}")
        _known(spec, SLOT_KEYS, where, f"slots.{name}")
        slots[name] = Slot(name, _require(spec, "answer", str, slot_where), _require(spec, "pattern", str, slot_where),
                           _require(spec, "default", str, slot_where))
        try:
            if re.compile(slots[name].pattern).groups != 1:
                raise PackError(f"{slot_where}: field 'pattern' must have exactly one group")
        except re.error as exc:
            raise PackError(f"{slot_where}: field 'pattern' is not a regex ({exc})") from None
    for text in files.values():
        for used in SLOT.findall(text):
            if used not in slots:
                raise PackError(f"{where}: field 'files' uses undeclared slot '{used}'")
    return Solution(dict(files), slots)


#: the list an importer writes beside a pack it could not complete: one `- `path` — what` line per part
SUPPLY_FILE = "SUPPLY.md"
SUPPLY_LINE = re.compile(r"^- `([^`]+)` — (.+)$")


def _check_supplied(root: Path) -> None:
    """An imported pack whose SUPPLY.md still lists parts that are not there is refused naming all of
    them, so the user supplies everything in one pass instead of one refusal per missing file."""
    supply = root / SUPPLY_FILE
    if not supply.is_file():
        return
    listed = [m.groups() for m in map(SUPPLY_LINE.match, read_input_text(supply, PackError).splitlines()) if m]
    missing = []
    for rel, what in listed:
        target = _confined(root, rel.rstrip("/"), str(supply), "SUPPLY.md", "the pack")
        if not (target.is_dir() if rel.endswith("/") else target.is_file()):
            missing.append(f"{rel} ({what})")
    if missing:
        raise PackError(f"{root}: an incomplete import: {len(missing)} of the {len(listed)} parts listed in {supply} "
                        f"are still missing: {'; '.join(missing)}. Put them in place (paths relative to the pack), "
                        "then run `membench validate` on it again")


def load_pack(root: Path, check_hidden: bool = True) -> Pack:
    root = Path(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.exists():
        raise PackError(f"{root}: no manifest.json (not a membench pack)")
    _check_links(root)
    _check_supplied(root)
    try:
        raw = json.loads(read_input_text(manifest_path, PackError))
    except json.JSONDecodeError as exc:
        raise PackError(f"{manifest_path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    where = str(manifest_path)
    if not isinstance(raw, dict):
        raise PackError(f"{where}: must be a JSON object")
    if raw.get("format") != FORMAT:
        raise PackError(f"{where}: field 'format' must be '{FORMAT}'")
    _known(raw, MANIFEST_KEYS, where)
    name = _plain_name(raw, "pack", where)
    format_version = raw.get("format_version", 1)
    if isinstance(format_version, bool) or not isinstance(format_version, int) or format_version not in (1, 2):
        raise PackError(f"{where}: field 'format_version' must be 1 or 2")
    repos = {}
    for repo_name, rel in _require(raw, "repos", dict, where).items():
        repo_path = _confined(root, rel, where, f"repos.{repo_name}", "the pack")
        if not repo_path.is_dir():
            raise PackError(f"{where}: field 'repos.{repo_name}' points to a missing directory '{rel}'")
        repos[repo_name] = repo_path
    sequences = []
    seen: set[str] = set()
    for i, seq_raw in enumerate(_require(raw, "sequences", list, where)):
        seq_where = f"{where}: sequences[{i}]"
        if not isinstance(seq_raw, dict):
            raise PackError(f"{seq_where}: must be an object")
        seq_id = _plain_name(seq_raw, "seq_id", seq_where)
        _known(seq_raw, SEQUENCE_KEYS, f"{where}: sequence {seq_id}", f"sequences[{i}]")
        seq_where = f"{where}: sequence {seq_id}"
        if seq_id in seen:
            raise PackError(f"{seq_where}: field 'seq_id' is duplicated")
        seen.add(seq_id)
        construct = _require(seq_raw, "construct", str, seq_where)
        if construct not in CONSTRUCTS:
            raise PackError(f"{seq_where}: field 'construct' must be one of C1..C10, got '{construct}'")
        repo = _require(seq_raw, "repo", str, seq_where)
        if repo not in repos:
            raise PackError(f"{seq_where}: field 'repo' names unknown repository '{repo}'")
        sessions = []
        for j, s in enumerate(_require(seq_raw, "sessions", list, seq_where)):
            s_where = f"{seq_where}: sessions[{j}]"
            if not isinstance(s, dict):
                raise PackError(f"{s_where}: must be an object")
            _known(s, SESSION_KEYS, seq_where, f"sequences[{i}].sessions[{j}]")
            index = _require(s, "index", int, s_where)
            if index != j + 1:
                raise PackError(f"{s_where}: field 'index' must be {j + 1}")
            mode = s.get("mode", "task")
            if mode not in SESSION_MODES:
                raise PackError(f"{s_where}: field 'mode' must be one of {', '.join(SESSION_MODES)}, got '{mode}'")
            oracle_id = _plain_name(s, "oracle_id", s_where) if mode == "task" or s.get("oracle_id") else ""
            visible = _str_list(s, "visible_files", s_where)
            for rel in visible:
                _confined(repos[repo], rel, s_where, "visible_files", f"repository '{repo}'")
            scoring = _scoring_rules(s["scoring"], s_where) if s.get("scoring") is not None else None
            for rel in scoring.hidden_files if scoring is not None else ():
                _confined(root / "hidden" / seq_id / oracle_id, rel, f"{s_where}: scoring", "hidden_files",
                          f"hidden/{seq_id}/{oracle_id}/")
            sessions.append(SessionSpec(
                index=index,
                instruction=_require(s, "instruction", str, s_where),
                oracle_id=oracle_id,
                visible_files=visible,
                inject_after=tuple(s.get("inject_after", [])),
                start_state=s.get("start_state", "continuation"),
                mode=mode,
                scoring=scoring,
            ))
        if len(sessions) < 2:
            raise PackError(f"{seq_where}: field 'sessions' needs at least 2 sessions (evidence, then the trap)")
        if sessions[-1].mode != "task":
            raise PackError(f"{seq_where}: sessions[{len(sessions) - 1}]: field 'mode' must be 'task' (the scored session)")
        events = []
        for j, e in enumerate(_require(seq_raw, "events", list, seq_where)):
            e_where = f"{seq_where}: events[{j}]"
            if not isinstance(e, dict):
                raise PackError(f"{e_where}: must be an object")
            _known(e, EVENT_KEYS, seq_where, f"sequences[{i}].events[{j}]")
            scope = e.get("scope", {}) or {}
            if not isinstance(scope, dict):
                raise PackError(f"{e_where}: field 'scope' must be an object")
            _known(scope, SCOPE_KEYS, seq_where, f"sequences[{i}].events[{j}].scope")
            for rel in _str_list(scope, "files", f"{e_where}: scope"):
                problem = relative_path_problem(rel)
                if problem is not None:
                    raise PackError(f"{e_where}: field 'scope.files' names {rel!r}, which {problem}; "
                                    "it must name a file of the repository")
            after = _require(e, "after_session", int, e_where)
            if not 1 <= after < len(sessions):
                raise PackError(f"{e_where}: field 'after_session' must be between 1 and {len(sessions) - 1}")
            events.append(PackEvent(
                event_id=_require(e, "event_id", str, e_where), after_session=after,
                kind=_require(e, "kind", str, e_where), content=_require(e, "content", str, e_where),
                scope_files=tuple(scope.get("files", [])), scope_symbols=tuple(scope.get("symbols", [])),
            ))
        _check_sequence_fields(seq_raw, sessions, events, construct, format_version, seq_where)
        clean = bool(seq_raw.get("clean_start_s3", False))
        seq = Sequence(
            seq_id=seq_id, construct=construct, family=_require(seq_raw, "family", str, seq_where), repo=repo,
            sessions=tuple(sessions), events=tuple(events), clean_start_s3=clean,
            oracle_labels=_oracle_labels(seq_raw, seq_where),
            decisive_literals=tuple(seq_raw.get("decisive_literals", [])),
            required_fact_ids=tuple(seq_raw.get("required_fact_ids", [])),
            event_fact_map=dict(seq_raw.get("event_fact_map", {})),
            why_not_verbatim=seq_raw.get("why_not_verbatim"),
            curated_context=seq_raw.get("curated_context", ""),
            secrets=dict(seq_raw.get("secrets", {})),
            anti_hoarding=bool(seq_raw.get("anti_hoarding", False)),
            skeleton_id=seq_raw.get("skeleton_id"),
            gold_labels=tuple(_gold_label(g, f"{seq_where}: gold_labels[{j}]")
                              for j, g in enumerate(seq_raw.get("gold_labels", []))),
            source_memories=_source_memories(seq_raw, {e.event_id for e in events}, raw.get("conditions", []),
                                             seq_where),
        )
        if check_hidden:
            for session in seq.sessions:
                if session.mode == "history":
                    continue
                if session.scoring is not None:
                    for rel in session.scoring.hidden_files:
                        if not (root / "hidden" / seq_id / session.oracle_id / rel).is_file():
                            raise PackError(f"{seq_where}: session {session.index}: field 'scoring.hidden_files' names "
                                            f"a missing file hidden/{seq_id}/{session.oracle_id}/{rel}")
                    load_solution(root / "hidden" / seq_id / f"s{session.index}.solution.json", seq_id)
                    continue
                oracle = root / "hidden" / seq_id / f"{session.oracle_id}.py"
                if not oracle.exists():
                    raise PackError(f"{seq_where}: session {session.index}: field 'oracle_id' names a missing "
                                    f"oracle hidden/{seq_id}/{session.oracle_id}.py")
                load_solution(root / "hidden" / seq_id / f"s{session.index}.solution.json", seq_id)
            _check_decisive_literals(root, seq, format_version, seq_where)
        sequences.append(seq)
    if not sequences:
        raise PackError(f"{where}: field 'sequences' is empty")
    curated = raw.get("curated_context", "")
    if not isinstance(curated, str):
        raise PackError(f"{where}: field 'curated_context' must be str, got {type(curated).__name__}")
    policy = raw.get("resolution_policy", "patch_as_submitted")
    if policy not in RESOLUTION_POLICIES:
        raise PackError(f"{where}: field 'resolution_policy' must be one of {', '.join(RESOLUTION_POLICIES)}, "
                        f"got {policy!r}")
    conditions = raw.get("conditions", [])
    if not isinstance(conditions, list) or not all(isinstance(c, str) and is_plain_name(c) for c in conditions):
        raise PackError(f"{where}: field 'conditions' must be a list of plain names ({PLAIN_NAME_RULE})")
    skill_bank = None
    if raw.get("skill_bank") is not None:
        rel = raw["skill_bank"]
        skill_bank = _confined(root, rel, where, "skill_bank", "the pack")
        if not skill_bank.is_dir():
            raise PackError(f"{where}: field 'skill_bank' must name a directory of the pack, got {rel!r}")
    return Pack(name, root, tuple(sequences), repos, pack_digest(root), raw.get("description", ""),
                curated_context=curated, conditions=tuple(conditions),
                skill_bank=skill_bank, format_version=format_version, resolution_policy=policy)


def _source_memories(raw: dict[str, Any], event_ids: set[str], conditions: Any, where: str) -> dict[str, dict[str, str]]:
    value = raw.get("source_memories", {})
    if not isinstance(value, dict):
        raise PackError(f"{where}: field 'source_memories' must be an object {{condition: {{memory id: event id}}}}")
    out: dict[str, dict[str, str]] = {}
    for condition, memories in value.items():
        key = f"source_memories.{condition}"
        if not isinstance(conditions, list) or condition not in conditions:
            raise PackError(f"{where}: field '{key}' names a condition the pack does not declare in 'conditions'")
        if not isinstance(memories, dict):
            raise PackError(f"{where}: field '{key}' must be an object {{memory id: event id}}")
        for memory_id, event_id in memories.items():
            if not memory_id or not isinstance(event_id, str) or event_id not in event_ids:
                raise PackError(f"{where}: field '{key}.{memory_id}' must name an event of the sequence, "
                                f"got {event_id!r}")
        out[condition] = dict(memories)
    return out


# constructs whose trap is decided by a literal the scored oracle checks (C9/C10 run the other way: the
# trap is that nothing may be carried over, so there is no literal to carry)
LITERAL_CONSTRUCTS = tuple(f"C{i}" for i in range(1, 9))


def _check_decisive_literals(root: Path, seq: Sequence, format_version: int, where: str) -> None:
    problem = decisive_literal_problem(root, seq, format_version)
    if problem is not None:
        raise PackError(f"{where}: {problem}")


def decisive_literal_problem(root: Path, seq: Sequence, format_version: int) -> str | None:
    """Each decisive literal must occur in the scored session's hidden material (its oracle, or for a
    rules-scored session its hidden files and patch patterns): a misspelt one names nothing, and the
    gates keyed on it (no literal in an instruction or the public repository, no single event with all
    of them) would then check nothing. A native hygiene pack (format_version 2) must declare one for
    C1-C8."""
    scored = seq.scored_session
    if scored.scoring is None:
        oracle = root / "hidden" / seq.seq_id / f"{scored.oracle_id}.py"
        if not oracle.is_file():
            return None  # reported as missing hidden material
        texts = [read_input_text(oracle, PackError)]
        material = f"hidden/{seq.seq_id}/{scored.oracle_id}.py"
    else:
        base = root / "hidden" / seq.seq_id / scored.oracle_id
        texts = [read_input_text(base / rel, PackError) for rel in scored.scoring.hidden_files
                 if (base / rel).is_file()]
        texts += list(scored.scoring.required_patch_patterns) + list(scored.scoring.forbidden_patch_patterns)
        material = f"the hidden files and patch patterns of session {scored.index}"
    for k, literal in enumerate(seq.decisive_literals):
        if not literal:
            return f"field 'decisive_literals[{k}]' is empty"
        if not any(literal in text for text in texts):
            # the literal itself is not printed: in a finalized pack it holds a secret value
            return (f"field 'decisive_literals[{k}]' occurs nowhere in {material}: "
                    "a decisive literal must be a string the scored oracle checks (misspelt?)")
    if format_version >= 2 and seq.construct in LITERAL_CONSTRUCTS and not seq.decisive_literals:
        return (f"field 'decisive_literals' is required for construct {seq.construct}: name the "
                "string(s) the scored oracle checks and only memory can supply")
    return None


def _oracle_labels(raw: dict[str, Any], where: str) -> tuple[dict[str, Any], ...]:
    labels = raw.get("oracle_labels", [])
    if not isinstance(labels, list):
        raise PackError(f"{where}: field 'oracle_labels' must be a list of objects")
    for j, label in enumerate(labels):
        if not isinstance(label, dict):
            raise PackError(f"{where}: oracle_labels[{j}]: must be an object")
        _known(label, ORACLE_LABEL_KEYS, where, f"oracle_labels[{j}]")
    return tuple(labels)


def _str_list(obj: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PackError(f"{where}: field '{key}' must be a list of strings")
    return tuple(value)


def _scoring_rules(raw: Any, where: str) -> ScoringRules:
    where = f"{where}: scoring"
    if not isinstance(raw, dict):
        raise PackError(f"{where}: must be an object")
    _known(raw, SCORING_KEYS, where)
    commands = _require(raw, "commands", list, where)
    if not commands or not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in commands):
        raise PackError(f"{where}: field 'commands' must be a non-empty list of non-empty argv lists")
    timeout = raw.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise PackError(f"{where}: field 'timeout_s' must be a positive number")
    return ScoringRules(
        commands=tuple(tuple(c) for c in commands),
        hidden_files=_str_list(raw, "hidden_files", where),
        allowed_paths=_str_list(raw, "allowed_paths", where),
        forbidden_paths=_str_list(raw, "forbidden_paths", where),
        required_patch_patterns=_str_list(raw, "required_patch_patterns", where),
        forbidden_patch_patterns=_str_list(raw, "forbidden_patch_patterns", where),
        timeout_s=float(timeout) if timeout is not None else None,
    )


def _gold_label(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PackError(f"{where}: must be an object")
    _known(raw, GOLD_LABEL_KEYS, where)
    return {
        "label_id": _require(raw, "label_id", str, where),
        "label_type": _require(raw, "label_type", str, where),
        "active_session": _require(raw, "active_session", int, where),
        "event_ids": list(_str_list(raw, "event_ids", where)),
        "fact_ids": list(_str_list(raw, "fact_ids", where)),
    }


def has_placeholders(root: Path) -> bool:
    for path in Path(root).rglob("*"):
        if path.is_file() and SECRET_LIKE.search(path.read_text(encoding="utf-8", errors="ignore")):
            return True
    return False


def _check_sequence_fields(raw: dict[str, Any], sessions: list[SessionSpec], events: list[PackEvent],
                           construct: str, format_version: int, where: str) -> None:
    """Cross-field checks of one sequence: references between sessions, events and facts, and the
    types of the optional hygiene fields. Each error names the sequence and the field."""
    ids = [e.event_id for e in events]
    for event_id in ids:
        if ids.count(event_id) > 1:
            raise PackError(f"{where}: field 'events' repeats event_id '{event_id}'")
    after = {e.event_id: e.after_session for e in events}
    for session in sessions:
        if session.start_state not in ("continuation", "clean"):
            raise PackError(f"{where}: sessions[{session.index - 1}]: field 'start_state' must be 'continuation' "
                            f"or 'clean', got '{session.start_state}'")
        for ref in session.inject_after:
            if ref not in after:
                raise PackError(f"{where}: sessions[{session.index - 1}]: field 'inject_after' names unknown event '{ref}'")
            if after[ref] >= session.index:
                raise PackError(f"{where}: sessions[{session.index - 1}]: field 'inject_after' names event '{ref}' "
                                f"delivered after session {after[ref]}, not before session {session.index}")
    for key in ("clean_start_s3", "anti_hoarding"):
        if key in raw and not isinstance(raw[key], bool):
            raise PackError(f"{where}: field '{key}' must be bool, got {type(raw[key]).__name__}")
    for key in ("decisive_literals", "required_fact_ids"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PackError(f"{where}: field '{key}' must be a list of strings")
    fact_map = raw.get("event_fact_map", {})
    if not isinstance(fact_map, dict):
        raise PackError(f"{where}: field 'event_fact_map' must be an object")
    for event_id, facts in fact_map.items():
        if event_id not in after:
            raise PackError(f"{where}: field 'event_fact_map' names unknown event '{event_id}'")
        if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
            raise PackError(f"{where}: field 'event_fact_map.{event_id}' must be a list of strings")
    if fact_map:
        covered = {f for facts in fact_map.values() for f in facts}
        for fact in raw.get("required_fact_ids", []):
            if fact not in covered:
                raise PackError(f"{where}: field 'required_fact_ids' names fact '{fact}' that no event carries "
                                "(event_fact_map)")
    for key in ("why_not_verbatim", "curated_context", "skeleton_id"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise PackError(f"{where}: field '{key}' must be str, got {type(raw[key]).__name__}")
    if format_version >= 2 and construct != "C1" and not (raw.get("why_not_verbatim") or "").strip():
        raise PackError(f"{where}: field 'why_not_verbatim' is required for construct {construct} "
                        "(why verbatim replay of one event is insufficient)")
    secrets_decl = raw.get("secrets", {})
    if not isinstance(secrets_decl, dict):
        raise PackError(f"{where}: field 'secrets' must be an object {{name: class}}")
    for name, cls in secrets_decl.items():
        if not re.fullmatch(r"[A-Za-z0-9_]+", name):
            raise PackError(f"{where}: field 'secrets' has an invalid name '{name}'")
        if cls not in SECRET_CLASSES:
            raise PackError(f"{where}: field 'secrets.{name}' has unknown class '{cls}' "
                            f"(known: {', '.join(SECRET_CLASSES)})")


def sequence_texts(seq_raw: dict[str, Any]) -> list[str]:
    """Every string of a sequence's manifest entry (for placeholder and leak scans)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(seq_raw)
    return out
