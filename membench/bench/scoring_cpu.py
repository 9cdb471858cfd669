"""`membench bench scoring`: the CPU one scored session costs, on the pytest oracle runner and the
fast one, beside the pieces of the pytest-free floor, all measured in one run.

CPU is counted by a cgroup v1 `cpuacct` group that this process joins for the measurement: it
holds everything a scoring costs — the harness's own threads (diffing, writing the two checkouts,
starting and reading the sandboxes), bwrap, prlimit, setpriv and both sandboxed interpreters,
since children stay in their parent's cpuacct group (the sandboxes' memory and pids groups are
other hierarchies). The bwrap backend only: a container's processes belong to the container
runtime's groups.

Floor pieces, each a complete `Sandbox.run` of the backend (the wrapper, bwrap and what runs):
- `sandbox_start`: `python3 -I -S -c pass` — one sandbox and a bare interpreter;
- `sandbox_start_site`: `python3 -I -c pass` — the same with `site` (what the pytest runner's
  interpreters start with);
- `import_pytest`: `python3 -I -c "import pytest"`;
- `oracle_functions`: the session's oracle run in one sandbox over the scored tree with no harness
  and no second process: the code under test imported directly, each `test*` function called
  (`pytest` answered by the stand-in). This is the pytest-free floor of the brief: a sandbox start,
  an interpreter and the oracle's own test functions.
- `floor_isolated` = `oracle_functions` + `sandbox_start`: the same with the second sandbox that
  process isolation needs (the production server's), the least the defended design can cost.

Sessions: each task session of the pack scored by a pytest oracle, its reference solution applied
to its start tree (the previous sessions' references, or the base for a clean start).
"""

from __future__ import annotations

import os
import secrets
import statistics
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from membench.sandbox.base import Sandbox, SandboxSpec
from membench.sandbox.scoring import HARNESS, score_session
from membench.sandbox.workspace import snapshot, write_files, write_tree

CPUACCT = Path(os.environ.get("MEMBENCH_CGROUP_ROOT", "/sys/fs/cgroup")) / "cpuacct"


class CpuAccountUnavailable(RuntimeError):
    """No writable cgroup v1 cpuacct hierarchy here (not root, or cgroup v2 only)."""


def _own_group() -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            return CPUACCT / path.lstrip("/")
    raise CpuAccountUnavailable("this process is in no cpuacct group")


@contextmanager
def cpu_account() -> Iterator[Callable[[], float]]:
    """Joins a fresh cpuacct group for the body; yields a function that reads the group's CPU
    seconds so far (this process and every process it started since)."""
    if os.geteuid() != 0 or not (CPUACCT / "cgroup.procs").exists():
        raise CpuAccountUnavailable(f"CPU accounting needs root and a cgroup v1 cpuacct hierarchy at {CPUACCT}")
    home = _own_group()
    group = CPUACCT / "membench" / f"bench-{os.getpid()}-{secrets.token_hex(4)}"
    group.mkdir(parents=True)
    try:
        (group / "cgroup.procs").write_text(str(os.getpid()))
        yield lambda: int((group / "cpuacct.usage").read_text()) / 1e9
    finally:
        (home / "cgroup.procs").write_text(str(os.getpid()))
        try:
            group.rmdir()
        except OSError:
            pass


@dataclass(frozen=True)
class ScoringCase:
    label: str  # sequence and session
    start: dict[str, bytes]
    reference: dict[str, bytes]  # the files the reference solution writes over START
    oracle: Path


def pack_cases(pack) -> list[ScoringCase]:
    """Each task session of PACK scored by a pytest oracle, with its start tree and reference."""
    cases = []
    for seq in pack.sequences:
        base = snapshot(pack.repos[seq.repo])
        tree = dict(base)
        for session in seq.sessions:
            if getattr(session, "mode", "task") != "task":
                continue
            scored = session.index == seq.scored_session.index
            start = base if session.start_state == "clean" or (scored and seq.clean_start_s3) else tree
            files = {rel: text.encode("utf-8") for rel, text in pack.solution(seq, session).reference().items()}
            oracle = pack.oracle_path(seq, session)
            if session.scoring is None and oracle.is_file():
                cases.append(ScoringCase(f"{seq.seq_id}/s{session.index}", dict(start), files, oracle))
            tree = {**start, **files}
    return cases


def study_cases(study) -> list[ScoringCase]:
    """A transfer study's learning tasks, each scored by its pytest oracle."""
    return [ScoringCase(f"{task.task_id}", snapshot(task.repo),
                        {rel: text.encode("utf-8") for rel, text in task.solution.reference().items()}, task.oracle)
            for task in study.learning]


