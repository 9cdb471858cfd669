"""Shared fixtures: an isolated MEMBENCH_HOME per test, CLI invokers (a subprocess, like a user; or
in-process for refused input, see `cli_inproc`), and the sandbox backends.

A test whose environment lacks something (a sandbox backend, a service, the ../shared directory)
skips locally but fails under CI (`skip_or_fail`): there a missing piece is a broken environment,
and a skip would hide it."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import NoReturn

import pytest

from membench.sandbox.docker_backend import DEFAULT_HOST
from membench.sandbox.registry import get_sandbox

REPO = Path(__file__).resolve().parent.parent

# the model gateway waits this long before its first retry of a failed upstream call (1 s by default,
# doubling): tests that provoke 429s, 5xx and timeouts on purpose need not wait (docs/gateway.md)
os.environ.setdefault("MEMBENCH_MODEL_RETRY_BACKOFF_S", "0.01")

pytest_plugins = ["tests.cpu_accounting"]  # per-test CPU when MEMBENCH_TEST_CPU is set (docs/benchmarks.md)


def _find_shared() -> Path:
    """The team's shared reference data: `../shared` beside the repository, or beside a folder that
    holds the checkout (a CI clone may sit one level deeper); `../shared` when none exists."""
    for parent in REPO.parents:
        if (parent / "shared" / "seeds").is_dir() or (parent / "shared" / "external").is_dir():
            return parent / "shared"
    return REPO.parent / "shared"


SHARED = _find_shared()


def in_ci() -> bool:
    """CI is set to anything but empty, 0, false or no."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_or_fail(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def require_shared(path: Path) -> Path:
    """PATH inside the shared folder next to the repository, which must exist."""
    if not path.exists():
        skip_or_fail(f"{path.name} not found: expected the shared folder next to the repository ({path})")
    return path


def require_backend(name: str):
    """The named sandbox backend, working here (its own check() ran a real jail)."""
    if name == "docker":
        host = os.environ.get("DOCKER_HOST", DEFAULT_HOST)
        if host.startswith("unix://") and not os.path.exists(host[len("unix://"):]):
            skip_or_fail(f"no Docker API socket at {host}: run deploy/podman/setup.sh (or set DOCKER_HOST)")
    backend = get_sandbox(name)
    ok, reason = backend.check()
    if not ok:
        skip_or_fail(f"sandbox backend {name} does not work here: {reason}")
    return backend


