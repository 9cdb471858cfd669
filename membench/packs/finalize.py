"""Filling secret placeholders `{{SECRET:name:class}}` from a CSPRNG (`secrets`).

A name is scoped to its sequence (trap): every occurrence of `{{SECRET:name:class}}` in the
sequence's manifest entry and in `hidden/<seq_id>/` gets the same value, so events, oracle,
reference solution and curated context agree. Finalizing refuses, naming the file, the sequence
and the field:

- a placeholder outside any one trap's material (the pack-level manifest fields, `repos/`, a
  skill bank, another trap's hidden directory): it would be shared across traps;
- the same name in two traps (cross-trap-shared);
- a placeholder whose class is unknown, or a name used with two classes;
- when a sequence declares `secrets: {name: class}`: a used but undeclared name, a declared but
  unused name, a class that differs from the declaration;
- anything left that still looks like a placeholder after filling (a leftover).

Values are distinct within the pack and never occur anywhere in the skeleton's text, so a value
found in a log identifies exactly one trap. The provenance file records the generator's hash, each
secret's format class and where it was placed (event ids, hidden files), and a hash of the secret
manifest (names and classes) — never a value.

Finalizing writes nothing half-way: the pack is built in a staging directory next to OUT and
renamed to OUT at the end (`staged_directory`, which `membench/packs/importers/remem.py` uses too); on
any error the staging directory is removed and an existing OUT is left as it was.
"""

from __future__ import annotations

import errno
import hashlib
import inspect
import json
import os
import re
import secrets
import shutil
import string
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from membench.formats.fields import decode_utf8, read_input_text
from membench.formats.pack_format import SECRET, SECRET_CLASSES, SECRET_LIKE, PackError, sequence_texts

GENERATORS = {
    "hex8": lambda: secrets.token_hex(4),
    "hex12": lambda: secrets.token_hex(6),
    "hex16": lambda: secrets.token_hex(8),
    "token": lambda: secrets.token_urlsafe(12).replace("-", "x").replace("_", "y"),
    "word": lambda: "".join(secrets.choice(string.ascii_uppercase) for _ in range(8)),
    "int": lambda: str(1000 + secrets.randbelow(9000)),
}
assert tuple(GENERATORS) == SECRET_CLASSES
# values each class can draw, edge shapes included (all digits, all letters, boundaries): a slot
# pattern must find its answer under every one of them, or memory-literal fails that trap for some
# draws only (a pattern that can never match its secret's class fails it always)
SAMPLES = {
    "hex8": ("0123abcd", "ffffffff", "13572468"),
    "hex12": ("0123456789ab", "ffffffffffff", "135724681357"),
    "hex16": ("0123456789abcdef", "ffffffffffffffff", "1357246813572468"),
    "token": ("Ab3xYz09QwErTy12", "abcdefghijklmnop", "1234567890123456"),
    "word": ("ABCDEFGH", "ZZZZZZZZ", "QWERTYUI"),
    "int": ("1000", "9999", "4711"),
}
assert tuple(SAMPLES) == SECRET_CLASSES


def slot_problem(name: str, answer: str, pattern: str, default: str, visible: list[str]) -> str | None:
    """Why `scripted:memory-literal` could never fill slot NAME from what the agent sees, or None.

    A slot whose answer is empty or its own default needs no memory (C5's out-of-scope slot, C9/C10's
    "carry nothing over"); any other must be found by its pattern — group 1 equal to the answer — in
    at least one agent-visible text (a session instruction, an event, the curated context). The
    answer's value is never part of the message: it may be a secret."""
    if not answer or answer == default:
        return None
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"slot '{name}': field 'pattern' is not a regex ({exc})"
    for text in visible:
        for found in compiled.finditer(text):
            if found.group(1) == answer:
                return None
    return (f"slot '{name}': its pattern never captures its answer in any instruction, event or curated "
            "context the agent sees (memory-literal could never pass this trap; check the pattern against "
            "the secret class's value shape, docs/authoring.md)")


def _sample(text: str, k: int) -> str:
    return SECRET.sub(lambda m: SAMPLES[m.group(2)][k] if m.group(2) in SAMPLES else m.group(0), text)


