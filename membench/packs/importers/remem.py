"""Importing the coding-agent A/B benchmark's fixture pack (`tasks.json`, version 1) as a native pack.

Both published shapes load (see ../shared/external/README.md): the early one (task-level
`memories`) and the later one (`category`, `smoke`, `forbidden_paths`, `history_episodes` with
`raw_events` and `memories`, `gold_memory`). Unknown fields are ignored; a missing or mistyped
required field is refused with a `PackError` naming the task and the field.

The mapping, one sequence per task:
- the inline repository becomes the fixture repository `repos/fixture/`;
- each history episode becomes a `history` session (replayed evidence: no agent, no scoring)
  whose summary is its instruction; its raw events and memories become pack events delivered
  after it (agent-visible turns a memory system can learn from). Task-level memories, and an
  early-shape task's memories, follow one synthetic history session;
- the prompt becomes the scored task session, scored by `scoring` rules: the score commands with
  the hidden files written into the scoring checkout only then (`hidden/<task>/oracle/`), the
  allowed/forbidden paths and the required/forbidden patch patterns;
- `gold_memory` becomes gold labels: a `required` label on the memories of episodes whose
  expected facts include a required fact plus the supporting raw events, and a `forbidden`
  label on the memories of episodes whose expected facts include a forbidden fact. An early-shape
  task has no gold memory, hence no labels (as in that benchmark: nothing is relevant by gold);
- `curated_context` becomes the pack's curated context (what `curated_file` shows); the pack's
  `conditions` are the source's own names, `no_memory`, `remem`, `curated_file`: `membench score`
  accepts all three as labels of predictions made elsewhere, `membench run` runs `no_memory` and
  `curated_file` (and `B5`, a memory system whose rendered context stands in for REMEM_CONTEXT.md)
  and refuses `remem`, which names no memory system membench can run;
- the pack's `resolution_policy` is `agent_must_finish`: as that benchmark's published code does,
  a run that timed out or overflowed its context is not resolved even when its tests pass;
- `category` becomes the family, and picks the construct (DreamBench-SWE's C1–C10) closest to it;
  the early shape has no category: C1 (verbatim retention), family `remem-v1`.
The benchmark publishes no reference solutions (the version-1 packs have no solution or patch
field): each task session gets an empty solution template, and `membench run --agent
scripted:refsol` refuses such a pack (exit 2) rather than score it 0. The agent's `timeout_ms` is not enforced
by scripted agents and is kept in the manifest's description of the source only.

The source is untrusted: it is read within `MAX_INPUT_BYTES` as strict UTF-8, every path in it
(repository files, hidden files, allowed/forbidden paths, memory files) must be relative without
'..', task ids and the pack name are plain names, and the pack is built in a staging directory
next to OUT_DIR, loaded back with the native loader, and only then renamed to OUT_DIR — a failed
import leaves nothing behind (`membench.packs.finalize.staged_directory`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from membench.packs.finalize import TargetExistsError, staged_directory
from membench.formats.fields import (
    PLAIN_NAME_RULE,
    decode_utf8,
    is_plain_name,
    read_input_bytes,
    relative_path_problem,
)
from membench.packs.importers.source_fields import source_field, source_strings
from membench.formats.pack_format import FORMAT, PackError, load_pack

# the source benchmark's condition names: `membench score` takes them as labels of predictions made
# elsewhere; `membench run` runs no_memory and curated_file, and B5 stands in for remem
CONDITIONS = ("no_memory", "remem", "curated_file")
# that benchmark's published code fails a run that timed out or overflowed its context even when
# its tests pass (membench/formats/pack_format.py RESOLUTION_POLICIES)
RESOLUTION_POLICY = "agent_must_finish"
CATEGORY_CONSTRUCT = {
    "prior_decision_dependency": "C1",
    "prior_bug_root_cause": "C8",
    "stale_memory_avoidance": "C3",
    "negative_constraints": "C5",
    "workstream_continuity": "C4",
    "multi_hop_project_context": "C7",
    "user_context_relevance": "C10",
    "conflict_ambiguity_handling": "C6",
}
REPO_NAME = "fixture"
ORACLE_ID = "oracle"


def _where(task: dict[str, Any] | None, index: int) -> str:
    if task is not None and isinstance(task.get("id"), str):
        return f"task '{task['id']}'"
    return f"tasks[{index}]"


def _safe_path(rel: str, where: str, key: str) -> str:
    if relative_path_problem(rel) is not None or "" in rel.split("/"):
        raise PackError(f"{where}: field '{key}' holds an unsafe path {rel!r} (must be relative, without '..')")
    return rel


def _write(path: Path, text: str, where: str, key: str) -> None:
    """Write one imported file; a path that cannot be a file (say 'a' and 'a/b' both given) is a
    PackError naming the field, not a traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PackError(f"{where}: field '{key}' cannot be written as a file ({exc.strerror or exc})") from None


