"""Run sets shared by the integration modules: built once per test session (once per pytest-xdist
worker: the modules that use one may land on either) and served read-only.

The `smoke` grid (B0 and B5 × seeds 1, 2, `scripted:memory-literal`, bubblewrap oracles) is what
most modules that read a finished run set need; building it once instead of once per module is
most of what it costs. A test that only reads (reports, `sql`, exports, replay of a copy of the
log) uses `smoke_run_set` directly; a test that writes into a MEMBENCH_HOME builds its own.
At the end of the session the fixture checks that nothing under `runs/` of the shared home was
changed, added or removed, so a test that wrote into it fails instead of skewing the others."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_cli

SMOKE_GRID = ("smoke", "--conditions", "B0,B5", "--seeds", "1,2", "--agent", "scripted:memory-literal")


@dataclass(frozen=True)
class RunSet:
    home: Path  # its MEMBENCH_HOME: read it, never write into it
    run_set: str
    stdout: str  # what `membench run` printed (the per-condition table)


def _digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="session")
def smoke_run_set(tmp_path_factory, bwrap_sandbox):
    """`membench run` of the smoke grid, once per session, in a home of its own (read-only)."""
    home = tmp_path_factory.mktemp("shared-smoke") / "home"
    proc = run_cli("run", *SMOKE_GRID, home=home, check=True)
    (report,) = (home / "runs").glob("*/report.json")
    shared = RunSet(home, json.loads(report.read_text())["run_set"], proc.stdout)
    before = _digest(home / "runs")
    yield shared
    assert _digest(home / "runs") == before, "a test wrote into the shared smoke run set's home"
