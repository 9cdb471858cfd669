"""The scoring pre-flight (docs/sandbox.md, "Scoring pre-flight"): before any unit of `membench run`,
`score`, `transfer` or `validate`, the sandbox backend the command will use must score correctly.

Per repository of the pack, one trap whose first session is scored by a pytest oracle: the
reference solution applied to the untouched base must `pass` that oracle, and the untouched base
itself must not. Both run exactly as a session is scored (`membench.sandbox.scoring.score_session`, the
same two sandboxes, the same interpreter, the same oracle runner: `MEMBENCH_ORACLE_RUNNER`), so an
environment where scoring cannot work — pytest missing from the interpreter the sandboxes run
(for the pytest runner), the fast runner's harness incomplete, a backend that cannot start, a
harness that never records an outcome — is found before a unit could be scored as the agent's
failure. A repository
with no such trap (an imported pack scored by commands) is covered by the oracle harness's
self-test instead: a two-line module and its oracle, the same two outcomes expected.

Nothing is cached: the pre-flight runs again before every command, so a broken environment can
never hide behind an earlier success. When a check fails, the backend's own probe (`Sandbox.check`,
which imports what the chosen oracle runner needs: `membench.sandbox.oracle_runners.probe_script`) names the
cause where it can (a module the sandboxed interpreter cannot import). `membench doctor`
runs the same function on the built-in `smoke` pack and shows its result.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.sandbox.base import BackendProbe, IsolationUnavailable, Sandbox
from membench.sandbox.oracle_runners import default_runner
from membench.sandbox.registry import get_sandbox
from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import snapshot, write_files
from membench.formats.pack_format import Pack, PackError

SETUP_FIX = "install membench with deploy/setup-env.sh"
PROBE_TIMEOUT_S = 60.0
SELF_TEST = "oracle harness self-test"
_SELF_TEST_MODULE = "membench_preflight_probe.py"
_SELF_TEST_BASE = b"def answer():\n    return 41\n"
_SELF_TEST_REFERENCE = b"def answer():\n    return 42\n"
_SELF_TEST_ORACLE = (b"from membench_preflight_probe import answer\n\n\n"
                     b"def test_answer():\n    assert answer() == 42\n")


@dataclass(frozen=True)
class ProbeCase:
    """One oracle the pre-flight scores twice: the reference tree must pass, the base must not."""

    repo: str  # the repository it stands for (SELF_TEST for the harness's own)
    trap: str
    oracle: Path
    base: dict[str, bytes]
    reference: dict[str, bytes]  # the files the reference solution writes over the base


@dataclass(frozen=True)
class RepoCheck:
    repo: str
    trap: str
    reference: str  # the reference solution's outcome (`pass` expected)
    base: str  # the untouched base's outcome (`fail` expected)
    ok: bool
    detail: str = ""  # what the oracle harness printed, when the check failed

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo, "trap": self.trap, "reference": self.reference, "base": self.base, "ok": self.ok,
                "detail": self.detail}


@dataclass(frozen=True)
class ScoringPreflight:
    """The pre-flight's result: `reason` is one line, the cause and its fix when `ok` is False; `probe`
    is the backend's own probe (`Sandbox.probe`: its versions, the sandboxed interpreter's)."""

    backend: str
    ok: bool
    reason: str
    probe: BackendProbe
    checks: tuple[RepoCheck, ...] = field(default_factory=tuple)
    duration_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "ok": self.ok, "reason": self.reason,
                "probe": {"ok": self.probe.ok, "reason": self.probe.reason,
                          "backend_version": self.probe.backend_version, "python": self.probe.python,
                          "pytest": self.probe.pytest},
                "checks": [c.to_json() for c in self.checks], "duration_ms": self.duration_ms}


class ScoringPreflightFailed(Exception):
    """The pre-flight failed: the command stops before anything is written (a usage error, exit 2)."""

    def __init__(self, result: ScoringPreflight):
        super().__init__(f"scoring pre-flight failed: {result.reason} (no unit was run, no run set written)")
        self.result = result


def _self_test() -> ProbeCase:
    return ProbeCase(SELF_TEST, SELF_TEST, Path(), {_SELF_TEST_MODULE: _SELF_TEST_BASE},
                     {_SELF_TEST_MODULE: _SELF_TEST_REFERENCE})


def probe_cases(pack: Pack | None) -> list[ProbeCase]:
    """One case per repository of PACK (its first trap whose first session is scored by a pytest
    oracle with a reference solution that writes files), and the harness self-test when a
    repository has none or there is no pack."""
    cases: list[ProbeCase] = []
    uncovered = pack is None
    for repo, path in (pack.repos.items() if pack is not None else ()):
        assert pack is not None
        case = None
        for seq in (s for s in pack.sequences if s.repo == repo):
            first = seq.sessions[0]
            oracle = pack.oracle_path(seq, first)
            if getattr(first, "mode", "task") != "task" or first.scoring is not None or not oracle.is_file():
                continue
            try:
                files = pack.solution(seq, first).reference()
            except (PackError, KeyError):
                continue
            if files:
                case = ProbeCase(repo, seq.seq_id, oracle, snapshot(path),
                                 {rel: text.encode("utf-8") for rel, text in files.items()})
                break
        if case is None:
            uncovered = True
        else:
            cases.append(case)
    if uncovered:
        cases.append(_self_test())
    return cases


def study_probe_cases(study) -> list[ProbeCase]:
    """A transfer study's cases: each learning task is a repository of its own, scored by its pytest
    oracle (`membench.formats.transfer_format.LearningTask`); the projects' evaluator runs the same sandboxes."""
    cases = []
    for task in study.learning:
        try:
            files = task.solution.reference()
        except KeyError:
            continue
        if files:
            cases.append(ProbeCase(task.repo.name, task.task_id, task.oracle, snapshot(task.repo),
                                   {rel: text.encode("utf-8") for rel, text in files.items()}))
    return cases or [_self_test()]


