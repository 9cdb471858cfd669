"""Scoring a session (docs/design.md §6): only the production diff reaches the oracle.

1. The agent's workspace is diffed against the session's start tree. Edits under `.git` reject
   the patch (`production_patch_apply_failed`); edits to tests, `conftest.py`, `pytest.ini`,
   `sitecustomize.py`, `*.pth` (and the other paths `membench.sandbox.workspace.is_test_path` names) are
   stripped and recorded in `TreeDiff.tests`.
2. The production part is applied to a fresh checkout of the start tree (never the agent's
   directory). No production change: `empty_production_diff`.
3. Only now do the hidden oracle and the code under test run, in two sandboxes (isolation
   `process`): the production sandbox runs `harness/production_server.py` over one copy of the
   scored tree; the oracle's sandbox runs pytest over the oracle (mounted read-only at /oracle)
   with `harness/oracle_client.py`, which answers imports of the tree's modules with proxies to
   the production process (`harness/wire.py`: plain data or references over a Unix socket).
   The code under test cannot read the oracle's file, reach its process, or write its results.
   By default the oracle's tests run without pytest (`harness/oracle_runner.py`, the `fast`
   runner of `membench/sandbox/oracle_runners.py`, with the same proxies, record and exit statuses);
   `MEMBENCH_ORACLE_RUNNER=pytest` (or `runner="pytest"`) runs them with pytest as before, and
   an oracle that uses what the fast runner does not offer is always run with pytest.
4. `pass` needs pytest's exit status 0 *and* the oracle process's outcome record (a plugin of
   the harness writes it; no JUnit, no production module) in which every test function the
   oracle defines (read from its source on the harness side) ran and passed — production code
   that ends the process early or skips the oracle's tests scores `fail`. Wall-time exhaustion is
   `oracle_timeout`. Only the test cases the oracle defines are recorded (name, outcome, duration).
4a. A run in which the oracle's harness itself produced no outcome — no outcome record (pytest
   or the harness could not be imported, the interpreter is missing), or pytest's own internal,
   usage or no-test-collected status (3, 4, 5) — still scores `fail`, and `ScoreResult.harness_fault`
   names the cause. The oracle's process runs no production code, but what it calls is production
   code, so this is a suspicion, not a finding: the runner (`membench/runner/grid.py`) scores the pack's untouched
   base checkout the same way, and only when the harness produces no outcome there either is the
   session `harness_fault` and the unit excluded; otherwise the `fail` stands (the agent's tree
   caused it). A collection error (a symbol the code under test lacks, an import that raises
   there) is pytest's status 2 with an outcome record: an ordinary `fail`, never a suspicion.
5. Imported packs scored by rules (`score_with_rules`) run their score commands in the checkout:
   tests and code share a process there, and the verdict says so (isolation `in_process`).

Outcomes: `pass`, `fail`, `oracle_timeout`, `production_patch_apply_failed`,
`empty_production_diff`, `workspace_too_large` (over MEMBENCH_WORKSPACE_MB; nothing was read),
`patch_too_large` (more new content than MEMBENCH_PATCH_MB; not read), `unencodable_workspace_path`
(a path that is not UTF-8), `isolation_unavailable`; the runner adds `harness_fault` (4a).
"""

from __future__ import annotations

import ast
import difflib
import json
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

from membench.sandbox.base import IsolationUnavailable, Sandbox, SandboxResult, SandboxSpec
from membench.sandbox.harness.oracle_runner import compiled_oracle
from membench.sandbox.harness.wire import reserved_module_names
from membench.sandbox.oracle_runners import FAST, PYTEST, RUNNERS, default_runner, fast_runner_refusal
from membench.sandbox.workspace import (
    PatchTooLarge,
    TreeDiff,
    UnencodableWorkspacePath,
    WorkspaceTooLarge,
    apply_production,
    capped_directory,
    diff_workspace,
    workspace_limit_bytes,
    write_tree,
)
from membench.formats.pack_format import ScoringRules
from membench.schemas.payloads import OracleCase


