"""Shared fixtures: an isolated MEMBENCH_HOME per test and a CLI invoker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


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


@pytest.fixture
def cli(home: Path):
    def invoke(*args: str, check: bool = False, env: dict[str, str] | None = None, timeout: float = 900):
        return run_cli(*args, home=home, check=check, env=env, timeout=timeout)

    return invoke
