"""The native task-pack format (DESIGN.md §4): a manifest, fixture repositories, hidden parts.

```
PACK/manifest.json           the sequences (agent-visible instructions and events; labels)
PACK/repos/<name>/           small fixture repositories (the clean base of a sequence)
PACK/hidden/<seq_id>/<oracle_id>.py         hidden pytest oracle of one session
PACK/hidden/<seq_id>/s<index>.solution.json reference solution of one session, as a template:
    {"files": {path: text with {{SLOT:name}}}, "slots": {name: {"answer", "pattern", "default"}}}
```
`hidden/` never enters an agent's sandbox. The loader rejects a malformed pack before any run,
naming the file, the sequence and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "membench-pack"
CONSTRUCTS = tuple(f"C{i}" for i in range(1, 11))
SLOT = re.compile(r"\{\{SLOT:([A-Za-z0-9_]+)\}\}")
SECRET = re.compile(r"\{\{SECRET:([A-Za-z0-9_]+):([A-Za-z0-9_]+)\}\}")


class PackError(ValueError):
    """A pack that cannot be used; the message names the file, the sequence and the field."""


@dataclass(frozen=True)
class SessionSpec:
    index: int
    instruction: str
    oracle_id: str
    visible_files: tuple[str, ...] = ()
    inject_after: tuple[str, ...] = ()
    start_state: str = "continuation"  # or "clean"


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

    def sequence(self, seq_id: str) -> Sequence:
        for seq in self.sequences:
            if seq.seq_id == seq_id:
                return seq
        raise KeyError(seq_id)

    def oracle_path(self, seq: Sequence, session: SessionSpec) -> Path:
        return self.root / "hidden" / seq.seq_id / f"{session.oracle_id}.py"

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
    if key not in obj:
        raise PackError(f"{where}: missing required field '{key}'")
    value = obj[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise PackError(f"{where}: field '{key}' must be {name}, got {type(value).__name__}")
    return value


def load_solution(path: Path, seq_id: str = "?") -> Solution:
    where = f"{path}: sequence {seq_id}"
    if not path.exists():
        raise PackError(f"{where}: missing reference solution file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PackError(f"{where}: not valid JSON ({exc})") from None
    files = _require(raw, "files", dict, where)
    slots = {}
    for name, spec in _require(raw, "slots", dict, where).items():
        slot_where = f"{where}: slot '{name}'"
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


def load_pack(root: Path, check_hidden: bool = True) -> Pack:
    root = Path(root)
    manifest_path = root / "manifest.json"
    if not manifest_path.exists():
        raise PackError(f"{root}: no manifest.json (not a membench pack)")
    try:
        raw = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PackError(f"{manifest_path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    where = str(manifest_path)
    if raw.get("format") != FORMAT:
        raise PackError(f"{where}: field 'format' must be '{FORMAT}'")
    name = _require(raw, "pack", str, where)
    repos = {}
    for repo_name, rel in _require(raw, "repos", dict, where).items():
        repo_path = root / rel
        if not repo_path.is_dir():
            raise PackError(f"{where}: field 'repos.{repo_name}' points to a missing directory '{rel}'")
        repos[repo_name] = repo_path
    sequences = []
    seen: set[str] = set()
    for i, seq_raw in enumerate(_require(raw, "sequences", list, where)):
        seq_where = f"{where}: sequences[{i}]"
        if not isinstance(seq_raw, dict):
            raise PackError(f"{seq_where}: must be an object")
        seq_id = _require(seq_raw, "seq_id", str, seq_where)
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
            index = _require(s, "index", int, s_where)
            if index != j + 1:
                raise PackError(f"{s_where}: field 'index' must be {j + 1}")
            sessions.append(SessionSpec(
                index=index,
                instruction=_require(s, "instruction", str, s_where),
                oracle_id=_require(s, "oracle_id", str, s_where),
                visible_files=tuple(s.get("visible_files", [])),
                inject_after=tuple(s.get("inject_after", [])),
                start_state=s.get("start_state", "continuation"),
            ))
        if len(sessions) < 2:
            raise PackError(f"{seq_where}: field 'sessions' needs at least 2 sessions (evidence, then the trap)")
        events = []
        for j, e in enumerate(_require(seq_raw, "events", list, seq_where)):
            e_where = f"{seq_where}: events[{j}]"
            scope = e.get("scope", {}) or {}
            after = _require(e, "after_session", int, e_where)
            if not 1 <= after < len(sessions):
                raise PackError(f"{e_where}: field 'after_session' must be between 1 and {len(sessions) - 1}")
            events.append(PackEvent(
                event_id=_require(e, "event_id", str, e_where), after_session=after,
                kind=_require(e, "kind", str, e_where), content=_require(e, "content", str, e_where),
                scope_files=tuple(scope.get("files", [])), scope_symbols=tuple(scope.get("symbols", [])),
            ))
        clean = bool(seq_raw.get("clean_start_s3", False))
        seq = Sequence(
            seq_id=seq_id, construct=construct, family=_require(seq_raw, "family", str, seq_where), repo=repo,
            sessions=tuple(sessions), events=tuple(events), clean_start_s3=clean,
            oracle_labels=tuple(seq_raw.get("oracle_labels", [])),
            decisive_literals=tuple(seq_raw.get("decisive_literals", [])),
            required_fact_ids=tuple(seq_raw.get("required_fact_ids", [])),
            event_fact_map=dict(seq_raw.get("event_fact_map", {})),
            why_not_verbatim=seq_raw.get("why_not_verbatim"),
        )
        if check_hidden:
            for session in seq.sessions:
                oracle = root / "hidden" / seq_id / f"{session.oracle_id}.py"
                if not oracle.exists():
                    raise PackError(f"{seq_where}: session {session.index}: field 'oracle_id' names a missing "
                                    f"oracle hidden/{seq_id}/{session.oracle_id}.py")
                load_solution(root / "hidden" / seq_id / f"s{session.index}.solution.json", seq_id)
        sequences.append(seq)
    if not sequences:
        raise PackError(f"{where}: field 'sequences' is empty")
    return Pack(name, root, tuple(sequences), repos, pack_digest(root), raw.get("description", ""))


def has_placeholders(root: Path) -> bool:
    for path in Path(root).rglob("*"):
        if path.is_file() and SECRET.search(path.read_text(encoding="utf-8", errors="ignore")):
            return True
    return False