@dataclass
class ScoreResult:
    outcome: str
    diff: TreeDiff
    scored_tree: dict[str, bytes]  # the fresh checkout the oracle saw (the next session's start)
    cases: list[OracleCase] = field(default_factory=list)
    exit_status: int = -1
    inconclusive: bool = False
    duration_ms: int = 0
    detail: str = ""
    isolation: str = "in_process"  # ISOLATION_PROCESS or ISOLATION_IN_PROCESS
    # why the oracle's harness produced no outcome (module doc, 4a); "" when it did. The outcome
    # stays `fail` until the runner proves the fault on the base checkout.
    harness_fault: str = ""
    runner: str = ""  # the oracle runner that scored it (`membench.sandbox.oracle_runners`), "" when none ran


class HarnessFault(RuntimeError):
    """The oracle's harness produced no outcome on the agent's tree and on the pack's untouched
    base checkout alike: the unit is excluded (`harness_fault`), its cause in the message."""

    reason = "harness_fault"


def _read_outcomes(path: Path) -> list[OracleCase] | None:
    """The oracle process's own record of each test (`harness/oracle_client._Outcomes`); None when
    it is missing or malformed (the process died before pytest finished: the session fails)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        cases: list[OracleCase] = [
            {"case_id": str(c["case_id"]), "outcome": str(c["outcome"]), "duration_ms": int(c["duration_ms"])}
            for c in data["cases"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [c for c in cases if c["outcome"] in ("pass", "fail", "error", "excluded")]


# pytest's exit statuses that say the oracle's run itself went wrong, not a test
PYTEST_HARNESS_STATUSES = {3: "pytest's internal error", 4: "pytest's usage error", 5: "no test was collected"}


def harness_fault_cause(record: list[OracleCase] | None, result: SandboxResult) -> str:
    """Why the oracle's harness produced no outcome (module doc, 4a), or "" when it did. Read from
    the oracle's own process only: its outcome record and its exit status and stderr."""
    if result.timed_out:
        return ""  # out of time is `oracle_timeout`
    last = next((line.strip() for line in reversed(result.stderr.splitlines()) if line.strip()), "")
    if record is None:
        return (f"the oracle's harness left no outcome record (exit status {result.exit_code})"
                + (f": {last[-300:]}" if last else ""))
    if result.exit_code in PYTEST_HARNESS_STATUSES and not record:
        return f"{PYTEST_HARNESS_STATUSES[result.exit_code]} (pytest exit status {result.exit_code})"
    return ""


HARNESS = Path(__file__).resolve().parent / "harness"
ISOLATION_PROCESS = "process"  # the oracle and the code under test in separate sandboxed processes
ISOLATION_IN_PROCESS = "in_process"  # score commands run the tests and the code in one process