def _memories(container: dict[str, Any], where: str) -> list[dict[str, Any]]:
    out = []
    for i, memory in enumerate(source_field(container, "memories", list, where, [])):
        m_where = f"{where}: memories[{i}]"
        out.append({"title": source_field(memory, "title", str, m_where), "text": source_field(memory, "text", str, m_where),
                    "memory_type": source_field(memory, "memory_type", str, m_where, "memory"),
                    "files": [_safe_path(f, m_where, "files") for f in source_strings(memory, "files", m_where)]})
    return out


def _memory_event(event_id: str, after: int, memory: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": event_id, "after_session": after, "kind": memory["memory_type"] or "memory",
            "content": f"{memory['title']}\n{memory['text']}", "scope": {"files": memory["files"], "symbols": []}}


def _raw_event(raw: dict[str, Any], after: int, where: str) -> dict[str, Any]:
    event_id = source_field(raw, "event_id", str, where)
    role = source_field(raw, "role", str, where, "event")
    parts = [source_field(raw, "sanitized_content", str, where, "")]
    tool = source_field(raw, "tool_name", str, where, "")
    if tool:
        parts.append(f"[tool {tool}] {source_field(raw, 'sanitized_tool_input', (str, dict, list), where, '')}")
        output = source_field(raw, "sanitized_tool_output", (str, dict, list), where, "")
        if output:
            parts.append(f"[output] {output}")
    content = "\n".join(str(p) for p in parts if p)
    return {"event_id": event_id, "after_session": after, "kind": f"history_{role}", "content": content or f"({role})",
            "scope": {"files": [], "symbols": []}}