def _score(sandbox: Sandbox, case: ProbeCase, tree: dict[str, bytes], oracle: Path) -> tuple[str, str]:
    """(outcome, harness output) of scoring TREE against CASE's oracle, as a session is scored."""
    with tempfile.TemporaryDirectory(prefix="membench-preflight-") as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        write_files(tree, workspace)
        result = score_session(sandbox, case.base, workspace, oracle, PROBE_TIMEOUT_S, require_change=False)
    return result.outcome, result.detail.strip()


def _check(sandbox: Sandbox, case: ProbeCase) -> RepoCheck:
    with tempfile.TemporaryDirectory(prefix="membench-preflight-oracle-") as tmp:
        oracle = case.oracle
        if case.repo == SELF_TEST:
            oracle = Path(tmp) / "test_oracle.py"
            oracle.write_bytes(_SELF_TEST_ORACLE)
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="membench-preflight-score") as pool:
            scored_reference = pool.submit(_score, sandbox, case, {**case.base, **case.reference}, oracle)
            base, base_detail = _score(sandbox, case, case.base, oracle)
            reference, reference_detail = scored_reference.result()
    ok = reference == "pass" and base == "fail"
    detail = "" if ok else (reference_detail if reference != "pass" else base_detail)[-600:]
    return RepoCheck(case.repo, case.trap, reference, base, ok, detail)


_MISSING_MODULE = re.compile(r"No module named '([^']+)'")


def _probe(sandbox: Sandbox) -> BackendProbe:
    try:
        return sandbox.probe()
    except IsolationUnavailable as exc:
        return BackendProbe(False, str(exc))
    except Exception as exc:  # a broken backend is a cause to report, not a traceback
        return BackendProbe(False, f"{type(exc).__name__}: {exc}")


def _cause(backend: str, probe: BackendProbe, failed: RepoCheck | None) -> str:
    """The one-line cause: the backend's own probe first (it names a module the sandboxed interpreter
    cannot import, or why the sandbox cannot start), else the failed check."""
    missing = _MISSING_MODULE.search(probe.reason if not probe.ok else (failed.detail if failed else ""))
    if missing:
        return (f"the scoring sandbox ({backend}) cannot import {missing.group(1)} with "
                f"{'the image' if backend == 'docker' else sys.executable}: {SETUP_FIX}")
    if not probe.ok:
        return f"the {backend} sandbox does not work here: {probe.reason} (see `membench doctor`)"
    assert failed is not None
    where = "the oracle harness's self-test" if failed.repo == SELF_TEST else \
        f"repository {failed.repo} (trap {failed.trap}, its first session's oracle)"
    last = failed.detail.splitlines()[-1] if failed.detail else "no output"
    return (f"scoring does not work in the {backend} sandbox: on {where} the reference solution scored "
            f"{failed.reference} (expected pass) and the untouched base {failed.base} (expected fail); "
            f"the harness said: {last}")


def scoring_preflight(pack: Pack | None, backend: str | Sandbox, cases: list[ProbeCase] | None = None
                      ) -> ScoringPreflight:
    """The backend's probe, and one case per repository of PACK (None: the self-test alone; or the
    CASES given) scored in BACKEND as the command's units will be; all run concurrently (a case is
    four short-lived sandboxes)."""
    started = time.monotonic()
    sandbox = get_sandbox(backend) if isinstance(backend, str) else backend
    name = backend if isinstance(backend, str) else sandbox.name
    try:
        default_runner()  # a misspelt MEMBENCH_ORACLE_RUNNER stops the command here, not every session
    except ValueError as exc:
        return ScoringPreflight(name, False, str(exc), BackendProbe(False, str(exc)))
    cases = probe_cases(pack) if cases is None else cases
    with ThreadPoolExecutor(max_workers=min(4, len(cases) + 1), thread_name_prefix="membench-preflight") as pool:
        probed = pool.submit(_probe, sandbox)
        checks = tuple(pool.map(lambda case: _check(sandbox, case), cases))
        probe = probed.result()
    failed = next((c for c in checks if not c.ok), None)
    if failed is None and probe.ok:
        covered = ", ".join(c.repo if c.repo == SELF_TEST else f"{c.repo} ({c.trap})" for c in checks)
        reason = f"ok: reference solutions pass and untouched bases fail in {name}: {covered}"
    elif probe.ok and failed is not None and failed.repo != SELF_TEST and _check(sandbox, _self_test()).ok:
        # the harness scores its own case: the pack's trap is what fails (a wrong reference or oracle)
        reason = (f"trap {failed.trap} of repository {failed.repo} does not score as authored in {name}: its "
                  f"reference solution scored {failed.reference} (expected pass) and its untouched base "
                  f"{failed.base} (expected fail) on its first session's oracle, while the oracle harness's "
                  "self-test passes; check the pack with `membench validate`")
    else:
        reason = _cause(name, probe, failed)
    return ScoringPreflight(name, failed is None and probe.ok, reason, probe, checks,
                            int((time.monotonic() - started) * 1000))


def require_scoring(pack: Pack | None, backend: str | Sandbox, cases: list[ProbeCase] | None = None
                    ) -> ScoringPreflight:
    """`scoring_preflight`, raising ScoringPreflightFailed when it fails."""
    result = scoring_preflight(pack, backend, cases)
    if not result.ok:
        raise ScoringPreflightFailed(result)
    return result
