"""Run sets shared by the integration modules: built once per test session and served read-only.
Under pytest-xdist the first worker that needs one builds it, under a file lock in the session's
common temporary directory; every worker then reads its own copy (a chDB warehouse has one owner
process at a time, so two workers cannot read one home at once).

The `smoke` grid (B0 and B5 × seeds 1, 2, `scripted:memory-literal`, bubblewrap oracles) is what
most modules that read a finished run set need; building it once instead of once per module is
most of what it costs. A test that only reads (reports, `sql`, exports, replay of a copy of the
log) uses `smoke_run_set` directly; a test that writes into a MEMBENCH_HOME builds its own or starts
from a copy (below).
At the end of the session the fixture checks that nothing under `runs/` of the shared home was
changed, added or removed, so a test that wrote into it fails instead of skewing the others.

A test that needs the smoke grid's embedded run as its reference and then writes (publishes the same
grid to Kafka, queues it for runners, edits the warehouse) starts from `copy_home(smoke_run_set, …)`:
the same finalized pack (so the same run set and run ids) and the finished embedded run, without
running it again."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import assert_run_sets_verify, run_cli, skip_or_fail

SMOKE_GRID = ("smoke", "--conditions", "B0,B5", "--seeds", "1,2", "--agent", "scripted:memory-literal")


@dataclass(frozen=True)
class RunSet:
    home: Path  # its MEMBENCH_HOME: read it, never write into it
    run_set: str
    stdout: str  # what `membench run` printed (the per-condition table)


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


TRANSFER_AGENTS = ("scripted:refsol", "scripted:null", "scripted:memory-literal")


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The home `build(home)` fills, built once per test session: by this process, or under
    pytest-xdist by whichever worker asks first (the others wait on the lock, then find it built).
    Read it only through a copy (`copy_home`): a chDB warehouse has one owner process at a time."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's directory, common to its workers
    home = base / f"shared-{name}" / "home"
    with open(base / f"shared-{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = home.parent / "built"
        if not done.exists():
            if home.parent.exists():  # a build that failed in another worker: start again
                shutil.rmtree(home.parent)
            home.parent.mkdir(parents=True)
            build(home)
            done.write_text("ok\n")
    return home


@pytest.fixture(scope="session")
def transfer_study_home(tmp_path_factory, bwrap_sandbox) -> Path:
    """`membench transfer transfer-v1` (2 projects × 4 conditions, seed 1) under each scripted agent,
    built once per session; this worker's copy (read-only: test_transfer_study reads it,
    test_transfer_kafka copies it for the embedded reference)."""
    def build(home: Path) -> None:
        for agent in TRANSFER_AGENTS:
            run_cli("transfer", "transfer-v1", "--agent", agent, home=home, check=True)
        assert_run_sets_verify(home)  # one replay per study, where it is made

    home = copy_home(built_once(tmp_path_factory, "transfer", build), tmp_path_factory.mktemp("transfer") / "home")
    before = _digest(home / "runs")
    yield home
    assert _digest(home / "runs") == before, "a test wrote into the shared transfer study's home"


@pytest.fixture(scope="session")
def smoke_run_set(tmp_path_factory, bwrap_sandbox):
    """`membench run` of the smoke grid, built once per session; this worker's copy (read-only)."""
    def build(home: Path) -> None:
        proc = run_cli("run", *SMOKE_GRID, home=home, check=True)
        assert_run_sets_verify(home)
        (home.parent / "stdout.txt").write_text(proc.stdout, encoding="utf-8")

    built = built_once(tmp_path_factory, "smoke", build)
    home = copy_home(built, tmp_path_factory.mktemp("smoke") / "home")
    (report,) = (home / "runs").glob("*/report.json")
    shared = RunSet(home, json.loads(report.read_text())["run_set"],
                    (built.parent / "stdout.txt").read_text(encoding="utf-8"))
    before = _digest(home / "runs")
    yield shared
    assert _digest(home / "runs") == before, "a test wrote into the shared smoke run set's home"


def copy_home(shared: RunSet | Path, target: Path) -> Path:
    """A writable copy of a shared MEMBENCH_HOME (a `RunSet`'s, or the home itself) at TARGET: its
    finalized packs, run directories and warehouse (the shared runs have ended, so nothing holds its
    warehouse), with each run set's `log_root.json` naming the copy's warehouse, as if the run had
    been made there (so `report` checks the copy's rows against it). The shared run sets are
    unsigned: a signed root could not be moved this way."""
    source = shared.home if isinstance(shared, RunSet) else shared
    # symlinks kept: chDB's Atomic database links metadata/ and data/ to store/ (relative links)
    shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns("warehouse.lock"))
    for root_file in (target / "runs").glob("*/log_root.json"):
        record = json.loads(root_file.read_text(encoding="utf-8"))
        assert record.get("signature") is None, f"{root_file}: a signed log root cannot be moved"
        if isinstance(record.get("warehouse"), str):
            record["warehouse"] = record["warehouse"].replace(str(source), str(target))
        root_file.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return target


# ------------------------------------------------------------------------------ a real browser
# Debian's Chromium driven by playwright: the viewer's and report.html's browser tests share it
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("the python package playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()