def _sequence(task: dict[str, Any], index: int, hidden_root: Path) -> dict[str, Any]:
    where = _where(task, index)
    task_id = source_field(task, "id", str, where)
    if not is_plain_name(task_id):
        raise PackError(f"{where}: field 'id' must be a plain name ({PLAIN_NAME_RULE})")
    prompt = source_field(task, "prompt", str, where)
    score = source_field(task, "score", dict, where)
    commands = source_field(score, "commands", list, f"{where}: score")
    if not commands or not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in commands):
        raise PackError(f"{where}: field 'score.commands' must be a non-empty list of non-empty argv lists")
    hidden = source_field(score, "hidden_files", dict, f"{where}: score", {})
    for rel, text in hidden.items():
        _safe_path(rel, where, "score.hidden_files")
        if not isinstance(text, str):
            raise PackError(f"{where}: field 'score.hidden_files.{rel}' must be str")
    allowed = [_safe_path(p.rstrip("/"), where, "allowed_paths") for p in source_strings(task, "allowed_paths", where)]
    forbidden = [_safe_path(p.rstrip("/"), where, "forbidden_paths") for p in source_strings(task, "forbidden_paths", where)]
    category = source_field(task, "category", str, where, "")
    gold = source_field(task, "gold_memory", dict, where, {})
    required_facts = set(source_strings(gold, "required_facts", f"{where}: gold_memory"))
    forbidden_facts = set(source_strings(gold, "forbidden_facts", f"{where}: gold_memory"))
    supporting = source_strings(gold, "supporting_event_ids", f"{where}: gold_memory")

    sessions: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    relevant: list[str] = [*supporting]
    stale: list[str] = []
    seeded: list[str] = []  # memory events in the order remem's database is seeded (ids #1, #2, …)
    for j, episode in enumerate(source_field(task, "history_episodes", list, where, [])):
        e_where = f"{where}: history_episodes[{j}]"
        episode_id = source_field(episode, "episode_id", str, e_where)
        e_where = f"{where}: episode '{episode_id}'"
        session_index = len(sessions) + 1
        sessions.append({"index": session_index, "mode": "history",
                         "instruction": source_field(episode, "summary", str, e_where, "") or f"History episode {episode_id}"})
        for k, raw in enumerate(source_field(episode, "raw_events", list, e_where, [])):
            events.append(_raw_event(raw, session_index, f"{e_where}: raw_events[{k}]"))
        facts = set(source_strings(episode, "expected_memory_facts", e_where))
        for k, memory in enumerate(_memories(episode, e_where)):
            event = _memory_event(f"{episode_id}:m{k}", session_index, memory)
            events.append(event)
            seeded.append(event["event_id"])
            if facts & required_facts:
                relevant.append(event["event_id"])
            if facts & forbidden_facts:
                stale.append(event["event_id"])
    task_memories = _memories(task, where)
    if task_memories or not sessions:
        sessions.append({"index": len(sessions) + 1, "mode": "history",
                         "instruction": "Earlier work on this repository (project memory from prior sessions)."})
        task_events = [_memory_event(f"{task_id}:m{k}", len(sessions), m) for k, m in enumerate(task_memories)]
        events += task_events
        seeded += [e["event_id"] for e in task_events]
    seen: set[str] = set()
    for event in events:
        if event["event_id"] in seen:
            raise PackError(f"{where}: event id '{event['event_id']}' is duplicated")
        seen.add(event["event_id"])
    target = len(sessions) + 1
    sessions.append({
        "index": target, "mode": "task", "instruction": prompt, "oracle_id": ORACLE_ID,
        "visible_files": [], "inject_after": [],
        "scoring": {"commands": commands, "hidden_files": sorted(hidden), "allowed_paths": allowed,
                    "forbidden_paths": forbidden,
                    "required_patch_patterns": source_strings(score, "required_patch_patterns", f"{where}: score"),
                    "forbidden_patch_patterns": source_strings(score, "forbidden_patch_patterns", f"{where}: score")},
    })
    labels = []
    if required_facts:
        labels.append({"label_id": f"{task_id}:required", "label_type": "required", "active_session": target,
                       "event_ids": [e for e in dict.fromkeys(relevant) if e in seen], "fact_ids": sorted(required_facts)})
    if forbidden_facts:
        labels.append({"label_id": f"{task_id}:forbidden", "label_type": "forbidden", "active_session": target,
                       "event_ids": stale, "fact_ids": sorted(forbidden_facts)})
    task_hidden = hidden_root / task_id
    for rel, text in hidden.items():
        _write(task_hidden / ORACLE_ID / rel, text, where, f"score.hidden_files.{rel}")
    _write(task_hidden / f"s{target}.solution.json", json.dumps({"files": {}, "slots": {}}) + "\n", where, "id")
    return {
        "seq_id": task_id, "construct": CATEGORY_CONSTRUCT.get(category, "C1"), "family": category or "remem-v1",
        "repo": REPO_NAME, "initial_state": "base", "clean_start_s3": False, "sessions": sessions, "events": events,
        "gold_labels": labels, "smoke": bool(task.get("smoke", False)),
        # the memories remem held for this task, as its agent cites them (memory:#1 …); curated_file's
        # memory is the pack's curated context, which CuratedFileMemory already records
        "source_memories": {"remem": {str(n): event_id for n, event_id in enumerate(seeded, 1)}} if seeded else {},
        "timeout_ms": source_field(task, "timeout_ms", int, where, None),
    }


