"""The environment a run set is scored in, recorded beside its log and checked on every resume
(docs/design.md §5, "Resuming a run set").

Before any unit of an embedded `run`, `score` or `transfer`, the scoring pre-flight runs in the
backend the command uses (`membench.runner.scoring_preflight`); a failure stops the command (RunRefused,
exit 2) before anything is written. Its result and the versions that decide a verdict — membench's
version and code digest, the Python membench runs on, the sandboxed interpreter's Python and pytest,
the backend and its version, the oracle runner (fast or pytest: the two agree on every built-in
session, but a resume must not mix them unrecorded) — are the run set's environment, kept as
`runs/<run set>/environment.json`:

    {"format": "membench-scoring-environment", "version": 1, "digest": "<sha256 of `fields`>",
     "fields": {"membench_version", "code_digest", "python", "sandbox_python", "pytest",
                "sandbox_backend", "sandbox_version", "oracle_runner", "scoring_preflight"},
     "recorded_at": "<UTC ISO time>", "python_executable": "<path>"}

A run set whose log already holds events is resumed only in the environment it records: otherwise
the units complete there would be mixed with units scored differently (a broken environment's
failures kept as "already complete"), so the command refuses, naming both digests, what differs
and the fix (a new run set). A run set with no events yet takes the current environment.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from membench.pipeline.grid_run import RunRefused

ENVIRONMENT_FILE = "environment.json"
FORMAT = "membench-scoring-environment"
VERSION = 1
# what a reader sees of each field when it differs
LABELS = {"membench_version": "membench version", "code_digest": "code digest", "python": "Python",
          "sandbox_python": "the sandbox's Python", "pytest": "pytest (in the sandbox)",
          "sandbox_backend": "sandbox backend", "sandbox_version": "sandbox version",
          "oracle_runner": "oracle runner", "scoring_preflight": "scoring pre-flight"}


@dataclass(frozen=True)
class ScoringEnvironment:
    fields: dict[str, str]

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "digest": self.digest, "fields": dict(self.fields),
                "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "python_executable": sys.executable}


def membench_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("membench")
    except PackageNotFoundError:
        return "unknown"


def scoring_environment(preflight) -> ScoringEnvironment:
    """The environment of PREFLIGHT (`membench.runner.scoring_preflight.ScoringPreflight`, passed) and this
    process: what a run set records and compares on resume (no timings, no paths)."""
    from membench.runner.grid import code_digest
    from membench.sandbox.oracle_runners import default_runner

    checks = "; ".join(f"{c.repo}/{c.trap}: reference {c.reference}, base {c.base}" for c in preflight.checks)
    return ScoringEnvironment({
        "membench_version": membench_version(), "code_digest": code_digest(),
        "python": platform.python_version(), "sandbox_python": preflight.probe.python,
        "pytest": preflight.probe.pytest or "(none)", "sandbox_backend": preflight.backend,
        "sandbox_version": preflight.probe.backend_version, "oracle_runner": default_runner(),
        "scoring_preflight": ("ok" if preflight.ok else "failed") + (f" ({checks})" if checks else ""),
    })


def environment_path(runs_dir: Path, run_set: str) -> Path:
    return Path(runs_dir) / run_set / ENVIRONMENT_FILE


def read_environment(path: Path) -> ScoringEnvironment:
    """The recorded environment; RunRefused naming the file when it is not one."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT or doc.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} record of version {VERSION}")
        fields = doc["fields"]
        if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
            raise ValueError("field 'fields' must map names to strings")
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise RunRefused(f"{path}: unreadable scoring environment record ({exc}); the run set's cells cannot be "
                         "shown to match this environment: start a new run set (--run-set NEW)") from None
    return ScoringEnvironment(fields)


def differences(recorded: ScoringEnvironment, current: ScoringEnvironment) -> list[str]:
    """'<label> <recorded> -> <current>' for each field that differs (long digests shortened)."""
    def shown(value: str | None) -> str:
        if value is None:
            return "(not recorded)"
        return value[:12] + "…" if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value

    keys = [k for k in LABELS if k in recorded.fields or k in current.fields]
    keys += sorted((set(recorded.fields) | set(current.fields)) - set(LABELS))
    return [f"{LABELS.get(k, k)} {shown(recorded.fields.get(k))} -> {shown(current.fields.get(k))}"
            for k in keys if recorded.fields.get(k) != current.fields.get(k)]


def has_events(runs_dir: Path, run_set: str) -> bool:
    from membench.bus.base import run_set_log_path

    log = run_set_log_path(runs_dir, run_set)
    return log.exists() and log.stat().st_size > 0


def claim_environment(runs_dir: Path, run_set: str, current: ScoringEnvironment) -> None:
    """Record CURRENT as the run set's environment, or refuse (RunRefused, nothing written) when the
    run set already holds events scored in another one, or in one it never recorded."""
    path = environment_path(runs_dir, run_set)
    if has_events(runs_dir, run_set):
        if not path.exists():
            raise RunRefused(
                f"run set {run_set} holds events but no record of the environment it was scored in "
                f"({ENVIRONMENT_FILE}; run sets made before membench recorded it have none), so its complete cells "
                f"cannot be shown to match this environment (digest {current.digest[:12]}): start a new run set "
                "(--run-set NEW); nothing was run or written")
        recorded = read_environment(path)
        if recorded.digest == current.digest:
            return
        raise RunRefused(
            f"run set {run_set} was scored in another environment (recorded {recorded.digest[:12]}, here "
            f"{current.digest[:12]}): {'; '.join(differences(recorded, current))}. Resuming would keep its complete "
            "cells beside cells scored here; start a new run set (--run-set NEW), or resume it in the recorded "
            f"environment ({path}); nothing was run or written")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(current.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def prepare_scoring(pack, sandbox_name: str, runs_dir: Path, run_set: str, cases=None) -> ScoringEnvironment:
    """What an embedded command does first: the scoring pre-flight in SANDBOX_NAME (a failure is
    RunRefused before anything is written), then the run set's environment claimed."""
    from membench.runner.scoring_preflight import ScoringPreflightFailed, require_scoring

    try:
        preflight = require_scoring(pack, sandbox_name, cases)
    except ScoringPreflightFailed as exc:
        raise RunRefused(str(exc)) from None
    current = scoring_environment(preflight)
    claim_environment(runs_dir, run_set, current)
    return current
