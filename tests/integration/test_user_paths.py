"""The first paths a user takes: every built-in pack × every scripted agent ×
{the baseline alone, the baseline and two memory conditions} on one seed, and the built-in
transfer study under `scripted:null`. Each must exit 0, write report.json, report.md and
report.html, and `membench report` must rebuild the three byte for byte.
(`scripted:memory-literal` with memory conditions on hygiene traps is test_hygiene_pack's
memory-conditions run, which checks the same; see `COVERED_BY_THE_HYGIENE_RUN`.)

Formerly the plainest of them, `membench run hygiene-v1 --agent scripted:null --conditions
B0 --seeds 1`, ran all 34 units and then exited 1 with KeyError 'C9' while rendering report.md
(and `membench report` failed the same way); nothing in the suite ran it.

Cost: one session-scoped fixture runs the whole matrix once, in this process, through the CLI's
click entry (`click.testing.CliRunner`): no interpreter start or import per command, one
MEMBENCH_HOME (one embedded log directory and chDB warehouse) for every run set. Real services
throughout: bubblewrap scoring, chDB, the Avro log. The wall time of each command is kept in the
fixture's result and printed (`-s`), so a slow path shows up where it is measured.

hygiene-v1 has 34 traps of three sessions each, so its full matrix is 408 units (3 agents × (34 +
102)), about 10 minutes of the 2-core machine. `membench run` has no sequence filter, so the
cheapest faithful option is: the built-in pack by name, all 34 traps, under `scripted:null` for both
grids (the crashing command exactly, and the agent that fails every trap, every construct and the
reversed ones included; it changes no file, so nothing is scored and its 136 units are cheap), and
`scripted:refsol` / `scripted:memory-literal` on a copy of hygiene-v1 holding the first trap of four
constructs: C1 and C3, and the reversed C9 and C10, whose gates are reported apart (a pack
directory, which `membench run` accepts like a built-in name). An agent that passes scores every
session, about 2 s of CPU a unit here; every construct's rows and gates with passing cells are
test_hygiene_pack's memory-conditions run (the subset had all ten constructs, 50 units).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from membench.cli import main

pytestmark = pytest.mark.integration

AGENTS = ("scripted:null", "scripted:refsol", "scripted:memory-literal")
# the baseline alone, and the baseline with two memory conditions (verbatim B5, episodic B1)
GRIDS = {"baseline": "B0", "memory": "B0,B1,B5"}
PACKS = ("smoke", "hygiene-v1")
REPORTS = ("report.json", "report.md", "report.html")
# units run concurrently in a run: the machine's scoring sandboxes are short-lived processes, so a
# few more than the cores keeps them busy while one waits on its oracle
WORKERS = "4"


@dataclass
class PathResult:
    args: list[str]
    exit_code: int
    output: str
    error: str  # the traceback of an exception the command raised, "" when none
    seconds: float
    written: dict[str, bytes]  # the reports the run wrote
    rebuilt: dict[str, bytes]  # the same files after `membench report RUN_SET`
    report_exit: int
    report_output: str


SUBSET = "hygiene-v1-constructs"  # hygiene-v1's first trap of each of SUBSET_CONSTRUCTS (module doc)
SUBSET_CONSTRUCTS = ("C1", "C3", "C9", "C10")


def _case_id(pack: str, agent: str, grid: str) -> str:
    return f"{pack}-{agent.split(':')[1]}-{grid}"


def _pack_for(pack: str, agent: str) -> str:
    return SUBSET if pack == "hygiene-v1" and agent != "scripted:null" else pack


# `scripted:memory-literal` with memory conditions on a one-trap-per-construct directory of hygiene-v1
# is test_hygiene_pack's memory-conditions run (B0, B2, B4, B5, curated_file × seeds 1, 2), which
# checks the same: exit 0 and the three reports rebuilt byte for byte (the same path is not
# run twice). B1 is not in that run: it is here, under refsol on these traps and under memory-literal
# on smoke
COVERED_BY_THE_HYGIENE_RUN = {f"{SUBSET}-memory-literal-memory"}
CASES = {_case_id(_pack_for(p, a), a, g): (p, a, g) for p in PACKS for a in AGENTS for g in GRIDS
         if _case_id(_pack_for(p, a), a, g) not in COVERED_BY_THE_HYGIENE_RUN}
TRANSFER = "transfer-v1-null"


def constructs_subset(target: Path) -> Path:
    """A copy of the built-in hygiene-v1 keeping the first trap of each of SUBSET_CONSTRUCTS (and only
    their hidden material: a finalized pack refuses another trap's secrets)."""
    source = Path(__file__).resolve().parents[2] / "fixtures" / "hygiene-v1"
    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text(encoding="utf-8"))
    kept, seen = [], set()
    for seq in manifest["sequences"]:
        if seq["construct"] in SUBSET_CONSTRUCTS and seq["construct"] not in seen:
            seen.add(seq["construct"])
            kept.append(seq)
    assert len(kept) == len(SUBSET_CONSTRUCTS)
    manifest["sequences"], manifest["pack"] = kept, SUBSET
    (target / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    for hidden in (target / "hidden").iterdir():
        if hidden.name not in {seq["seq_id"] for seq in kept}:
            shutil.rmtree(hidden)
    return target


def _invoke(runner: CliRunner, args: list[str], env: dict[str, str]) -> tuple[int, str, str, float]:
    started = time.perf_counter()
    result = runner.invoke(main, args, env=env, catch_exceptions=True)
    error = ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        error = "".join(traceback.format_exception(result.exception))
    return result.exit_code, result.output, error, time.perf_counter() - started


def _read(directory: Path) -> dict[str, bytes]:
    return {name: (directory / name).read_bytes() for name in REPORTS if (directory / name).is_file()}


@pytest.fixture(scope="session")
def user_paths(tmp_path_factory, bwrap_sandbox) -> dict[str, PathResult]:
    root = tmp_path_factory.mktemp("user-paths")
    home = root / "home"
    subset = str(constructs_subset(root / SUBSET))
    env = {"MEMBENCH_HOME": str(home), "COLUMNS": "120"}
    runner = CliRunner()
    commands = {case: ["run", subset if _pack_for(pack, agent) == SUBSET else pack, "--agent", agent,
                       "--conditions", GRIDS[grid], "--seeds", "1", "--run-set", case, "--workers", WORKERS]
                for case, (pack, agent, grid) in CASES.items()}
    commands[TRANSFER] = ["transfer", "transfer-v1", "--agent", "scripted:null", "--seeds", "1",
                          "--run-set", TRANSFER, "--workers", WORKERS]
    out: dict[str, PathResult] = {}
    cwd = os.getcwd()
    os.chdir(home.parent)  # as a user would run it: nothing lands in the checkout
    try:
        for case, args in commands.items():
            code, output, error, seconds = _invoke(runner, args, env)
            written = _read(home / "runs" / case)
            # a pack given as a directory is named to `report` too (it finds only built-in skeletons itself)
            rebuild = ["report", case] + (["--pack", args[1]] if args[1] == subset else [])
            report_code, report_output, report_error, _ = _invoke(runner, rebuild, env)
            out[case] = PathResult(args, code, output + error, error, seconds, written, _read(home / "runs" / case),
                                   report_code, report_output + report_error)
    finally:
        os.chdir(cwd)
    total = sum(r.seconds for r in out.values())
    print("\nuser paths (membench run/transfer wall time, s): "
          + ", ".join(f"{case} {r.seconds:.1f}" for case, r in out.items()) + f"; total {total:.1f}")
    return out


@pytest.mark.parametrize("case", [*CASES, TRANSFER])
def test_the_path_exits_0_and_report_rebuilds_it_byte_for_byte(user_paths, case):
    result = user_paths[case]
    assert result.exit_code == 0, f"membench {' '.join(result.args)} exited {result.exit_code}\n{result.output}"
    assert set(result.written) == set(REPORTS), (case, sorted(result.written))
    assert all(result.written[name] for name in REPORTS)
    assert result.report_exit == 0, f"membench report {case} exited {result.report_exit}\n{result.report_output}"
    for name in REPORTS:
        assert result.rebuilt[name] == result.written[name], f"{case}: membench report changed {name}"


def test_the_b0_alone_hygiene_run_reports_its_reversed_constructs(user_paths):
    """The run that crashed: B0 alone under scripted:null fails C9 and C10, whose gates are reported
    apart (reversed); report.md names them with their constructs' names and an exact interval."""
    md = user_paths[_case_id("hygiene-v1", "scripted:null", "baseline")].written["report.md"].decode()
    assert "B0 headroom per construct: FAIL in" in md
    assert "C9 Spurious-lesson rejection / disconfirmation (0/" in md and ", reversed)" in md
    assert "| B0 | 34 | 0 | 0.0% | [0.0%, 10.3%] exact | 0 |" in md  # Clopper–Pearson, 0 of 34 traps
