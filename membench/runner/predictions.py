"""Scoring given patches: results of agents run elsewhere enter the same log, warehouse and reports.

A predictions file is JSON Lines, one object a line:
`unit` (the sequence id; for an imported pack, the task id), `condition`, `seed` (int), `patch` (a
unified diff against the session's starting tree), and optionally `session` (the session index it
belongs to; default the scored session), `cited_memory_ids` (list of str), `usage` (`input_tokens`,
`cached_tokens`, `output_tokens`, `reasoning_tokens`, `latency_ms`: ints), `status`
(`completed` / `timeout` / `error` / `context_overflow`), and `transcript` with
`transcript_format` (the agent CLI's own JSON-lines transcript of the session: a path relative to
the predictions file, in one of `membench.agents.transcripts.registry.FORMATS`; docs/transcripts.md).
Unknown fields are ignored.

Each (unit, condition, seed) runs through the very runner an agent runs through, with a
`PredictionAgent` in the agent's place: the memory system is read (so injected ids are what that
condition injects), the patch is applied to the workspace by an `apply_patch` tool call, the
citations and usage become MemoryCitation and agent Turn events, and the scorer, the processors
and the warehouse see exactly what they would see from an agent. A patch that does not apply is
recorded (the tool result's exit code and output) and the session is scored on the unchanged tree.

With a transcript, its events (turns, tool calls and results, compactions) are recorded before
that `apply_patch` call, in place of the one summary Turn; its usage Turns are the session's
usage, so `usage` beside `transcript` is refused as ambiguous. Its citations (the final message's
`Memory citations:` line) stand when `cited_memory_ids` is absent, and its status ("completed" /
"error") when `status` is absent; an explicit field wins. Every transcript is read and parsed
strictly while the file is loaded, before anything runs: a malformed transcript line is a
PredictionError naming the predictions line and the transcript's file and line.

The file is untrusted: it is read within `MAX_INPUT_BYTES` as strict UTF-8 (a bad byte is one
error naming the byte offset and line), every path a patch names (`diff --git`, `---`/`+++`,
`rename`/`copy from`/`to` headers) must be relative without '..' — refused before anything runs,
although `git apply` would refuse such a patch too — and so must a transcript path, which must
also stay inside the predictions file's directory once symbolic links are resolved; a transcript
is read within the same size limit.

SWE-bench predictions (docs/exports/swebench.md) are read too: a record with `instance_id` (and no
`unit`) is a SWE-bench prediction record — `instance_id`, `model_name_or_path`, `model_patch`, as
the SWE-bench harness reads them — and is mapped to a native one: `instance_id` is the unit (the
task id of the pack), `model_patch` the patch (null or "" is an empty patch), `condition` the
record's own `condition` field, else the `default_condition` given (`membench score --condition`),
else the pack's baseline (`pack_baseline`), `seed` the record's `seed` field, else 1, and
`model_name_or_path` the agent label (`Prediction.model`). Every native optional field works the
same in either shape. The format is detected per file: the first record fixes it, and a record of
the other shape is refused naming its line; so is a second `model_name_or_path` (one file, one agent).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.agents.base import AgentOutcome, AgentTask
from membench.bus.emitter import RunEmitter
from membench.agents.transcripts.base import Transcript, TranscriptError
from membench.agents.transcripts.registry import FORMATS, parse_transcript
from membench.schemas.events import bounded_text
from membench.formats.fields import (REQUIRED, decode_utf8, read_input_bytes, read_input_text, relative_path_problem,
                            typed_field)
from membench.formats.pack_format import Pack

STATUSES = ("completed", "timeout", "error", "context_overflow")
USAGE_FIELDS = ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "latency_ms")
BASELINE_CONDITIONS = ("B0", "no_memory")  # the same order as the report's baseline (membench/reports/comparisons.py)
SWEBENCH_SEED = 1  # the seed of a SWE-bench record that names none


class PredictionError(ValueError):
    """A predictions file that cannot be scored; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Prediction:
    unit: str
    condition: str
    seed: int
    session: int
    patch: str
    cited_memory_ids: tuple[str, ...] = ()
    usage: dict[str, int] = field(default_factory=dict)
    status: str = "completed"
    transcript: Transcript | None = None
    transcript_sha256: str = ""  # of the transcript file's bytes: part of the derived run-set id
    model: str = ""  # a SWE-bench record's model_name_or_path ("" for a native record)


def _get(obj: dict[str, Any], key: str, typ: type, where: str, default: Any = REQUIRED) -> Any:
    return typed_field(obj, key, typ, where, error=PredictionError, default=default)