def score_case(sandbox: Sandbox, case: ScoringCase, runner: str, reference: bool = True, timeout_s: float = 60.0):
    """CASE scored as a session is, with its reference applied (or the null patch), on RUNNER."""
    with tempfile.TemporaryDirectory(prefix="membench-bench-scoring-") as tmp:
        workspace = Path(tmp) / "workspace"
        write_tree(case.start, workspace)
        if reference:
            write_files(case.reference, workspace)
        return score_session(sandbox, case.start, workspace, case.oracle, timeout_s, require_change=False,
                             runner=runner)


# The floor's oracle run: the code under test imported directly, each test function called.
DIRECT_ORACLE = (
    "import sys, types\n"
    "sys.path[:0] = ['/workspace', '/harness']\n"
    "from membench_harness import pytest_standin\n"
    "sys.modules['pytest'] = pytest_standin\n"
    "api = types.ModuleType('membench_oracle')\n"
    "api.plain = lambda value, kind=list: kind(value)\n"
    "api.length = len\n"
    "def load_production_file(path, name=None):\n"
    "    import importlib.util\n"
    "    spec = importlib.util.spec_from_file_location(name or 'loaded', '/workspace/' + path)\n"
    "    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module\n"
    "api.load_production_file = load_production_file\n"
    "sys.modules['membench_oracle'] = api\n"
    "module = types.ModuleType('test_oracle'); module.__file__ = '/oracle/test_oracle.py'\n"
    "exec(compile(open(module.__file__).read(), module.__file__, 'exec'), vars(module))\n"
    "failed = 0\n"
    "for name, func in list(vars(module).items()):\n"
    "    if name.startswith('test') and isinstance(func, types.FunctionType):\n"
    "        try:\n"
    "            func()\n"
    "        except Exception as exc:\n"
    "            failed += 1; print(name, type(exc).__name__, exc)\n"
    "sys.exit(1 if failed else 0)\n"
)


def run_direct(sandbox: Sandbox, case: ScoringCase, timeout_s: float = 60.0):
    with tempfile.TemporaryDirectory(prefix="membench-bench-floor-") as tmp:
        workspace = Path(tmp) / "workspace"
        write_tree({**case.start, **case.reference}, workspace)
        spec = SandboxSpec(workspace=workspace, ro_mounts={"/oracle/test_oracle.py": case.oracle,
                                                           "/harness/membench_harness": HARNESS},
                           wall_time_s=timeout_s, cpu_time_s=int(timeout_s))
        return sandbox.run(["python3", "-I", "-S", "-B", "-c", DIRECT_ORACLE], spec)


def _bare(sandbox: Sandbox, argv: list[str]):
    with tempfile.TemporaryDirectory(prefix="membench-bench-floor-") as tmp:
        return sandbox.run(argv, SandboxSpec(workspace=Path(tmp), wall_time_s=60, cpu_time_s=60))


def _score_into(results: list, sandbox: Sandbox, case: ScoringCase, runner: str) -> None:
    results.append(score_case(sandbox, case, runner))


def measure(read: Callable[[], float], work: Callable[[], object], repeats: int) -> list[float]:
    """CPU seconds of each of REPEATS calls of WORK (after one untimed call)."""
    work()
    out = []
    for _ in range(repeats):
        before = read()
        work()
        out.append(read() - before)
    return out


def scoring_bench(sandbox: Sandbox, cases: list[ScoringCase], repeats: int = 3) -> dict:
    """Per-session CPU of both runners over CASES and the floor pieces, medians over REPEATS rounds;
    the verdicts of both runners are checked to agree on every case."""
    figures: dict[str, list[float]] = {k: [] for k in ("sandbox_start", "sandbox_start_site", "import_pytest",
                                                       "oracle_functions", "pytest_runner", "fast_runner")}
    disagreements = []
    with cpu_account() as read:
        for argv, key in ((["python3", "-I", "-S", "-c", "pass"], "sandbox_start"),
                          (["python3", "-I", "-c", "pass"], "sandbox_start_site"),
                          (["python3", "-I", "-c", "import pytest"], "import_pytest")):
            figures[key] += measure(read, partial(_bare, sandbox, argv), repeats * 2)
        for case in cases:
            figures["oracle_functions"] += measure(read, lambda: run_direct(sandbox, case), repeats)
            outcomes = {}
            for runner, key in (("pytest", "pytest_runner"), ("fast", "fast_runner")):
                results: list = []
                figures[key] += measure(read, partial(_score_into, results, sandbox, case, runner), repeats)
                outcomes[runner] = {r.outcome for r in results}
            if outcomes["pytest"] != outcomes["fast"] or len(outcomes["fast"]) != 1:
                disagreements.append(f"{case.label}: pytest {sorted(outcomes['pytest'])}, "
                                     f"fast {sorted(outcomes['fast'])}")
    med = {k: statistics.median(v) for k, v in figures.items() if v}
    spread = {k: [min(v), max(v)] for k, v in figures.items() if v}
    floor_isolated = med["oracle_functions"] + med["sandbox_start"]
    return {"sessions": len(cases), "repeats": repeats, "cpu_s": med, "cpu_s_range": spread,
            "floor_one_process_s": med["oracle_functions"], "floor_isolated_s": floor_isolated,
            "fast_over_floor_isolated": med["fast_runner"] / floor_isolated,
            "fast_over_floor_one_process": med["fast_runner"] / med["oracle_functions"],
            "pytest_over_fast": med["pytest_runner"] / med["fast_runner"],
            "disagreements": disagreements}