def import_remem(source: Path, out_dir: Path, name: str | None = None) -> Path:
    """Write the native pack for `source` into `out_dir` (which must not exist or be empty).

    Everything is checked before OUT_DIR appears: the pack is written into a staging directory next
    to it, loaded back with `load_pack`, then renamed; on any error nothing is left behind."""
    source = Path(source)
    raw_bytes = read_input_bytes(source, PackError)
    try:
        raw = json.loads(decode_utf8(raw_bytes, source, PackError))
    except json.JSONDecodeError as exc:
        raise PackError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    where = str(source)
    version = source_field(raw, "version", int, where)
    if version != 1:
        raise PackError(f"{where}: field 'version' must be 1, got {version}")
    repo = source_field(raw, "repo", dict, where)
    kind = source_field(repo, "kind", str, f"{where}: repo")
    if kind != "inline_python":
        raise PackError(f"{where}: field 'repo.kind' must be 'inline_python', got '{kind}'")
    files = source_field(repo, "files", dict, f"{where}: repo")
    if not files:
        raise PackError(f"{where}: field 'repo.files' is empty")
    tasks = source_field(raw, "tasks", list, where)
    if not tasks:
        raise PackError(f"{where}: field 'tasks' is empty")
    curated = source_field(raw, "curated_context", str, where, "")
    pack_name = name or "remem-" + re.sub(r"[^a-z0-9]+", "-", source.stem.lower()).strip("-")[:100]
    if not is_plain_name(pack_name):
        raise PackError(f"pack name {pack_name!r} (--name) must be a plain name ({PLAIN_NAME_RULE})")

    out_dir = Path(out_dir)
    if out_dir.is_symlink() or out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise PackError(f"{out_dir}: output directory exists and is not empty")
    try:
        with staged_directory(out_dir, replace=False) as work:
            _write_pack(work, source, raw_bytes, version, repo, files, tasks, curated, pack_name)
            try:  # the native loader's checks, before the pack appears at OUT_DIR
                load_pack(work)
            except PackError as exc:
                raise PackError(str(exc).replace(str(work), str(out_dir))) from None
    except TargetExistsError:
        raise PackError(f"{out_dir}: output directory exists and is not empty") from None
    except PackError:
        raise
    except OSError as exc:
        raise PackError(f"{out_dir}: cannot write the imported pack ({exc.strerror or exc})") from None
    return out_dir


def _write_pack(work: Path, source: Path, raw_bytes: bytes, version: int, repo: dict[str, Any],
                files: dict[str, Any], tasks: list[Any], curated: str, pack_name: str) -> None:
    where = str(source)
    repo_dir = work / "repos" / REPO_NAME
    for rel, text in files.items():
        _safe_path(rel, f"{where}: repo", "files")
        if not isinstance(text, str):
            raise PackError(f"{where}: field 'repo.files.{rel}' must be str")
        _write(repo_dir / rel, text, f"{where}: repo", f"files.{rel}")
    sequences, ids = [], set()
    for i, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise PackError(f"{where}: tasks[{i}]: must be an object")
        seq = _sequence(task, i, work / "hidden")
        if seq["seq_id"] in ids:
            raise PackError(f"{where}: {_where(task, i)}: field 'id' is duplicated")
        ids.add(seq["seq_id"])
        sequences.append(seq)
    manifest = {
        "format": FORMAT, "format_version": 1,
        "pack": pack_name,
        "description": "Imported from the coding-agent A/B benchmark's tasks.json (version 1); "
                       "one sequence per task: history sessions replay the recorded evidence, "
                       "the last session is the scored task.",
        "source": {"format": "remem-coding-bench tasks.json", "version": version, "file": source.name,
                   "sha256": hashlib.sha256(raw_bytes).hexdigest(),
                   "base_commit": repo.get("base_commit"), "fixture_revision": repo.get("fixture_revision")},
        "repos": {REPO_NAME: f"repos/{REPO_NAME}"},
        "curated_context": curated,
        "conditions": list(CONDITIONS),
        "resolution_policy": RESOLUTION_POLICY,
        "sequences": sequences,
    }
    _write(work / "manifest.json", json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", where, "tasks")
