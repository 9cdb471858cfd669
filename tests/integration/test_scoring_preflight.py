"""The scoring pre-flight and the run set's environment, through the real CLI.

Without pytest in the interpreter the scoring sandboxes run (a real virtualenv of membench built by
uv from its cache, with pytest uninstalled), on the pytest oracle runner (`MEMBENCH_ORACLE_RUNNER=
pytest`), `run`, `transfer` and `validate` stop with exit 2 before any unit, naming pytest and the
fix, and write no run set; `doctor` shows the same result (one code path). The fast runner (the
default) needs no pytest: there the same interpreter passes the pre-flight. The control: the same
command with the working environment passes the pre-flight and runs. A resumed run set goes on in the environment it records and is refused, losing nothing,
in another."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from membench.pipeline.run_environment import ScoringEnvironment
from tests.conftest import REPO, run_cli, skip_or_fail
from tests.integration.conftest import SMOKE_GRID, copy_home

pytestmark = pytest.mark.integration


def uv_binary() -> Path:
    """The uv deploy/setup-env.sh installs (its cache makes a virtualenv of membench a matter of seconds)."""
    tools = os.environ.get("MEMBENCH_TOOLS_DIR") or \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "membench-tools"
    uv = Path(tools) / "bin" / "uv"
    if not uv.is_file():
        skip_or_fail(f"uv not found at {uv}: run deploy/setup-env.sh")
    return uv


def base_python() -> str:
    """The interpreter this suite's virtualenv is built on (the same wheels, from uv's cache)."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MEMBENCH_HOME")}
    return {**env, **extra}


@pytest.fixture
def venv_without_pytest(tmp_path) -> Path:
    """A real virtualenv with membench (editable, this checkout) and every dependency but pytest."""
    uv, venv = uv_binary(), tmp_path / "venv-without-pytest"
    python = venv / "bin" / "python"
    for argv in ([uv, "venv", "-q", "--python", base_python(), venv],
                 [uv, "pip", "install", "-q", "--python", python, "-e", REPO],
                 [uv, "pip", "uninstall", "-q", "--python", python, "pytest"]):
        subprocess.run([str(a) for a in argv], check=True, capture_output=True, env=clean_env(), timeout=600)
    assert subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode != 0
    return python


def test_without_pytest_every_scoring_command_stops_before_any_unit(venv_without_pytest, tmp_path, bwrap_sandbox):
    home = tmp_path / "home"

    def membench(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv_without_pytest), "-m", "membench", *args], capture_output=True, text=True,
                              env=clean_env(MEMBENCH_HOME=str(home), **{k.upper(): v for k, v in env.items()}),
                              cwd=tmp_path, timeout=600)

    # the README's first command
    run = membench("run", "smoke", "--conditions", "B0,B5", "--seeds", "1,2,3", "--agent", "scripted:memory-literal",
                   membench_oracle_runner="pytest")
    assert run.returncode == 2, run.stderr
    assert ("scoring pre-flight failed: the scoring sandbox (bwrap) cannot import pytest with "
            f"{venv_without_pytest}: install membench with deploy/setup-env.sh") in run.stderr
    for args in (("transfer", "transfer-v1"), ("validate", "smoke")):
        proc = membench(*args, membench_oracle_runner="pytest")
        assert proc.returncode == 2 and "cannot import pytest" in proc.stderr, (args, proc.stderr)
    # nothing of a run set: no run directory, no log, no warehouse
    assert not (home / "runs").exists() and not (home / "warehouse").exists()
    # doctor runs the same check and shows the same cause (its docker row is not this test's: no socket)
    doctor = json.loads(membench("doctor", "--json", docker_host=f"unix://{tmp_path}/no-docker.sock",
                                 membench_oracle_runner="pytest").stdout)
    doctor = doctor["backends"]["bwrap"]
    assert doctor["ok"] is False and doctor["reason"] in run.stderr
    assert doctor["preflight"]["probe"]["pytest"] == ""
    assert [c["reference"] for c in doctor["preflight"]["checks"]] == ["fail"]
    # the fast runner needs the standard library only: the same interpreter scores, pytest or not
    fast = json.loads(membench("doctor", "--json", docker_host=f"unix://{tmp_path}/no-docker.sock").stdout)
    fast = fast["backends"]["bwrap"]
    assert fast["ok"] is True and fast["preflight"]["probe"]["pytest"] == "", fast
    assert {c["reference"] for c in fast["preflight"]["checks"]} == {"pass"}

    # the control: the same command with the working environment passes the pre-flight and runs
    control = run_cli("run", "smoke", "--conditions", "B0", "--seeds", "1", "--run-set", "control",
                      home=tmp_path / "home-working")
    assert control.returncode == 0, control.stderr
    recorded = json.loads((tmp_path / "home-working" / "runs" / "control" / "environment.json").read_text())
    assert recorded["fields"]["scoring_preflight"].startswith("ok (ledger/")
    assert recorded["fields"]["pytest"] not in ("", "(none)")
    verify = run_cli("replay", str(tmp_path / "home-working" / "runs" / "control" / "events.avro"), "--verify",
                     home=tmp_path / "home-working")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def _digests(directory: Path) -> dict[str, str]:
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_resume_goes_on_in_the_recorded_environment_and_is_refused_in_another(smoke_run_set, tmp_path):
    home = copy_home(smoke_run_set, tmp_path / "home")
    run_dir = home / "runs" / smoke_run_set.run_set
    same = run_cli("run", *SMOKE_GRID, home=home)
    assert same.returncode == 0, same.stderr
    assert "12 already complete, 0 to run" in same.stderr

    path = run_dir / "environment.json"
    record = json.loads(path.read_text())
    here = record["digest"]  # the resume above went on: the recorded environment is this one
    record["fields"]["pytest"], was = "7.0.0", record["fields"]["pytest"]  # as if scored under another pytest
    path.write_text(json.dumps(record), encoding="utf-8")
    before = _digests(run_dir)
    refused = run_cli("run", *SMOKE_GRID, home=home)
    assert refused.returncode == 2, refused.stderr
    message = " ".join(refused.stderr.split())
    assert f"run set {smoke_run_set.run_set} was scored in another environment" in message
    assert f"recorded {ScoringEnvironment(record['fields']).digest[:12]}, here {here[:12]}" in message
    assert f"pytest (in the sandbox) 7.0.0 -> {was}" in message and "--run-set NEW" in message
    assert _digests(run_dir) == before  # nothing recorded was lost or changed