def skeleton_slot_problems(skeleton: Path, seq: dict[str, Any], where: str) -> list[str]:
    """`slot_problem` for every slot of a skeleton's sequence, with each placeholder replaced by each
    of its class's SAMPLES in turn (the pattern must hold for any value finalize may draw)."""
    visible = [e.get("content", "") for e in seq.get("events", []) if isinstance(e, dict)]
    visible += [s.get("instruction", "") for s in seq.get("sessions", []) if isinstance(s, dict)]
    visible += [seq.get("curated_context") or ""]
    visible = [t for t in visible if isinstance(t, str)]
    problems = []
    hidden = skeleton / "hidden" / str(seq.get("seq_id", "?"))
    for path in sorted(hidden.glob("s*.solution.json")) if hidden.is_dir() else []:
        try:
            slots = json.loads(_read(path)).get("slots", {})
        except (json.JSONDecodeError, AttributeError):
            continue  # the loader names a malformed solution
        for name, slot in slots.items() if isinstance(slots, dict) else ():
            if not isinstance(slot, dict) or not all(isinstance(slot.get(k), str) for k in ("answer", "pattern", "default")):
                continue
            for k in range(3):
                problem = slot_problem(name, _sample(slot["answer"], k), _sample(slot["pattern"], k),
                                       _sample(slot["default"], k), [_sample(t, k) for t in visible])
                if problem is not None:
                    problems.append(f"{path}: sequence {seq.get('seq_id')}: {problem}")
                    break
    return problems

_TEXT_SUFFIXES = {".py", ".json", ".md", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".csv", ".sha256", ""}


def generator_hash() -> str:
    """SHA-256 of this module's source: the generator code that produced a pack's secrets."""
    source = inspect.getsource(sys.modules[__name__])
    return hashlib.sha256(source.encode()).hexdigest()


def _text_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix in _TEXT_SUFFIXES)


def _read(path: Path) -> str:
    # for finding placeholders (ASCII) only; a file is rewritten only through _fill_file
    return path.read_text(encoding="utf-8", errors="ignore")


class TargetExistsError(FileExistsError):
    """`staged_directory` found its target already made (and was not to replace it)."""


@contextmanager
def staged_directory(target: Path, *, replace: bool = True) -> Iterator[Path]:
    """Build a directory that appears at TARGET whole or not at all.

    Yields a path (not yet created) inside a fresh staging directory next to TARGET — the same file
    system, so the final rename is atomic. When the `with` body returns, that path is renamed to
    TARGET; an existing TARGET is first moved into the staging directory when `replace` (and moved
    back if the rename fails), otherwise a non-empty TARGET raises TargetExistsError. On any error,
    the body's included, the staging directory and the parent directories this created are removed
    and TARGET is as it was. A process killed mid-way leaves only the hidden staging directory
    (`.<name>.staging-*`), never a partial TARGET."""
    target = Path(target)
    created = [p for p in (target.parent, *target.parent.parents) if not p.exists()]  # innermost first
    staging: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:64]}.staging-", dir=target.parent))
        yield staging / "new"
        _commit(staging, target, replace)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for parent in created:
            try:
                parent.rmdir()
            except OSError:
                break
        raise
    shutil.rmtree(staging, ignore_errors=True)


def _commit(staging: Path, target: Path, replace: bool) -> None:
    old = staging / "old"
    present = target.exists() or target.is_symlink()
    if present and not replace and not (target.is_dir() and not target.is_symlink() and not any(target.iterdir())):
        raise TargetExistsError(f"{target}: already exists")
    if present and replace:
        os.rename(target, old)
    try:
        os.rename(staging / "new", target)
    except OSError as exc:
        if present and replace:
            os.rename(old, target)
        if not replace and exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # another process was first
            raise TargetExistsError(f"{target}: already exists") from None
        raise


def _fill_file(path: Path, fill: Any, place: str, source: Path) -> None:
    """Fill the placeholders of one hidden text file; a file without any is left byte for byte.
    Errors name SOURCE, the skeleton's file (PATH is its copy in the staging directory)."""
    data = path.read_bytes()
    if b"SECRET" not in data:
        return
    path.write_text(fill(decode_utf8(data, source, PackError), place), encoding="utf-8")


