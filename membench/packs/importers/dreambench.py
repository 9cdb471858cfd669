"""Importing DreamBench-SWE's published sequence records (`SEQUENCES.jsonl`) as a native pack.

A record is one JSON object per line (../shared/external/dreambench-swe/sequences_excerpt.jsonl
holds the two published samples): `seq_id`, `repo` / `fixture_repo`, `initial_commit`,
`seq_type` / `family_label`, optionally `construct_label` (C1–C10; the v2 records carry it, the
v1-shaped ones do not), `sessions[]` (`session_index`, `instruction`, `oracle_id`,
`visible_files`, `inject_after`, `start_state`), `events[]` (`event_id`, `after_session`,
`kind`, `scope` {files, symbols}, `content`: the decisive evidence), `oracle_labels[]`, and for
v2 records `decisive_oracle_literals`, `required_fact_ids`, `event_fact_map`,
`insufficiency_mechanism`, `clean_start_s3`, `anti_hoarding`.

The mapping, one sequence per record: sessions keep their index, instruction, oracle id, visible
files and injections (`start_state: clean_base` becomes `clean`); events keep id, session, kind,
content and scope; `construct_label` is the construct, `family_label` (else `seq_type`) the family,
`decisive_oracle_literals` the decisive literals, `insufficiency_mechanism` the why-not-verbatim
note; oracle labels are kept as published (their `type` names are the ones the processors read).
Kept as published for provenance, not read by membench: `seq_type`, `commission_checks`,
`omission_checks`, `single_event_complete_answer`, `validation_metadata`, and an event scope's
`repo` and `sequence_id`. Every other field of a record is listed — printed by `membench import
dreambench` and written into the pack's `source.fields_not_used` — with the records that carry it
and why it is not used (`FIELDS_NOT_USED` for the known ones; any other is a field this importer
does not know).

What the public records lack, and how a user supplies it:
- hidden oracles and reference solutions are not published (the paper's artifact policy keeps
  hidden scoring assets private). `--hidden DIR` supplies them as
  `DIR/<seq_id>/<oracle_id>.py` (a pytest oracle per session) and `DIR/<seq_id>/s<i>.solution.json`
  (a solution template, docs/design.md §4); with `--hidden`, every session's pair must be there;
- fixture repositories are named (`repo`, `initial_commit`) but not included. `--repos DIR`
  supplies them as `DIR/<repo>/`, the repository checked out at that commit (`.git` is not copied);
- a v1-shaped record has no construct: its `seq_type` is a continuity label the paper says does
  not reliably name the construct, so the importer will not guess; `--construct SEQ_ID=Cn` gives it.
Without `--repos` / `--hidden`, the pack is written with a `SUPPLY.md` naming every missing
file (the same paths under OUT_DIR); the pack loader (so `membench validate` and `membench run`)
refuses it, naming SUPPLY.md and every part still missing, until they are in place.

A record lacking what a trap needs — a field above that is absent, of the wrong type or
inconsistent (an unknown injected event, a session index out of order, fewer than two sessions,
an unsafe path, a seq_id that is not a plain name) — is refused with a PackError naming the file,
the record (line number and seq_id) and the field; nothing is written (`staged_directory`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass
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
from membench.formats.pack_format import CONSTRUCTS, FORMAT, PackError, load_pack

# a record's start_state values (DreamBench-SWE writes `clean_base` for a clean-start S3)
START_STATES = {"clean_base": "clean", "clean": "clean", "continuation": "continuation"}


# the fields a record may carry that the importer reads (or keeps verbatim in the sequence)
RECORD_FIELDS = frozenset({
    "seq_id", "construct_label", "seq_type", "fixture_repo", "repo", "initial_commit", "family_label", "sessions",
    "events", "oracle_labels", "clean_start_s3", "anti_hoarding", "decisive_oracle_literals", "required_fact_ids",
    "event_fact_map", "insufficiency_mechanism",
})
#: record fields kept verbatim in the imported sequence for provenance (membench/formats/pack_format.py lists
#: them as recorded): the v2 validation metadata and the checks its authors ran, not read by membench
KEPT_FIELDS = ("commission_checks", "omission_checks", "single_event_complete_answer", "validation_metadata")
SESSION_FIELDS = frozenset({"session_index", "start_state", "started_from_previous_session", "instruction",
                            "visible_files", "inject_after", "oracle_id"})
EVENT_FIELDS = frozenset({"event_id", "after_session", "kind", "content", "scope"})
SCOPE_FIELDS = frozenset({"files", "symbols", "repo", "sequence_id"})
#: fields a published record carries that the pack does not take, and why
FIELDS_NOT_USED = {
    "sessions[].clean_start_s3": "the record-level clean_start_s3 is what the pack keeps",
}
UNKNOWN_FIELD = "not a field this importer knows; not carried into the pack"


@dataclass(frozen=True)
class DreamBenchImport:
    out_dir: Path
    sequences: int
    missing: tuple[str, ...]  # files under OUT_DIR the user must still supply (SUPPLY.md)
    # fields of the records the pack does not carry: {"field", "records": [seq_id], "why"}
    fields_not_used: tuple[dict[str, Any], ...] = ()


def _not_used(record: dict[str, Any]) -> list[str]:
    """The field paths of RECORD the importer neither reads nor keeps (sessions[].x, events[].scope.y)."""
    out = [k for k in record if k not in RECORD_FIELDS and k not in KEPT_FIELDS]
    for key, known in (("sessions", SESSION_FIELDS), ("events", EVENT_FIELDS)):
        for item in record.get(key) or []:
            if isinstance(item, dict):
                out += [f"{key}[].{k}" for k in item if k not in known]
    for event in record.get("events") or []:
        scope = event.get("scope") if isinstance(event, dict) else None
        if isinstance(scope, dict):
            out += [f"events[].scope.{k}" for k in scope if k not in SCOPE_FIELDS]
    return list(dict.fromkeys(out))


def _paths(obj: dict[str, Any], key: str, where: str) -> list[str]:
    out = source_strings(obj, key, where)
    for rel in out:
        problem = relative_path_problem(rel)
        if problem is not None:
            raise PackError(f"{where}: field '{key}' names {rel!r}, which {problem}")
    return out


def _plain(obj: dict[str, Any], key: str, where: str) -> str:
    value = source_field(obj, key, str, where)
    if not is_plain_name(value):
        raise PackError(f"{where}: field '{key}' must be a plain name ({PLAIN_NAME_RULE}), got {value!r}")
    return value


def _one_of(record: dict[str, Any], keys: tuple[str, str], where: str, *, agree: bool = True) -> str:
    """The first of KEYS present; with `agree`, both present must be equal (a record naming two
    repositories is refused)."""
    values = [source_field(record, k, str, where) for k in keys if record.get(k) is not None]
    if not values:
        raise PackError(f"{where}: field '{keys[0]}' (or '{keys[1]}') is missing")
    if agree and len(set(values)) > 1:
        raise PackError(f"{where}: fields '{keys[0]}' and '{keys[1]}' disagree ({values[0]!r} vs {values[1]!r})")
    return values[0]


def _session(raw: Any, j: int, where: str) -> dict[str, Any]:
    s_where = f"{where}: sessions[{j}]"
    index = source_field(raw, "session_index", int, s_where)
    if index != j + 1:
        raise PackError(f"{s_where}: field 'session_index' must be {j + 1} (sessions in order from 1), got {index}")
    state = source_field(raw, "start_state", str, s_where, "continuation")
    if state not in START_STATES:
        raise PackError(f"{s_where}: field 'start_state' must be one of {', '.join(START_STATES)}, got {state!r}")
    if raw.get("started_from_previous_session") is False:
        state = "clean"
    return {"index": index, "instruction": source_field(raw, "instruction", str, s_where),
            "visible_files": _paths(raw, "visible_files", s_where),
            "inject_after": source_strings(raw, "inject_after", s_where),
            "start_state": START_STATES[state], "oracle_id": _plain(raw, "oracle_id", s_where)}


def _event(raw: Any, j: int, where: str) -> dict[str, Any]:
    e_where = f"{where}: events[{j}]"
    scope = source_field(raw, "scope", dict, e_where, {})
    content = source_field(raw, "content", str, e_where)
    if not content.strip():
        raise PackError(f"{e_where}: field 'content' is empty (the event's decisive content)")
    kept = {k: source_field(scope, k, str, f"{e_where}: scope") for k in ("repo", "sequence_id") if scope.get(k) is not None}
    return {"event_id": source_field(raw, "event_id", str, e_where), "after_session": source_field(raw, "after_session", int, e_where),
            "kind": source_field(raw, "kind", str, e_where), "content": content,
            "scope": {"files": _paths(scope, "files", f"{e_where}: scope"),
                      "symbols": source_strings(scope, "symbols", f"{e_where}: scope"), **kept}}


def record_to_sequence(record: Any, where: str, constructs: dict[str, str]) -> tuple[dict[str, Any], str]:
    """One record as a native sequence, and the commit of its fixture repository."""
    if not isinstance(record, dict):
        raise PackError(f"{where}: must be a JSON object")
    seq_id = _plain(record, "seq_id", where)
    where = f"{where} (seq_id '{seq_id}')"
    construct = constructs.get(seq_id) or source_field(record, "construct_label", str, where, None)
    if construct is None:
        kind = record.get("seq_type")
        raise PackError(f"{where}: field 'construct_label' is missing (seq_type {kind!r} is a continuity label that "
                        f"does not reliably name a construct); give it with --construct {seq_id}=C1..C10")
    if construct not in CONSTRUCTS:
        raise PackError(f"{where}: field 'construct_label' must be one of C1..C10, got {construct!r}")
    repo = _one_of(record, ("fixture_repo", "repo"), where)
    if not is_plain_name(repo):
        raise PackError(f"{where}: field 'repo' must be a plain name ({PLAIN_NAME_RULE}), got {repo!r}")
    commit = source_field(record, "initial_commit", str, where)
    if not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        raise PackError(f"{where}: field 'initial_commit' must be a git commit id (hex), got {commit!r}")
    family = _one_of(record, ("family_label", "seq_type"), where, agree=False)  # the v2 label refines the type
    sessions = [_session(s, j, where) for j, s in enumerate(source_field(record, "sessions", list, where))]
    if len(sessions) < 2:
        raise PackError(f"{where}: field 'sessions' needs at least 2 sessions (evidence, then the trap), "
                        f"got {len(sessions)}")
    events = [_event(e, j, where) for j, e in enumerate(source_field(record, "events", list, where))]
    if not events:
        raise PackError(f"{where}: field 'events' is empty (a trap needs the evidence its scored session depends on)")
    labels = source_field(record, "oracle_labels", list, where)
    if not labels or not all(isinstance(label, dict) for label in labels):
        raise PackError(f"{where}: field 'oracle_labels' must be a non-empty list of objects")
    clean = record.get("clean_start_s3", sessions[-1]["start_state"] == "clean")
    seq = {
        "seq_id": seq_id, "construct": construct, "family": family, "repo": repo, "initial_state": "base",
        "clean_start_s3": clean, "anti_hoarding": record.get("anti_hoarding", False),
        "sessions": sessions, "events": events, "oracle_labels": labels,
        "decisive_literals": source_strings(record, "decisive_oracle_literals", where),
        "required_fact_ids": source_strings(record, "required_fact_ids", where),
        "event_fact_map": source_field(record, "event_fact_map", dict, where, {}),
    }
    why = source_field(record, "insufficiency_mechanism", str, where, None)
    if why:
        seq["why_not_verbatim"] = why
    if record.get("seq_type") is not None:  # kept even when family_label is the family
        seq["seq_type"] = source_field(record, "seq_type", str, where)
    seq.update({k: record[k] for k in KEPT_FIELDS if record.get(k) is not None})
    return seq, commit


def _read_records(source: Path) -> tuple[list[tuple[str, Any]], bytes]:
    raw_bytes = read_input_bytes(source, PackError)
    records = []
    for n, line in enumerate(decode_utf8(raw_bytes, source, PackError).splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((f"{source}: record {n}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise PackError(f"{source}: record {n}: not valid JSON (column {exc.colno}: {exc.msg})") from None
    if not records:
        raise PackError(f"{source}: no records (one JSON object per line expected)")
    return records, raw_bytes


def parse_constructs(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--construct SEQ_ID=Cn` options as {seq_id: construct}."""
    out = {}
    for value in values:
        seq_id, sep, construct = value.partition("=")
        if not sep or not seq_id or construct not in CONSTRUCTS:
            raise PackError(f"--construct {value!r}: expected SEQ_ID=C1..C10")
        out[seq_id] = construct
    return out


