"""The README's first command on a fresh install: `bash deploy/setup-env.sh` (without --dev: what a
user installs) in a copy of this checkout, then the command through that virtualenv, must give the
designed numbers — B0 0/9, B5 9/9 — and a log that `replay --verify` accepts. Everything scoring
needs must be in the main install: the oracles run on .venv's interpreter.

The same virtualenv, with pytest then removed from it, is refused by the scoring pre-flight of the
pytest oracle runner (exit 2, naming pytest) and the run set already recorded is left as it was. uv's cache makes the
install take about a minute; agents and MCP memory servers are left out (MEMBENCH_SKIP_AGENTS=1,
MEMBENCH_SKIP_MCP_MEMORY=1). The install claims one top-level import name: outside the checkout, none
of the rooms' names imports (a user's own `reports` or `schemas` module is theirs)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from tests.conftest import REPO, skip_or_fail
from tests.test_architecture import ROOMS
from tests.integration.test_scoring_preflight import base_python, clean_env, uv_binary

pytestmark = pytest.mark.integration

README_COMMAND = ("run", "smoke", "--conditions", "B0,B5", "--seeds", "1,2,3", "--agent", "scripted:memory-literal")


def _checkout_copy(dest):
    """The tracked files of this checkout as they are on disk (a clone, without its .venv)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if listed.returncode != 0:
        skip_or_fail(f"not a git checkout ({REPO}): the fresh install copies its tracked files")
    for rel in filter(None, listed.stdout.decode().split("\0")):
        source = REPO / rel
        if source.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel)


def test_readme_first_command_on_a_fresh_install(tmp_path, bwrap_sandbox):
    uv_binary()  # installed by this suite's own set-up; the fresh one reuses it and its cache
    clone = tmp_path / "membench"
    _checkout_copy(clone)
    env = clean_env(MEMBENCH_SKIP_AGENTS="1", MEMBENCH_SKIP_MCP_MEMORY="1", PYTHON=base_python())
    setup = subprocess.run(["bash", "deploy/setup-env.sh"], cwd=clone, env=env, capture_output=True, text=True,
                           timeout=900)
    assert setup.returncode == 0, setup.stderr
    assert (clone / ".venv" / "bin" / "membench").exists()
    names = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c",
                            "import importlib.util, sys\n"
                            "print(sorted(n for n in sys.argv[1:] if importlib.util.find_spec(n)))",
                            "membench", "membench.pipeline", *ROOMS], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert names.stdout.strip() == "['membench', 'membench.pipeline']", names.stdout + names.stderr

    def membench(*args: str, **extra: str) -> subprocess.CompletedProcess:  # from the clone's root, as the README says
        return subprocess.run([".venv/bin/membench", *args], cwd=clone, env={**env, **extra}, capture_output=True,
                              text=True, timeout=900)

    run = membench(*README_COMMAND)
    assert run.returncode == 0, run.stderr
    (report_file,) = (clone / ".membench" / "runs").glob("*/report.json")
    report = json.loads(report_file.read_text())
    counts = {c["condition"]: (c["passed"], c["cells"], c["excluded"]) for c in report["conditions"]}
    assert counts == {"B0": (0, 9, 0), "B5": (9, 9, 0)}, counts
    verify = membench("replay", str(report_file.parent / "events.avro"), "--verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr

    # pytest removed from that .venv: on the pytest oracle runner (the fast one needs no pytest) the same
    # command stops before any unit, and what is recorded stays
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in report_file.parent.rglob("*") if p.is_file()}
    subprocess.run([str(uv_binary()), "pip", "uninstall", "-q", "--python", str(clone / ".venv" / "bin" / "python"),
                    "pytest"], check=True, env=env, capture_output=True)
    broken = membench(*README_COMMAND, MEMBENCH_ORACLE_RUNNER="pytest")
    assert broken.returncode == 2, broken.stderr
    assert "cannot import pytest" in broken.stderr and "deploy/setup-env.sh" in broken.stderr
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in report_file.parent.rglob("*") if p.is_file()} \
        == before