def scan_placeholders(skeleton: Path) -> dict[str, Any]:
    """Where every placeholder of SKELETON is, and what is wrong with it.

    Returns {"sequences": {seq_id: {"used": {name: class}, "declared": {...}, "problems": [...]}},
    "pack_problems": [...]}; a problem is a message naming the file, the sequence and the field.
    Sequence problems refuse that trap; pack problems refuse the pack."""
    skeleton = Path(skeleton)
    manifest_path = skeleton / "manifest.json"
    manifest = json.loads(read_input_text(manifest_path, PackError))
    out: dict[str, Any] = {"sequences": {}, "pack_problems": []}
    owner: dict[str, str] = {}  # secret name -> the sequence that uses it
    hidden_root = skeleton / "hidden"
    seq_ids = [seq.get("seq_id", f"sequences[{i}]") for i, seq in enumerate(manifest.get("sequences", []))]
    for seq in manifest.get("sequences", []):
        seq_id = seq.get("seq_id", "?")
        where = f"{manifest_path}: sequence {seq_id}"
        entry: dict[str, Any] = {"used": {}, "declared": dict(seq.get("secrets", {}) or {}), "problems": []}
        texts = [(where, t) for t in sequence_texts(seq)]
        hidden = hidden_root / seq_id
        for path in _text_files(hidden) if hidden.is_dir() else []:
            texts.append((f"{path}: sequence {seq_id}", _read(path)))
        for text_where, text in texts:
            for match in SECRET.finditer(text):
                name, cls = match.group(1), match.group(2)
                if cls not in SECRET_CLASSES:
                    entry["problems"].append(f"{text_where}: placeholder '{name}' has unknown class '{cls}' "
                                             f"(known: {', '.join(SECRET_CLASSES)})")
                    continue
                if entry["used"].setdefault(name, cls) != cls:
                    entry["problems"].append(f"{text_where}: placeholder '{name}' used with classes "
                                             f"{entry['used'][name]} and {cls}")
            stripped = SECRET.sub("", text)
            for bad in SECRET_LIKE.findall(stripped):
                entry["problems"].append(f"{text_where}: malformed secret placeholder {bad!r} "
                                         "(expected {{SECRET:name:class}})")
        if "secrets" in seq:
            for name, cls in entry["used"].items():
                if name not in entry["declared"]:
                    entry["problems"].append(f"{where}: field 'secrets' does not declare placeholder '{name}' "
                                             "(undeclared placeholder)")
                elif entry["declared"][name] != cls:
                    entry["problems"].append(f"{where}: field 'secrets.{name}' declares class "
                                             f"{entry['declared'][name]}, the placeholder uses {cls}")
            for name in entry["declared"]:
                if name not in entry["used"]:
                    entry["problems"].append(f"{where}: field 'secrets' declares '{name}', which no event, oracle "
                                             "or solution uses (unused placeholder)")
        entry["problems"] += skeleton_slot_problems(skeleton, seq, where)
        for name in set(entry["used"]) | set(entry["declared"]):
            if name in owner and owner[name] != seq_id:
                problem = (f"{where}: placeholder '{name}' is also used by sequence {owner[name]} "
                           "(cross-trap-shared placeholder; secrets are per trap)")
                entry["problems"].append(problem)
                out["sequences"][owner[name]]["problems"].append(problem)
            owner.setdefault(name, seq_id)
        out["sequences"][seq_id] = entry
    # placeholders outside any one trap's material
    top = {k: v for k, v in manifest.items() if k != "sequences"}
    for text in sequence_texts(top):
        for bad in SECRET_LIKE.findall(text):
            out["pack_problems"].append(f"{manifest_path}: a pack-level field holds placeholder {bad!r} "
                                        "(it would be shared across traps; secrets belong to one sequence)")
    for path in _text_files(skeleton):
        rel = path.relative_to(skeleton)
        if rel.as_posix() == "manifest.json":
            continue
        if rel.parts[0] == "hidden" and len(rel.parts) > 2 and rel.parts[1] in seq_ids:
            continue
        for bad in SECRET_LIKE.findall(_read(path)):
            out["pack_problems"].append(f"{path}: placeholder {bad!r} outside any trap's manifest entry or "
                                        "hidden/<seq_id>/ (it would be shared across traps)")
    return out


def _fresh_value(cls: str, taken: set[str], corpus: str) -> str:
    for _ in range(1000):
        value = GENERATORS[cls]()
        if value not in taken and value not in corpus and not any(value in t or t in value for t in taken):
            return value
    raise PackError(f"cannot draw a fresh value of class {cls} (the class is too small for this pack)")


def finalize_pack(skeleton: Path, out: Path, strict: bool = True,
                  reveal: dict[str, dict[str, str]] | None = None, replace: bool = True) -> dict[str, Any]:
    """Copy SKELETON to OUT with every placeholder filled; write and return the provenance record.

    strict: refuse (PackError) on the first problem. Not strict (the validator): a trap with
    problems is still copied, its problems recorded in provenance["sequences"][id]["problems"] and
    its placeholders left in place, so the admission funnel can count it as refused.
    reveal: when a dict is given, it receives {seq_id: {name: value}} in memory (tests only; values
    are never written anywhere but the finalized pack's own trap material).
    replace: an existing OUT is replaced (atomically, only once the new pack is complete);
    otherwise an existing non-empty OUT raises TargetExistsError. Errors name the skeleton's files:
    OUT is written only by the final rename (`staged_directory`)."""
    skeleton, out = Path(skeleton), Path(out)
    scan = scan_placeholders(skeleton)
    if scan["pack_problems"]:
        raise PackError(scan["pack_problems"][0])
    if strict:
        for seq_id, entry in scan["sequences"].items():
            if entry["problems"]:
                raise PackError(entry["problems"][0])
    manifest = json.loads(read_input_text(skeleton / "manifest.json", PackError))
    with staged_directory(out, replace=replace) as work:
        shutil.copytree(skeleton, work, ignore=shutil.ignore_patterns("__pycache__"))
        provenance = _fill_pack(skeleton, work, manifest, scan, reveal)
    return provenance