_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_NAMED = ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to ")


_ESCAPES = {"a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _unquote(name: str) -> str:
    """A git header path: C-quoted ("a/x\\303\\244") when it holds special characters, else as is.
    Octal escapes are bytes of UTF-8 (so "\\056\\056" is '..' and must be decoded to be checked)."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        if body[i] == "\\" and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        elif body[i] == "\\" and i + 1 < len(body):
            out += _ESCAPES.get(body[i + 1], body[i + 1]).encode()
            i += 2
        else:
            out += body[i].encode()
            i += 1
    return out.decode("utf-8", "replace")


def _path_problem(name: str, prefixed: bool) -> str | None:
    """Why a header path may leave the workspace: checked as given and, for ---/+++ paths, also
    with the a/ b/ prefix that `git apply -p1` strips."""
    if name == "/dev/null":
        return None
    candidates = [name]
    if prefixed and "/" in name:
        candidates.append(name.split("/", 1)[1])
    for candidate in candidates:
        problem = relative_path_problem(candidate)
        if problem is not None and candidate:
            return f"'{candidate}' {problem}"
    return None


def patch_path_problem(patch: str) -> tuple[int, str] | None:
    """(line number in the patch, "'path' problem") for the first header path that is absolute or
    holds '..', else None. Hunk bodies are skipped by their line counts, so a removed line that reads
    '-- x' is content, not a header."""
    old = new = 0
    for number, line in enumerate(patch.splitlines(), 1):
        if old > 0 or new > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old, new = old - 1, new - 1
            elif tag == "-":
                old -= 1
            elif tag == "+":
                new -= 1
            continue  # "\\ No newline at end of file" and the like
        hunk = _HUNK.match(line)
        if hunk:
            old = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new = int(hunk.group(2)) if hunk.group(2) is not None else 1
            continue
        if line.startswith("diff --git "):
            names = [_unquote(t) for t in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', line[len("diff --git "):])]
            problem = next((f"'{n}' leaves its directory ('..')" for n in names if ".." in n.split("/")), None)
        elif line.startswith(_NAMED):
            head = next(h for h in _NAMED if line.startswith(h))
            name = _unquote(line[len(head):].split("\t", 1)[0].rstrip("\r"))
            problem = _path_problem(name, prefixed=head in ("--- ", "+++ "))
        else:
            continue
        if problem is not None:
            return number, problem
    return None


def pack_baseline(pack: Pack) -> str:
    """The condition a SWE-bench record without one is scored under: of the conditions the pack was
    published with, B0, else no_memory, else the first; B0 when the pack names none."""
    declared = list(pack.conditions)
    return next((c for c in BASELINE_CONDITIONS if c in declared), declared[0] if declared else "B0")


def record_format(obj: dict[str, Any], where: str) -> str:
    """"swebench" for a SWE-bench prediction record (`instance_id`, no `unit`), else "membench"."""
    if "instance_id" in obj and "unit" in obj:
        raise PredictionError(f"{where}: fields 'unit' and 'instance_id' are both given: a record is native "
                              "(unit) or SWE-bench (instance_id), not both")
    return "swebench" if "instance_id" in obj else "membench"


def load_predictions(path: Path, pack: Pack, conditions: list[str] | None = None,
                     default_condition: str | None = None) -> list[Prediction]:
    """Parse and check every line before anything runs; `conditions` are the known condition names,
    `default_condition` the condition of SWE-bench records that name none (else the pack's baseline)."""
    out: list[Prediction] = []
    seen: set[tuple[str, str, int, int]] = set()
    file_format: tuple[str, int] | None = None  # (format, line) of the first record
    model: tuple[str, int] | None = None  # (model_name_or_path, line) of the first SWE-bench record
    lines = read_input_text(path, PredictionError).splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PredictionError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise PredictionError(f"{where}: must be a JSON object")
        fmt = record_format(obj, where)
        if file_format is None:
            file_format = (fmt, number)
        elif fmt != file_format[0]:
            raise PredictionError(f"{where}: a {_FORMAT_NAMES[fmt]} record, but line {file_format[1]} is a "
                                  f"{_FORMAT_NAMES[file_format[0]]} record: a predictions file holds one format")
        swebench = fmt == "swebench"
        unit_key, patch_key = ("instance_id", "model_patch") if swebench else ("unit", "patch")
        name = ""
        if swebench:
            name = _get(obj, "model_name_or_path", str, where)
            if not name.strip():
                raise PredictionError(f"{where}: field 'model_name_or_path' must not be empty")
            if model is None:
                model = (name, number)
            elif name != model[0]:
                raise PredictionError(f"{where}: field 'model_name_or_path' is '{name}', but line {model[1]} "
                                      f"names '{model[0]}': a predictions file is one agent's")
        unit = _get(obj, unit_key, str, where)
        try:
            seq = pack.sequence(unit)
        except KeyError:
            raise PredictionError(f"{where}: field '{unit_key}' names unknown task '{unit}' of pack "
                                  f"'{pack.name}'") from None
        if swebench:
            condition = _get(obj, "condition", str, where, default_condition or pack_baseline(pack))
        else:
            condition = _get(obj, "condition", str, where)
        if conditions is not None and condition not in conditions:
            origin = "field 'condition'" if obj.get("condition") is not None or not swebench else \
                ("--condition" if default_condition else "the pack's baseline condition")
            raise PredictionError(f"{where}: {origin} names unknown condition '{condition}' "
                                  f"(known: {', '.join(sorted(conditions))})")
        seed = _get(obj, "seed", int, where, SWEBENCH_SEED if swebench else REQUIRED)
        session = _get(obj, "session", int, where, seq.scored_session.index)
        spec = next((s for s in seq.sessions if s.index == session), None)
        if spec is None or spec.mode != "task":
            raise PredictionError(f"{where}: field 'session' must name a task session of '{unit}', got {session}")
        if swebench:
            if patch_key not in obj:
                raise PredictionError(f"{where}: missing required field '{patch_key}'")
            patch = _get(obj, patch_key, str, where, "")  # null is an empty patch, as the harness reads it
        else:
            patch = _get(obj, patch_key, str, where)
        bad = patch_path_problem(patch)
        if bad is not None:
            raise PredictionError(f"{where}: field '{patch_key}': diff line {bad[0]}: path {bad[1]}; "
                                  "a patch must stay inside the workspace")
        cited = _get(obj, "cited_memory_ids", list, where, None)
        if cited is not None and not all(isinstance(c, str) for c in cited):
            raise PredictionError(f"{where}: field 'cited_memory_ids' must be a list of strings")
        transcript, transcript_sha256 = load_transcript(obj, path, where)
        usage_raw = _get(obj, "usage", dict, where, {})
        usage = {}
        for key in USAGE_FIELDS:
            value = usage_raw.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PredictionError(f"{where}: field 'usage.{key}' must be a non-negative int")
            usage[key] = value
        if cited is None:
            cited = list(transcript.cited_memory_ids) if transcript is not None else []
        status = _get(obj, "status", str, where, transcript.status if transcript is not None else "completed")
        if status not in STATUSES:
            raise PredictionError(f"{where}: field 'status' must be one of {', '.join(STATUSES)}, got '{status}'")
        cell = (unit, condition, seed, session)
        if cell in seen:
            raise PredictionError(f"{where}: a second prediction for unit '{unit}', condition '{condition}', "
                                  f"seed {seed}, session {session}")
        seen.add(cell)
        out.append(Prediction(unit, condition, seed, session, patch, tuple(cited), usage, status, transcript,
                              transcript_sha256, name))
    if not out:
        raise PredictionError(f"{path}: no predictions")
    return out


_FORMAT_NAMES = {"membench": "native (unit, condition, seed, patch)",
                 "swebench": "SWE-bench (instance_id, model_name_or_path, model_patch)"}


def load_transcript(obj: dict[str, Any], path: Path, where: str) -> tuple[Transcript | None, str]:
    """The prediction's transcript, parsed strictly, and the SHA-256 of its file (None, "" when it
    names none). Its path is
    relative to the predictions file and stays in that file's directory (symbolic links
    resolved); every problem is a PredictionError naming `where` and the field."""
    rel = _get(obj, "transcript", str, where, None)
    fmt = _get(obj, "transcript_format", str, where, None)
    if rel is None:
        if fmt is not None:
            raise PredictionError(f"{where}: field 'transcript_format' is given without 'transcript'")
        return None, ""
    if fmt is None:
        raise PredictionError(f"{where}: missing required field 'transcript_format' (required with 'transcript'; "
                              f"one of {', '.join(FORMATS)})")
    if fmt not in FORMATS:
        raise PredictionError(f"{where}: field 'transcript_format' must be one of {', '.join(FORMATS)}, got '{fmt}'")
    problem = relative_path_problem(rel)
    if problem is not None:
        raise PredictionError(f"{where}: field 'transcript': path '{rel}' {problem}; "
                              "a transcript path is relative to the predictions file")
    if obj.get("usage") is not None:
        raise PredictionError(f"{where}: fields 'usage' and 'transcript' are both given: a transcript's usage is "
                              "the session's usage, so give one of them")
    base = Path(path).parent
    target = base / rel
    if not target.resolve().is_relative_to(base.resolve()):
        raise PredictionError(f"{where}: field 'transcript': path '{rel}' leaves the predictions file's directory "
                              "(through a symbolic link)")
    try:
        data = read_input_bytes(target, PredictionError)
        text = decode_utf8(data, target, PredictionError)
        return parse_transcript(text.split("\n"), fmt, str(target), strict=True), hashlib.sha256(data).hexdigest()
    except (PredictionError, TranscriptError) as exc:
        raise PredictionError(f"{where}: field 'transcript': {exc}") from None


def apply_patch(patch: str, workspace: Path) -> tuple[int, str]:
    """Apply a unified diff inside `workspace` with `git apply` (paths stay inside it: git refuses
    `..` and writes through symlinks); a/ b/ prefixed diffs first, then plain paths."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(workspace).resolve().parent), "LC_ALL": "C"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    output = ""
    for strip in ("-p1", "-p0"):
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", strip, "-"], input=patch, text=True,
                              cwd=workspace, env=env, capture_output=True, timeout=60)
        if proc.returncode == 0:
            return 0, proc.stdout + proc.stderr
        output += f"git apply {strip}: {proc.stderr.strip()}\n"
    return proc.returncode, output


class PredictionAgent:
    """Stands where an agent stands and replays one unit's given predictions, one per session."""

    kind = "external"

    def __init__(self, name: str, by_session: dict[int, Prediction]):
        self.name = name
        self.by_session = by_session

    def act(self, task: AgentTask, emitter: RunEmitter) -> AgentOutcome:
        pred = self.by_session.get(emitter.session_index)
        if pred is None:
            self._turn(emitter, "No prediction was given for this session.", {})
            return AgentOutcome()
        if pred.transcript is not None:  # the agent's own turns and tools; its citation is emitted below
            for event in pred.transcript.events:
                if event.kind == "MemoryCitation":
                    continue
                payload = event.payload
                if "call_id" in payload:  # a CLI numbers its calls per invocation: unique per run here
                    payload = {**payload, "call_id": f"t{emitter.session_index}-{payload['call_id']}"}
                emitter.emit_any(event.kind, payload, visibility=event.visibility)
        if pred.patch.strip():
            call_id = f"call-{emitter.session_index}-0"
            digest = hashlib.sha256(pred.patch.encode()).hexdigest()
            emitter.emit("ToolCall", {"call_id": call_id, "name": "apply_patch", "arguments_digest": digest,
                                      "is_patch": True})
            started = time.monotonic()
            code, output = apply_patch(pred.patch, task.workspace)
            emitter.emit("ToolResult", {"call_id": call_id, "name": "apply_patch", "exit_code": code,
                                        "duration_ms": int((time.monotonic() - started) * 1000),
                                        "output_size": len(output), "is_patch": True,
                                        "output": bounded_text(output) if output else None})
        if pred.transcript is None:
            self._turn(emitter, f"Prediction applied ({len(pred.patch.splitlines())} diff lines).", pred.usage)
        if pred.cited_memory_ids:
            emitter.emit("MemoryCitation", {"memory_ids": list(pred.cited_memory_ids)})
        return AgentOutcome(status=pred.status, cited_ids=list(pred.cited_memory_ids))

    @staticmethod
    def _turn(emitter: RunEmitter, text: str, usage: dict[str, int]) -> None:
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(text), "source_event_id": None, "source_kind": None,
                              "input_tokens": usage.get("input_tokens", 0), "cached_tokens": usage.get("cached_tokens", 0),
                              "output_tokens": usage.get("output_tokens", 0),
                              "reasoning_tokens": usage.get("reasoning_tokens", 0),
                              "latency_ms": usage.get("latency_ms", 0)})


def group_units(predictions: list[Prediction]) -> dict[tuple[str, str, int], dict[int, Prediction]]:
    """(unit, condition, seed) -> session index -> prediction."""
    out: dict[tuple[str, str, int], dict[int, Prediction]] = {}
    for pred in predictions:
        out.setdefault((pred.unit, pred.condition, pred.seed), {})[pred.session] = pred
    return out
