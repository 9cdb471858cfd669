"""Scoring a session: the production diff goes to a fresh checkout, then the hidden oracle runs
there, mounted read-only, in its own sandbox, with pytest plugin autoload off and a clean
PYTHONPATH.

Outcomes: `pass`, `fail`, `oracle_timeout`, `production_patch_apply_failed` (an edit under
`.git`), `empty_production_diff`, `isolation_unavailable`.
"""

from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from sandbox.base import IsolationUnavailable, Sandbox, SandboxSpec
from sandbox.workspace import TreeDiff, apply_production, diff_trees, snapshot, write_tree


@dataclass
class ScoreResult:
    outcome: str
    diff: TreeDiff
    scored_tree: dict[str, bytes]  # the fresh checkout the oracle saw (the next session's start)
    cases: list[dict[str, str]] = field(default_factory=list)
    exit_status: int = -1
    inconclusive: bool = False
    duration_ms: int = 0
    detail: str = ""


def _parse_junit(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "pass"
        if case.find("failure") is not None:
            outcome = "fail"
        elif case.find("error") is not None:
            outcome = "error"
        elif case.find("skipped") is not None:
            outcome = "excluded"
        cases.append({"case_id": case.get("name", "?"), "outcome": outcome})
    return cases


def score_session(
    sandbox: Sandbox,
    start_tree: dict[str, bytes],
    workspace: Path,
    oracle_file: Path,
    timeout_s: float = 120.0,
    require_change: bool = True,
) -> ScoreResult:
    after = snapshot(workspace)
    diff = diff_trees(start_tree, after)
    if diff.git:
        return ScoreResult("production_patch_apply_failed", diff, dict(start_tree),
                           detail="edits under .git: " + ", ".join(diff.git))
    scored_tree = apply_production(start_tree, diff)
    if require_change and not diff.production:
        return ScoreResult("empty_production_diff", diff, scored_tree)
    with tempfile.TemporaryDirectory(prefix="membench-score-") as tmp:
        checkout, results = Path(tmp) / "checkout", Path(tmp) / "results"
        write_tree(scored_tree, checkout)
        results.mkdir()
        spec = SandboxSpec(
            workspace=checkout,
            ro_mounts={"/oracle/test_oracle.py": Path(oracle_file)},
            rw_mounts={"/results": results},
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": "/workspace"},
            wall_time_s=timeout_s,
            cpu_time_s=int(timeout_s),
        )
        argv = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "/oracle",
                "--junitxml", "/results/junit.xml", "/oracle/test_oracle.py"]
        try:
            result = sandbox.run(argv, spec)
        except IsolationUnavailable as exc:
            return ScoreResult("isolation_unavailable", diff, scored_tree, detail=str(exc))
        cases = _parse_junit(results / "junit.xml")
    if result.timed_out:
        outcome = "oracle_timeout"
    elif result.exit_code == 0:
        outcome = "pass"
    else:
        outcome = "fail"
    # pytest: 0 passed, 1 failed, 2 collection error (a missing symbol counts as a fail); 3-5 are
    # internal, usage or no-test errors of the oracle itself.
    inconclusive = result.timed_out or result.exit_code in (3, 4, 5)
    return ScoreResult(outcome, diff, scored_tree, cases, result.exit_code, inconclusive, result.duration_ms,
                       detail=(result.stdout + result.stderr)[-2000:])