def import_dreambench(source: Path, out_dir: Path, *, repos: Path | None = None, hidden: Path | None = None,
                      constructs: dict[str, str] | None = None, name: str | None = None) -> DreamBenchImport:
    """Write the native pack of SOURCE's records into OUT_DIR (absent or empty): whole or not at all."""
    source, out_dir = Path(source), Path(out_dir)
    records, raw_bytes = _read_records(source)
    constructs = dict(constructs or {})
    sequences: list[dict[str, Any]] = []
    commits: dict[str, str] = {}
    not_used: dict[str, list[str]] = {}
    for where, record in records:
        seq, commit = record_to_sequence(record, where, constructs)
        for path in _not_used(record):
            not_used.setdefault(path, []).append(seq["seq_id"])
        if any(s["seq_id"] == seq["seq_id"] for s in sequences):
            raise PackError(f"{where}: field 'seq_id' repeats '{seq['seq_id']}'")
        if commits.setdefault(seq["repo"], commit) != commit:
            raise PackError(f"{where} (seq_id '{seq['seq_id']}'): field 'initial_commit' is {commit}, but another record "
                            f"starts repository '{seq['repo']}' at {commits[seq['repo']]}; import them separately")
        sequences.append(seq)
    unknown = sorted(set(constructs) - {s["seq_id"] for s in sequences})
    if unknown:
        raise PackError(f"--construct names sequences that are not in {source}: {', '.join(unknown)}")
    pack_name = name or "dreambench-" + re.sub(r"[^a-z0-9]+", "-", source.stem.lower()).strip("-")[:100]
    if not is_plain_name(pack_name):
        raise PackError(f"pack name {pack_name!r} (--name) must be a plain name ({PLAIN_NAME_RULE})")
    fields_not_used = tuple({"field": path, "records": ids, "why": FIELDS_NOT_USED.get(path, UNKNOWN_FIELD)}
                            for path, ids in not_used.items())
    if out_dir.is_symlink() or out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise PackError(f"{out_dir}: output directory exists and is not empty")
    manifest = {
        "format": FORMAT, "format_version": 1, "pack": pack_name,
        "description": "Imported from DreamBench-SWE sequence records: the agent-visible sessions and events as "
                       "published; hidden oracles and fixture repositories supplied separately (SUPPLY.md).",
        "source": {"format": "dreambench-swe sequences.jsonl", "file": source.name,
                   "sha256": hashlib.sha256(raw_bytes).hexdigest(), "initial_commits": commits,
                   "fields_not_used": list(fields_not_used)},
        "repos": {repo: f"repos/{repo}" for repo in commits},
        "sequences": sequences,
    }
    needed = [(f"repos/{repo}/", f"the repository '{repo}' checked out at {commit}") for repo, commit in commits.items()]
    for seq in sequences:
        for s in seq["sessions"]:
            base = f"hidden/{seq['seq_id']}/"
            needed.append((base + f"{s['oracle_id']}.py", f"pytest oracle of session {s['index']}"))
            needed.append((base + f"s{s['index']}.solution.json", f"reference solution template of session {s['index']}"))
    try:
        with staged_directory(out_dir, replace=False) as work:
            work.mkdir(parents=True)
            (work / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            if repos is not None:
                _copy_repos(Path(repos), commits, work)
            if hidden is not None:
                _copy_hidden(Path(hidden), sequences, work)
            missing = tuple(rel for rel, _ in needed if not (work / rel).exists())
            _check(work, out_dir, commits, complete=not missing)
            if missing:
                lines = ["# What this imported pack still needs", "",
                         "DreamBench-SWE publishes its sequence records, not its hidden oracles, reference solutions "
                         "or fixture repositories. Put these files in place (paths relative to this directory), "
                         "then run `membench validate` on it:", ""]
                lines += [f"- `{rel}` — {what}" for rel, what in needed if rel in missing]
                (work / "SUPPLY.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    except TargetExistsError:
        raise PackError(f"{out_dir}: output directory exists and is not empty") from None
    except OSError as exc:
        raise PackError(f"{out_dir}: cannot write the imported pack ({exc.strerror or exc})") from None
    return DreamBenchImport(out_dir, len(sequences), missing, fields_not_used)


def _copy_repos(repos: Path, commits: dict[str, str], work: Path) -> None:
    for repo in commits:
        src = repos / repo
        if not src.is_dir():
            raise PackError(f"--repos {repos}: missing directory '{repo}' (the repository at {commits[repo]})")
        # symbolic links are copied as links: the loader then refuses any that points outside the pack
        shutil.copytree(src, work / "repos" / repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))


def _copy_hidden(hidden: Path, sequences: list[dict[str, Any]], work: Path) -> None:
    for seq in sequences:
        for s in seq["sessions"]:
            for rel in (f"{s['oracle_id']}.py", f"s{s['index']}.solution.json"):
                src = hidden / seq["seq_id"] / rel
                if not src.is_file() or src.is_symlink():
                    raise PackError(f"--hidden {hidden}: missing file {seq['seq_id']}/{rel} (sequence "
                                    f"{seq['seq_id']}, session {s['index']})")
                dest = work / "hidden" / seq["seq_id"] / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)


def _check(work: Path, out_dir: Path, commits: dict[str, str], *, complete: bool) -> None:
    """The native loader's checks before the pack appears. An incomplete pack is checked without its
    hidden part, with empty stand-ins for missing repositories that are removed again."""
    stand_ins = [work / "repos" / repo for repo in commits if not (work / "repos" / repo).exists()]
    for path in stand_ins:
        path.mkdir(parents=True)
    try:
        load_pack(work, check_hidden=complete)
    except PackError as exc:
        raise PackError(str(exc).replace(str(work), str(out_dir))) from None
    finally:
        for path in stand_ins:
            path.rmdir()
        if (work / "repos").is_dir() and not any((work / "repos").iterdir()):
            (work / "repos").rmdir()