# Longest modules first. CI runs the suite on three pytest-xdist workers with `--dist loadfile` (a
# module runs whole on one worker, so its module and session fixtures are built once there), and
# xdist hands modules out in collection order (with `--no-loadscope-reorder`; by default it would
# start the modules with the most tests, which are the quick ones): starting the longest ones first keeps every worker
# busy to the end instead of leaving one module running alone (longest-processing-time-first).
# The order comes from the last measured suite (docs/benchmarks.md, "Test suite"); a module not
# listed keeps its place after these. A wrong or stale entry costs time, never a result.
LONGEST_FIRST = (
    "tests/integration/test_hygiene_pack.py",
    "tests/integration/test_kafka_pipeline.py",
    "tests/integration/test_kafka_broker_loss.py",
    "tests/integration/test_hygiene_admission.py",
    "tests/integration/test_model_agents.py",
    "tests/integration/test_user_paths.py",
    "tests/integration/test_runners.py",
    "tests/integration/test_audit.py",
    "tests/integration/test_memory_libraries.py",
    "tests/integration/test_dreambench_conditions.py",
    "tests/formats/test_pack_format_hygiene.py",
    "tests/integration/test_model_driven_memory.py",
    "tests/integration/test_report_study.py",
    "tests/exports/test_tables_export.py",
    "tests/integration/test_bench_bus.py",
    "tests/packs/test_validate_gates.py",
    "tests/transfer_protocol/test_transfer_evaluator_isolation.py",
    "tests/sandbox/test_hostile_agent.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: modules stay whole


@pytest.fixture(scope="session")
def bwrap_sandbox():
    return require_backend("bwrap")


@pytest.fixture(scope="session")
def docker_sandbox():
    return require_backend("docker")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh MEMBENCH_HOME for this test."""
    path = tmp_path / "membench-home"
    monkeypatch.setenv("MEMBENCH_HOME", str(path))
    return path


def run_cli(*args: str, home: Path, check: bool = False, env: dict[str, str] | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real `membench` CLI in a subprocess (its own chDB owner, like a user)."""
    full_env = {**os.environ, "MEMBENCH_HOME": str(home), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "membench", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(home.parent))
    if check and proc.returncode != 0:
        raise AssertionError(f"membench {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def assert_replay_verifies(home: Path, source: str | Path, *options: str, env: dict[str, str] | None = None) -> str:
    """`membench replay SOURCE --verify` exits 0: a log file, `warehouse:RUN_SET` or a `kafka://…` topic
    (give its `--warehouse` in OPTIONS). Every log membench writes must verify, so a test that makes
    a run calls this (or `assert_run_sets_verify`) once where the run is made — in the shared
    fixture that builds it, not in each test that reads it: a replay is a process. Returns stdout."""
    proc = run_cli("replay", str(source), "--verify", *options, home=home, env=env)
    assert proc.returncode == 0, (f"membench replay {source} --verify exited {proc.returncode}\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def assert_run_sets_verify(home: Path, *run_sets: str, env: dict[str, str] | None = None) -> None:
    """`assert_replay_verifies` for the log of each RUN_SET under HOME's runs/ (every run set there
    when none is named): what an embedded `membench run`, `score` or `transfer` wrote."""
    logs = ([home / "runs" / run_set / "events.avro" for run_set in run_sets] if run_sets
            else sorted((home / "runs").glob("*/events.avro")))
    assert logs, f"no run set's log under {home / 'runs'}"
    for log in logs:
        assert_replay_verifies(home, log, env=env)


@pytest.fixture
def cli(home: Path):
    def invoke(*args: str, check: bool = False, env: dict[str, str] | None = None, timeout: float = 900):
        return run_cli(*args, home=home, check=check, env=env, timeout=timeout)

    return invoke


def run_cli_inprocess(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The same `membench` command run in this process by click's CliRunner, for the tests about
    how a command refuses its input (message, exit status, nothing written): no interpreter start
    and import of a subprocess per test. The result has the subprocess's shape; an uncaught
    exception becomes exit status 1 with its traceback on stderr, as a real process would show it.

    Only for commands that stop before opening a warehouse: a chDB path has one owner process
    (membench/warehouse/client.py) and chDB keeps one session per process, so a command that ran here would
    hold the test process to it: a command that connects to a warehouse here, or succeeds, is a
    misuse and fails the test."""
    from click.testing import CliRunner

    from membench.cli import main

    import clickhouse_connect

    def refuse(*_args, **_kwargs):
        raise AssertionError("the command opened a warehouse in the test process: use the subprocess `cli`")

    full_env = {"MEMBENCH_HOME": str(home), **(env or {})}
    cwd, get_client = os.getcwd(), clickhouse_connect.get_client
    os.chdir(home.parent)
    clickhouse_connect.get_client = refuse  # membench/warehouse/client.py looks it up at each connect
    try:
        result = CliRunner().invoke(main, list(args), env=full_env, prog_name="membench")
    finally:
        clickhouse_connect.get_client = get_client
        os.chdir(cwd)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    if result.exit_code == 0:
        raise AssertionError(f"membench {' '.join(args)} succeeded in-process: use the subprocess `cli` "
                             f"fixture for a command that runs\n{result.stdout}\n{stderr}")
    return subprocess.CompletedProcess(["membench", *args], result.exit_code, result.stdout, stderr)


@pytest.fixture
def cli_inproc(home: Path):
    """`cli`'s in-process twin for refused input (see run_cli_inprocess); `check` is not offered,
    a command here is expected to fail."""
    def invoke(*args: str, env: dict[str, str] | None = None):
        return run_cli_inprocess(*args, home=home, env=env)

    return invoke
