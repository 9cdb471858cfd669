"""Scoring given patches: results of agents run elsewhere enter the same log, warehouse and reports.

A predictions file is JSON Lines, one object a line:
`unit` (the sequence id; for an imported pack, the task id), `condition`, `seed` (int), `patch` (a
unified diff against the session's starting tree), and optionally `session` (the session index it
belongs to; default the scored session), `cited_memory_ids` (list of str), `usage` (`input_tokens`,
`cached_tokens`, `output_tokens`, `reasoning_tokens`, `latency_ms`: ints) and `status`
(`completed` / `timeout` / `error` / `context_overflow`). Unknown fields are ignored.

Each (unit, condition, seed) runs through the very runner an agent runs through, with a
`PredictionAgent` in the agent's place: the memory system is read (so injected ids are what that
condition injects), the patch is applied to the workspace by an `apply_patch` tool call, the
citations and usage become MemoryCitation and agent Turn events, and the scorer, the processors
and the warehouse see exactly what they would see from an agent. A patch that does not apply is
recorded (the tool result's exit code and output) and the session is scored on the unchanged tree.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from producers.agents.base import AgentOutcome, AgentTask
from producers.emitter import RunEmitter
from schemas.events import bounded_text
from schemas.fields import REQUIRED, typed_field
from schemas.pack_format import Pack

STATUSES = ("completed", "timeout", "error", "context_overflow")
USAGE_FIELDS = ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "latency_ms")


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


def _get(obj: dict[str, Any], key: str, typ: type, where: str, default: Any = REQUIRED) -> Any:
    return typed_field(obj, key, typ, where, error=PredictionError, default=default)


def load_predictions(path: Path, pack: Pack, conditions: list[str] | None = None) -> list[Prediction]:
    """Parse and check every line before anything runs; `conditions` are the known condition names."""
    out: list[Prediction] = []
    seen: set[tuple[str, str, int, int]] = set()
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PredictionError(f"{path}: cannot read ({exc.strerror})") from None
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
        unit = _get(obj, "unit", str, where)
        try:
            seq = pack.sequence(unit)
        except KeyError:
            raise PredictionError(f"{where}: field 'unit' names unknown task '{unit}' of pack '{pack.name}'") from None
        condition = _get(obj, "condition", str, where)
        if conditions is not None and condition not in conditions:
            raise PredictionError(f"{where}: field 'condition' names unknown condition '{condition}' "
                                  f"(known: {', '.join(sorted(conditions))})")
        seed = _get(obj, "seed", int, where)
        session = _get(obj, "session", int, where, seq.scored_session.index)
        spec = next((s for s in seq.sessions if s.index == session), None)
        if spec is None or spec.mode != "task":
            raise PredictionError(f"{where}: field 'session' must name a task session of '{unit}', got {session}")
        patch = _get(obj, "patch", str, where)
        cited = _get(obj, "cited_memory_ids", list, where, [])
        if not all(isinstance(c, str) for c in cited):
            raise PredictionError(f"{where}: field 'cited_memory_ids' must be a list of strings")
        usage_raw = _get(obj, "usage", dict, where, {})
        usage = {}
        for key in USAGE_FIELDS:
            value = usage_raw.get(key, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PredictionError(f"{where}: field 'usage.{key}' must be a non-negative int")
            usage[key] = value
        status = _get(obj, "status", str, where, "completed")
        if status not in STATUSES:
            raise PredictionError(f"{where}: field 'status' must be one of {', '.join(STATUSES)}, got '{status}'")
        key = (unit, condition, seed, session)
        if key in seen:
            raise PredictionError(f"{where}: a second prediction for unit '{unit}', condition '{condition}', "
                                  f"seed {seed}, session {session}")
        seen.add(key)
        out.append(Prediction(unit, condition, seed, session, patch, tuple(cited), usage, status))
    if not out:
        raise PredictionError(f"{path}: no predictions")
    return out


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
        self._turn(emitter, f"Prediction applied ({len(pred.patch.splitlines())} diff lines).", pred.usage)
        if pred.cited_memory_ids:
            emitter.emit("MemoryCitation", {"memory_ids": list(pred.cited_memory_ids)})
        return AgentOutcome(status=pred.status, cited_ids=list(pred.cited_memory_ids))

    @staticmethod
    def _turn(emitter: RunEmitter, text: str, usage: dict[str, int]) -> None:
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(text), "source_event_id": None, "source_kind": None,
                              **{k: usage.get(k, 0) for k in USAGE_FIELDS}})


def group_units(predictions: list[Prediction]) -> dict[tuple[str, str, int], dict[int, Prediction]]:
    """(unit, condition, seed) -> session index -> prediction."""
    out: dict[tuple[str, str, int], dict[int, Prediction]] = {}
    for pred in predictions:
        out.setdefault((pred.unit, pred.condition, pred.seed), {})[pred.session] = pred
    return out
