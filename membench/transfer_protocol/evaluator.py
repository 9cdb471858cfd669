"""The public interface gate, the commit freeze and the hidden evaluator (docs/transfer.md).

- `public_check` runs the project's public check in a sandbox over a copy of the delivered
  workspace (the check mounted read-only at /public/check.py).
- `freeze_submission` copies the workspace without `.git` and interpreter caches; its tree digest
  is recorded, and evaluation sees only that copy.
- `run_evaluator` runs every case of the hidden manifest, in manifest order, isolated by process:
  the frozen copy runs in a production sandbox, the case runner (with the cases file and the
  results) in a second one that reaches the submission only through the harness's proxies. A case
  whose case prerequisite did not pass is `blocked`; a case needing a V1 checkpoint is
  `not_applicable` (this protocol keeps none). The harness re-derives `blocked` from the statuses
  itself, as a second line behind the isolation.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from membench.sandbox.base import IsolationUnavailable, Sandbox, SandboxSpec
from membench.sandbox.scoring import HARNESS, ISOLATION_PROCESS, production_server, scoring_mb
from membench.sandbox.workspace import capped_directory, is_git_path, snapshot, tree_digest, write_tree
from membench.formats.transfer_format import CHECKPOINTS, V1_CHECKPOINTS, Evaluator

RUNNER = Path(__file__).resolve().parent / "inside" / "evaluator_runner.py"
EVALUATOR_ISOLATION = ISOLATION_PROCESS  # the submission and the case runner in separate sandboxes
PYTHON = ["python3", "-I", "-B"]


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    exit_status: int
    duration_ms: int
    output: str
    workspace_digest: str


@dataclass(frozen=True)
class CaseResult:
    case_id: str
    dimension: str
    weight: float
    status: str  # passed / failed / error / blocked / not_applicable
    duration_ms: int
    evidence_sha256: str
    prerequisites: tuple[str, ...]


def submission_tree(workspace: Path) -> dict[str, bytes]:
    """The workspace as it would be frozen: no `.git`, no interpreter or test caches."""
    return {rel: data for rel, data in snapshot(workspace).items() if not is_git_path(rel)}


def public_check(sandbox: Sandbox, workspace: Path, check: Path, timeout_s: float) -> CheckResult:
    tree = submission_tree(workspace)
    with tempfile.TemporaryDirectory(prefix="membench-public-") as tmp:
        copy = Path(tmp) / "workspace"
        write_tree(tree, copy)
        spec = SandboxSpec(workspace=copy, ro_mounts={"/public/check.py": check}, wall_time_s=timeout_s,
                           cpu_time_s=max(1, int(timeout_s)))
        result = sandbox.run(PYTHON + ["/public/check.py"], spec)
    ok = result.exit_code == 0 and not result.timed_out
    return CheckResult(ok, result.exit_code, result.duration_ms, (result.stdout + result.stderr)[-4000:],
                       tree_digest(tree))


def freeze_submission(workspace: Path, dest: Path) -> tuple[str, int]:
    """Copy the submission to DEST (without .git and caches); returns (tree digest, files)."""
    tree = submission_tree(workspace)
    write_tree(tree, dest)
    for path in dest.rglob("*"):
        if path.is_file():
            path.chmod(0o444)
    return tree_digest(tree), len(tree)


def run_evaluator(sandbox: Sandbox, frozen: Path, evaluator: Evaluator, timeout_s: float) -> list[CaseResult]:
    """Every manifest case, in order, isolated by process (`EVALUATOR_ISOLATION`): the submission
    runs in a production sandbox (`membench/sandbox/harness/production_server.py` over a copy of the frozen
    tree); the case runner runs in the evaluator's sandbox, which alone holds the cases file, the
    plan and the results directory, and reaches the submission only through the harness's proxy
    modules on a Unix socket. Raises IsolationUnavailable rather than evaluate unjailed."""
    plan = []
    for case in evaluator.cases:
        plan.append({"case_id": case.case_id,
                     "prerequisites": [p for p in case.prerequisites
                                       if p.upper() not in CHECKPOINTS | V1_CHECKPOINTS]})
    tree = snapshot(frozen)
    with tempfile.TemporaryDirectory(prefix="membench-eval-") as tmp, \
            capped_directory(Path(tmp) / "evaluation", scoring_mb()) as root:  # the submission cannot fill the disk
        production, scratch, results, channel = (root / n for n in ("production", "scratch", "results", "channel"))
        write_tree(tree, production)
        for directory in (scratch, results, channel):
            directory.mkdir()
        channel.chmod(0o777)
        plan_file = Path(tmp) / "plan.json"
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        server_spec = SandboxSpec(workspace=production, ro_mounts={"/harness/membench_harness": HARNESS},
                                  rw_mounts={"/channel": channel}, wall_time_s=timeout_s + 30,
                                  cpu_time_s=max(1, int(timeout_s)))
        evaluator_spec = SandboxSpec(workspace=scratch, ro_mounts={
            "/evaluator/run.py": RUNNER, "/evaluator/cases.json": evaluator.checks_path,
            "/evaluator/plan.json": plan_file, "/harness/membench_harness": HARNESS},
            rw_mounts={"/results": results, "/channel": channel},
            wall_time_s=timeout_s, cpu_time_s=max(1, int(timeout_s)))
        with production_server(sandbox, server_spec, channel / "production.sock", timeout_s):
            sandbox.run(PYTHON + ["/evaluator/run.py", "/evaluator/cases.json", "/evaluator/plan.json",
                                  "/results/results.json", "/channel/production.sock", str(timeout_s)],
                        evaluator_spec)
        try:
            reported = json.loads((results / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # the runner was stopped before its first case ended
            reported = {}
    out: list[CaseResult] = []
    status_of: dict[str, str] = {}
    for case in evaluator.cases:
        got = reported.get(case.case_id) if isinstance(reported, dict) else None
        case_prereqs = [p for p in case.prerequisites if p.upper() not in CHECKPOINTS | V1_CHECKPOINTS]
        if any(p.upper() in V1_CHECKPOINTS for p in case.prerequisites):
            status, digest, ms = "not_applicable", "", 0
        elif any(status_of.get(p) != "passed" for p in case_prereqs):
            status, digest, ms = "blocked", "", int(got.get("duration_ms", 0)) if isinstance(got, dict) else 0
        elif not isinstance(got, dict) or got.get("status") not in ("passed", "failed", "error"):
            # never reached: the sandbox timed out or crashed before this case reported
            status, digest, ms = "unreached", "", 0
        else:
            status, digest, ms = got["status"], str(got.get("evidence_sha256", "")), int(got.get("duration_ms", 0))
        status_of[case.case_id] = status
        out.append(CaseResult(case.case_id, case.dimension, case.weight, status, ms, digest, tuple(case.prerequisites)))
    return out


__all__ = ["CaseResult", "CheckResult", "EVALUATOR_ISOLATION", "IsolationUnavailable", "freeze_submission",
           "public_check", "run_evaluator", "submission_tree"]