# ---------------------------------------------------------------------------------- equivalence
BUILT_IN_PACKS = ("smoke", "hygiene-v1", "hygiene-v2")
BUILT_IN_STUDIES = ("transfer-v1",)


def built_in_cases(home: Path, packs: tuple[str, ...] = BUILT_IN_PACKS,
                   studies: tuple[str, ...] = BUILT_IN_STUDIES) -> dict[str, list[ScoringCase]]:
    """Every pytest-scored session of the built-in packs and transfer studies, by pack."""
    from membench.packs.pack_resolver import open_pack
    from membench.formats.transfer_format import load_study

    fixtures = Path(__file__).resolve().parents[2] / "fixtures"
    out = {name: pack_cases(open_pack(name, home)) for name in packs}
    out.update({name: study_cases(load_study(fixtures / name)) for name in studies})
    return out


def verdict(result) -> dict:
    """What must agree between the runners: the outcome, each case's outcome, the harness fault."""
    return {"outcome": result.outcome, "cases": sorted((c["case_id"], c["outcome"]) for c in result.cases),
            "harness_fault": bool(result.harness_fault)}


def compare_runners(sandbox: Sandbox, cases: list[ScoringCase], workers: int = 2) -> list[dict]:
    """Each case under the null patch and its reference solution, scored on both runners: one row
    per case and patch with both verdicts and whether they agree."""
    from concurrent.futures import ThreadPoolExecutor

    def one(item: tuple[ScoringCase, bool]) -> dict:
        case, reference = item
        got = {runner: verdict(score_case(sandbox, case, runner, reference)) for runner in ("pytest", "fast")}
        return {"case": case.label, "patch": "reference" if reference else "null", **got,
                "same": got["pytest"] == got["fast"]}

    items = [(case, reference) for case in cases for reference in (False, True)]
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="membench-bench-equivalence") as pool:
        return list(pool.map(one, items))


def format_lines(result: dict) -> list[str]:
    """The figures as `membench bench scoring` prints them: CPU per piece and per scored session."""
    cpu, spread = result["cpu_s"], result["cpu_s_range"]

    def row(label: str, key: str) -> str:
        low, high = spread[key]
        return f"  {label:<58} {cpu[key] * 1000:7.1f} ms  ({low * 1000:.1f}–{high * 1000:.1f})"

    return [
        f"CPU per run, median of {result['repeats']} rounds over {result['sessions']} session(s) (cgroup cpuacct):",
        "floor pieces (each a whole sandbox run):",
        row("sandbox start: python3 -I -S -c pass", "sandbox_start"),
        row("sandbox start with site: python3 -I -c pass", "sandbox_start_site"),
        row("python3 -I -c 'import pytest'", "import_pytest"),
        row("the oracle's test functions, one process, no harness (floor)", "oracle_functions"),
        f"  {'floor with the production sandbox isolation needs (+1 start)':<58} "
        f"{result['floor_isolated_s'] * 1000:7.1f} ms",
        "one scored session (score_session: production and oracle sandboxes):",
        row("pytest runner (MEMBENCH_ORACLE_RUNNER=pytest)", "pytest_runner"),
        row("fast runner (default)", "fast_runner"),
        f"fast / isolated floor {result['fast_over_floor_isolated']:.2f}x, fast / one-process floor "
        f"{result['fast_over_floor_one_process']:.2f}x, pytest / fast {result['pytest_over_fast']:.2f}x",
        ("verdicts: both runners agree on every session" if not result["disagreements"]
         else "verdicts DIFFER: " + "; ".join(result["disagreements"])),
    ]