def _fill_pack(skeleton: Path, work: Path, manifest: dict[str, Any], scan: dict[str, Any],
               reveal: dict[str, dict[str, str]] | None) -> dict[str, Any]:
    """Fill WORK (a fresh copy of SKELETON) in place and write its provenance; errors name SKELETON's files."""
    corpus = "\n".join(_read(p) for p in _text_files(skeleton))
    taken: set[str] = set()
    provenance: dict[str, Any] = {
        "generator": "python secrets (CSPRNG)", "generator_sha256": generator_hash(),
        "skeleton": skeleton.name, "classes": {c: _class_doc(c) for c in SECRET_CLASSES}, "sequences": {},
    }
    for seq in manifest.get("sequences", []):
        seq_id = seq.get("seq_id", "?")
        entry = scan["sequences"][seq_id]
        record: dict[str, Any] = {"secrets": {}, "problems": list(entry["problems"])}
        if entry["problems"]:  # left unfilled: refused by the validator
            provenance["sequences"][seq_id] = record
            continue
        values = {name: _fresh_value(cls, taken, corpus) for name, cls in sorted(entry["used"].items())}
        taken.update(values.values())
        if reveal is not None:
            reveal[seq_id] = dict(values)
        where_used: dict[str, set[str]] = {name: set() for name in values}

        def fill(text: str, place: str) -> str:
            def sub(match: Any) -> str:
                where_used[match.group(1)].add(place)
                return values[match.group(1)]
            return SECRET.sub(sub, text)

        if isinstance(seq.get("curated_context"), str):
            seq["curated_context"] = fill(seq["curated_context"], "curated_context")
        for event in seq.get("events", []):
            if isinstance(event, dict) and isinstance(event.get("content"), str):
                event["content"] = fill(event["content"], f"event:{event.get('event_id')}")
        filled = json.loads(fill(json.dumps(seq), "manifest"))
        seq.clear()
        seq.update(filled)
        hidden = work / "hidden" / seq_id
        for path in _text_files(hidden) if hidden.exists() else []:
            rel = path.relative_to(work)
            _fill_file(path, fill, f"file:{rel.as_posix()}", skeleton / rel)
        decisive = seq.get("decisive_literals", [])
        record["secrets"] = {name: {"class": entry["used"][name], "placed_in": sorted(where_used[name])}
                             for name in sorted(values)}
        record["decisive_literals_with_secret"] = [any(v in lit for v in values.values()) for lit in decisive]
        record["secret_manifest_sha256"] = hashlib.sha256(
            json.dumps(sorted(entry["used"].items())).encode()).hexdigest()
        provenance["sequences"][seq_id] = record
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for path in _text_files(work):
        rel = path.relative_to(work)
        if rel.parts[0] == "hidden" and len(rel.parts) > 2 and provenance["sequences"].get(rel.parts[1], {}).get("problems"):
            continue
        leftover = SECRET_LIKE.search(_read(path)) if rel.as_posix() != "manifest.json" else None
        if leftover:
            raise PackError(f"{skeleton / rel}: leftover secret placeholder {leftover.group(0)!r} after finalize")
    for seq in manifest.get("sequences", []):
        if provenance["sequences"][seq.get("seq_id", "?")]["problems"]:
            continue
        for text in sequence_texts(seq):
            leftover = SECRET_LIKE.search(text)
            if leftover:
                raise PackError(f"{skeleton / 'manifest.json'}: sequence {seq.get('seq_id')}: leftover secret "
                                f"placeholder {leftover.group(0)!r} after finalize")
    (work / "provenance.json").write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return provenance


def _class_doc(cls: str) -> str:
    return {"hex8": "8 lowercase hex digits", "hex12": "12 lowercase hex digits", "hex16": "16 lowercase hex digits",
            "token": "16 URL-safe letters and digits", "word": "8 uppercase letters",
            "int": "an integer in [1000, 9999]"}[cls]