def expected_tests(oracle_file: Path) -> set[str]:
    """The test functions an oracle defines (module-level `test_*`, methods of `Test*` classes)."""
    try:
        tree = ast.parse(Path(oracle_file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names.update(f.name for f in node.body
                         if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test"))
    return names


# a workspace the harness refuses to read, by the outcome its session gets (each a failure)
REFUSED_WORKSPACE = {WorkspaceTooLarge: "workspace_too_large", PatchTooLarge: "patch_too_large",
                     UnencodableWorkspacePath: "unencodable_workspace_path"}


def production_change(start_tree: dict[str, bytes], workspace: Path
                      ) -> tuple[TreeDiff, dict[str, bytes], ScoreResult | None]:
    """The workspace's change against its start tree and the fresh checkout with only its production
    part applied; or the `production_patch_apply_failed` result when it edits `.git`."""
    try:
        diff = diff_workspace(start_tree, workspace)
    except (WorkspaceTooLarge, PatchTooLarge, UnencodableWorkspacePath) as exc:
        # what the agent left cannot be scored: a failed session (never read whole, never excluded)
        outcome = REFUSED_WORKSPACE[type(exc)]
        return TreeDiff(), dict(start_tree), ScoreResult(outcome, TreeDiff(), dict(start_tree), detail=str(exc))
    if diff.git:
        return diff, dict(start_tree), ScoreResult("production_patch_apply_failed", diff, dict(start_tree),
                                                   detail="edits under .git: " + ", ".join(diff.git))
    return diff, apply_production(start_tree, diff), None


def production_modules(tree: dict[str, bytes]) -> list[str]:
    """Top-level module and package names of the scored tree that the oracle imports as proxies of
    production code. Names of the standard library, pytest and its dependencies and the harness
    (`harness.wire.reserved_module_names`) are left out: a patch's `xml/`, `json.py` or `pytest.py`
    is never what the oracle imports (the oracle's process refuses them again on its side). Such a
    file still reaches the production process, where only the code under test imports it."""
    names = set()
    for rel in tree:
        head, sep, _ = rel.partition("/")
        if sep and head.isidentifier() and not head.startswith("."):
            names.add(head)
        elif not sep and rel.endswith(".py") and rel[:-3].isidentifier():
            names.add(rel[:-3])
    return sorted(names - reserved_module_names())


def scoring_mb() -> int:
    """Room for scoring: two copies of a workspace at its cap, and the oracle's report."""
    return 2 * (workspace_limit_bytes() >> 20) + 64


def bootstrap(module: str) -> list[str]:
    """argv that runs `membench_harness.<module>.main(argv)` from the read-only /harness mount."""
    return ["python3", "-I", "-B", "-c",
            "import sys; sys.path.insert(0, '/harness'); "
            f"from membench_harness.{module} import main; sys.exit(main(sys.argv[1:]))"]


# The fast runner's interpreters skip `site` (`-S`): its .pth files (an editable install's finder
# imports pathlib, re, urllib…) cost more than the oracle's tests. The installation's
# site-packages directories still go on sys.path, after the standard library as `site` puts them
# (a virtual environment's, found by its pyvenv.cfg as `site` finds it), so the code under test
# and the oracle import installed packages as before, and the oracle's finder still sees which
# names are installed; only the .pth files are not run.
SITE_PACKAGES = ("import os, site, sys; sys.path.insert(0, '/harness'); "
                 "v = os.path.dirname(os.path.dirname(sys.executable)); "
                 "v = [v] if os.path.isfile(os.path.join(v, 'pyvenv.cfg')) else None; "
                 "sys.path += [p for p in site.getsitepackages(v) if os.path.isdir(p) and p not in sys.path]; ")


_HARNESS_COMPILED: list[bool] = []


def compile_harness() -> None:
    """Byte-code for the harness's modules, written beside them once per process where missing or
    stale: the sandboxes mount the harness read-only and run with `-B`, so a module without it is
    compiled from source at every start (the fast runner's own module: about 8 ms of CPU each time).
    Nothing happens where the directory is not writable."""
    if not _HARNESS_COMPILED:
        import compileall

        compileall.compile_dir(HARNESS, maxlevels=0, quiet=2)
        _HARNESS_COMPILED.append(True)


def bootstrap_fast(module: str) -> list[str]:
    """`bootstrap(module)` for the fast runner: without `site`, its site-packages added by hand."""
    return ["python3", "-I", "-S", "-B", "-c",
            SITE_PACKAGES + f"from membench_harness.{module} import main; sys.exit(main(sys.argv[1:]))"]


def _wait_for(path: Path, done: threading.Event, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not done.is_set():
        if path.exists():
            return True
        time.sleep(0.02)
    return path.exists()


@dataclass
class ServedProduction:
    result: SandboxResult | None = None  # the production sandbox's own result, once it stopped


@contextmanager
def production_server(sandbox: Sandbox, spec: SandboxSpec, sock: Path, timeout_s: float, fast: bool = False
                      ) -> Iterator[ServedProduction]:
    """`harness/production_server.py` in a sandbox of SPEC (the code under test at /workspace, the
    harness at /harness/membench_harness, SOCK's directory at /channel), serving on SOCK while the
    body runs; stopped afterwards, whatever the body did. Raises IsolationUnavailable when the
    sandbox cannot start or does not start serving (no production code has run then)."""
    stop, done = threading.Event(), threading.Event()
    served = ServedProduction()
    unavailable: list[IsolationUnavailable] = []

    def serve() -> None:
        try:
            boot = bootstrap_fast if fast else bootstrap
            served.result = sandbox.run(boot("production_server") + ["/channel/" + sock.name], spec, stop=stop)
        except IsolationUnavailable as exc:
            unavailable.append(exc)
        finally:
            done.set()

    server = threading.Thread(target=serve, name="membench-production-server", daemon=True)
    server.start()
    try:
        ready = _wait_for(sock, done, min(60.0, timeout_s))
        if unavailable:
            raise unavailable[0]
        if not ready:
            stop.set()
            server.join(timeout=60)
            why = served.result.stderr[-500:] if served.result is not None else "no answer"
            raise IsolationUnavailable(f"the production sandbox did not start serving: {why}")
        yield served
    finally:
        stop.set()
        server.join(timeout=60)


def score_session(
    sandbox: Sandbox,
    start_tree: dict[str, bytes],
    workspace: Path,
    oracle_file: Path,
    timeout_s: float = 120.0,
    require_change: bool = True,
    runner: str | None = None,
) -> ScoreResult:
    """Score by a hidden pytest oracle, isolated by process: the code under test runs in a
    production sandbox (`harness/production_server.py`) over its own copy of the scored tree; the
    oracle's tests run in a second sandbox (`harness/oracle_runner.py`, or `harness/oracle_client.py`
    with pytest: RUNNER, default `MEMBENCH_ORACLE_RUNNER`) over another copy, and reach production
    code only through proxies on a Unix socket (`harness/wire.py`). The production sandbox has
    neither the oracle's file nor the results directory; the harness reads the oracle process's
    outcome record, which only that process can write. An oracle the fast runner cannot run as
    pytest would (`fast_runner_refusal`) is run with pytest, and the detail says why."""
    runner = runner or default_runner()
    if runner not in RUNNERS:
        raise ValueError(f"unknown oracle runner {runner!r} (one of {', '.join(RUNNERS)})")
    note = ""
    if runner == FAST:
        refusal = fast_runner_refusal(Path(oracle_file))
        if refusal:
            runner, note = PYTEST, f"[membench: scored with pytest; the fast oracle runner does not offer: {refusal}]\n"
    fast = runner == FAST
    compile_harness()
    diff, scored_tree, rejected = production_change(start_tree, workspace)
    if rejected is not None:
        return replace(rejected, isolation=ISOLATION_PROCESS)
    if require_change and not diff.production:
        return ScoreResult("empty_production_diff", diff, scored_tree, isolation=ISOLATION_PROCESS)
    with tempfile.TemporaryDirectory(prefix="membench-score-") as tmp, \
            capped_directory(Path(tmp) / "scoring", scoring_mb()) as root:  # production code cannot fill the disk
        production, checkout, results, channel = (root / n for n in ("production", "checkout", "results", "channel"))
        write_tree(scored_tree, production)
        write_tree(scored_tree, checkout)
        results.mkdir()
        channel.mkdir()
        channel.chmod(0o777)
        server_spec = SandboxSpec(workspace=production, ro_mounts={"/harness/membench_harness": HARNESS},
                                  rw_mounts={"/channel": channel}, wall_time_s=timeout_s + 30,
                                  cpu_time_s=max(1, int(timeout_s)))
        oracle_mounts = {"/oracle/test_oracle.py": Path(oracle_file), "/harness/membench_harness": HARNESS}
        if fast:  # compiled here, mounted beside the oracle only (`oracle_runner.compiled_oracle`)
            compiled = root / "oracle.code"
            try:
                compiled.write_bytes(compiled_oracle(Path(oracle_file).read_text(encoding="utf-8"),
                                                     "/oracle/test_oracle.py"))
                oracle_mounts["/oracle/test_oracle.code"] = compiled
            except (OSError, SyntaxError, ValueError):
                pass  # the runner reads the source and reports the collection error itself
        oracle_spec = SandboxSpec(
            workspace=checkout,
            ro_mounts=oracle_mounts,
            rw_mounts={"/results": results, "/channel": channel},
            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            wall_time_s=timeout_s,
            cpu_time_s=max(1, int(timeout_s)),
        )
        argv = (bootstrap_fast("oracle_runner") if fast else bootstrap("oracle_client")) + [
                                             "/oracle/test_oracle.py", "/results/outcomes.json",
                                             "/channel/production.sock", str(timeout_s),
                                             *production_modules(scored_tree)]
        try:
            with production_server(sandbox, server_spec, channel / "production.sock", timeout_s, fast) as served:
                result = sandbox.run(argv, oracle_spec)
        except IsolationUnavailable as exc:  # no production code ran yet: the harness's failure, never the agent's
            return ScoreResult("isolation_unavailable", diff, scored_tree, detail=str(exc), isolation=ISOLATION_PROCESS,
                               runner=runner)
        record = _read_outcomes(results / "outcomes.json")
    cases = record or []
    expected = expected_tests(Path(oracle_file))
    cases = [c for c in cases if c["case_id"].split("[", 1)[0] in expected]  # only the oracle's own tests
    ran = {c["case_id"].split("[", 1)[0] for c in cases}
    complete = bool(cases) and all(c["outcome"] == "pass" for c in cases) and expected <= ran
    if result.timed_out:
        outcome = "oracle_timeout"
    elif result.exit_code == 0 and complete:
        outcome = "pass"
    else:
        outcome = "fail"
    # pytest: 0 passed, 1 failed, 2 interrupted or collection error (a missing symbol counts as a
    # fail); 3-5 are internal, usage or no-test errors of the oracle itself.
    inconclusive = result.timed_out or result.exit_code in (3, 4, 5)
    server_log = served.result.stderr[-1000:] if served.result is not None else ""
    return ScoreResult(outcome, diff, scored_tree, cases, result.exit_code, inconclusive, result.duration_ms,
                       detail=note + (result.stdout + result.stderr)[-2000:] + (f"\n[production] {server_log}"
                                                                                if server_log else ""),
                       isolation=ISOLATION_PROCESS, harness_fault=harness_fault_cause(record, result), runner=runner)


def path_matches(rel: str, prefixes: tuple[str, ...]) -> bool:
    """A path matches a rule entry when it equals it or lies under it (the A/B benchmark's rule)."""
    return any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in prefixes)


def unauthorized_paths(changed: list[str], allowed: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    """Changed paths inside `forbidden`, or outside `allowed` when `allowed` is given."""
    return [rel for rel in changed
            if path_matches(rel, forbidden) or (bool(allowed) and not path_matches(rel, allowed))]


def added_lines(before: dict[str, bytes], diff: TreeDiff) -> str:
    """The text of every added line of the patch (all changed files except `.git`)."""
    out = []
    for rel in diff.files:
        if rel in diff.git:
            continue
        old = (before.get(rel) or b"").decode("utf-8", "replace").splitlines()
        new = (diff.changed[rel] or b"").decode("utf-8", "replace").splitlines()
        out += [line[1:] for line in difflib.unified_diff(old, new, lineterm="", n=0)
                if line.startswith("+") and not line.startswith("+++")]
    return "\n".join(out)


def score_with_rules(
    sandbox: Sandbox,
    start_tree: dict[str, bytes],
    workspace: Path,
    rules: ScoringRules,
    hidden_dir: Path,
    timeout_s: float = 120.0,
) -> ScoreResult:
    """Score a session by `ScoringRules` (the coding-agent A/B benchmark's oracle): the production
    diff goes to a fresh checkout, the hidden files are written into it only now, and each score
    command runs there in its own sandbox. Every rule becomes a case, so the verdict says which
    rule failed: `path:<p>` (a changed path outside `allowed_paths` or inside `forbidden_paths`),
    `pattern:required:<s>` / `pattern:forbidden:<s>` (on added diff lines), `compile:<p>` (a changed
    production Python file that does not compile; checked with `compile()`, nothing executes) and
    `command:<i>`. An empty diff is scored like any other (the commands decide), as that benchmark
    does. Outcome: `pass` when every case passes, `oracle_timeout` when a command timed out, else
    `fail`; a command that cannot start (exit 126/127) makes the verdict inconclusive.
    """
    diff, scored_tree, rejected = production_change(start_tree, workspace)
    if rejected is not None:
        return rejected
    cases: list[OracleCase] = []
    changed = [rel for rel in diff.files if rel not in diff.git]
    cases += [{"case_id": f"path:{rel}", "outcome": "fail"}
              for rel in unauthorized_paths(changed, rules.allowed_paths, rules.forbidden_paths)]
    added = added_lines(start_tree, diff)
    cases += [{"case_id": f"pattern:required:{p}", "outcome": "pass" if p in added else "fail"}
              for p in rules.required_patch_patterns]
    cases += [{"case_id": f"pattern:forbidden:{p}", "outcome": "fail" if p in added else "pass"}
              for p in rules.forbidden_patch_patterns]
    for rel in diff.production:
        content = diff.changed[rel]
        if rel.endswith(".py") and content is not None:
            try:
                compile(content, rel, "exec", dont_inherit=True)
            except (SyntaxError, ValueError):
                cases.append({"case_id": f"compile:{rel}", "outcome": "error"})
    timed_out, exit_status, duration, details = False, 0, 0, []
    with tempfile.TemporaryDirectory(prefix="membench-score-") as tmp, \
            capped_directory(Path(tmp) / "scoring", scoring_mb()) as root:
        checkout = root / "checkout"
        tree = dict(scored_tree)
        for rel in rules.hidden_files:
            tree[rel] = (Path(hidden_dir) / rel).read_bytes()
        for i, argv in enumerate(rules.commands):
            write_tree(tree, checkout)  # every command starts from the same scored tree
            spec = SandboxSpec(workspace=checkout, wall_time_s=timeout_s, cpu_time_s=int(timeout_s),
                               env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": "/workspace"})
            try:
                result = sandbox.run(list(argv), spec)
            except IsolationUnavailable as exc:
                return ScoreResult("isolation_unavailable", diff, scored_tree, detail=str(exc))
            duration += result.duration_ms
            timed_out = timed_out or result.timed_out
            if result.exit_code != 0 and exit_status == 0:
                exit_status = result.exit_code
            cases.append({"case_id": f"command:{i}", "outcome": "pass" if result.exit_code == 0 and not result.timed_out
                          else "fail"})
            details.append(f"$ {' '.join(argv)} -> {result.exit_code}\n{result.stdout}{result.stderr}")
    if timed_out:
        outcome = "oracle_timeout"
    elif all(c["outcome"] == "pass" for c in cases):
        outcome = "pass"
    else:
        outcome = "fail"
    inconclusive = timed_out or exit_status in (126, 127)
    return ScoreResult(outcome, diff, scored_tree, cases, exit_status, inconclusive, duration,
                       detail="\n".join(details)[-2000:], isolation=ISOLATION_IN_PROCESS)
