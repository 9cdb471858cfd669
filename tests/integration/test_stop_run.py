"""The Ctrl-C scenario with a real `membench run` subprocess and real signals (embedded path,
bubblewrap): the first SIGTERM/SIGINT starts no further unit and lets the running one finish; a
second one kills the running sandbox at once. Either way the exit status is 130, every attempt in
the log is closed, the log verifies (`membench replay`), the report says it is partial and how to
resume, and resuming runs exactly the units that did not complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from membench.bus.attempts import read_log
from tests.conftest import run_cli
from tests.integration.pack_helpers import smoke_cut_to

pytestmark = pytest.mark.integration

# an agent that takes its time (so a signal lands while it runs), changes nothing and reports one turn
SLOW_AGENT = """import json, time
time.sleep(SECONDS)
print(json.dumps({"type": "turn", "text": "done waiting"}))
"""


def agent(tmp_path: Path, seconds: float) -> Path:
    # a name no other test's agent has: the test finds its process by it (wait_for_agent)
    path = tmp_path / f"slow_{int(seconds)}_{uuid.uuid4().hex[:12]}.py"
    path.write_text(SLOW_AGENT.replace("SECONDS", str(seconds)))
    return path


def wait_for_agent(proc: subprocess.Popen, agent_path: Path, timeout: float = 300) -> None:
    """Until the agent's process runs (inside its sandbox, at /agent/<name>): the event a signal
    must land in, waited for instead of a fixed sleep that a loaded machine can outrun."""
    marker = f"/agent/{agent_path.name}".encode()
    deadline = time.monotonic() + timeout
    while True:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if marker in cmdline.read_bytes():
                    return
            except OSError:  # the process ended while we looked
                pass
        assert proc.poll() is None, f"membench exited {proc.returncode} before its agent ran"
        assert time.monotonic() < deadline, f"the agent {agent_path.name} never started"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """smoke-currency alone: B0 and B5 at one seed are two units, one running and one queued."""
    return smoke_cut_to(tmp_path_factory.mktemp("pack") / "smoke-currency")


def start(home: Path, pack: Path, agent_path: Path, run_set: str, *more: str,
          program: tuple[str, ...] = ("-m", "membench")) -> tuple[subprocess.Popen, Path]:
    err = home.parent / f"{run_set}.stderr"
    proc = subprocess.Popen([sys.executable, *program, "run", str(pack), "--agent", f"command:{agent_path}",
                             "--conditions", "B0,B5", "--seeds", "1", "--run-set", run_set, "--workers", "1", *more],
                            env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(home.parent),
                            stdout=subprocess.PIPE, stderr=err.open("w"), text=True)
    return proc, err


def wait_for(path: Path, text: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"no {text!r} in {path.read_text() if path.exists() else ''}"
        time.sleep(0.2)


def ends(home: Path, run_set: str) -> list[tuple[str, str]]:
    return [(e.unit_id, e.payload["status"]) for e, _ in read_log(home / "runs" / run_set / "events.avro")
            if e.kind == "RunEnded"]


def test_a_first_signal_lets_the_running_unit_finish_and_starts_no_other(home, bwrap_sandbox, tmp_path, pack):
    slow = agent(tmp_path, 4)  # the signal lands in its first session, long before it ends
    proc, err = start(home, pack, slow, "graceful", "--stop-grace", "300")
    wait_for(err, "to run with 1 workers")  # printed once the stop handlers are installed
    wait_for_agent(proc, slow)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=600)
    stderr = err.read_text()
    assert proc.returncode == 130, stderr
    assert "SIGTERM received: no further unit starts" in stderr
    assert f"resume with the same command: membench run {pack}" in stderr
    finished = ends(home, "graceful")
    assert [s for _, s in finished] == ["completed"]  # the running unit ended normally, the other never began
    report = json.loads((home / "runs" / "graceful" / "report.json").read_text())
    assert report["partial"]["units_not_started"] == 1 and report["partial"]["attempts_abandoned"] == 0
    assert "Partial report" in (home / "runs" / "graceful" / "report.md").read_text()
    assert run_cli("replay", str(home / "runs" / "graceful" / "events.avro"), "--verify", home=home).returncode == 0
    # a report rebuilt later says it is partial too (runs/<run set>/partial.json)
    rebuilt = json.loads(run_cli("report", "graceful", "--json", home=home, check=True).stdout)
    assert rebuilt["partial"] == report["partial"]
    # resuming runs only the unit that never started
    done = run_cli("run", str(pack), "--agent", f"command:{agent(tmp_path, 0)}", "--conditions", "B0,B5",
                   "--seeds", "1", "--run-set", "graceful", "--workers", "1", home=home, check=True)
    assert "1 already complete, 1 to run" in done.stderr
    assert sorted(s for _, s in ends(home, "graceful")) == ["completed", "completed"]
    assert not (home / "runs" / "graceful" / "partial.json").exists()
    assert "partial" not in json.loads(run_cli("report", "graceful", "--json", home=home, check=True).stdout)


def test_a_second_signal_kills_the_running_sandbox_and_the_log_still_verifies(home, bwrap_sandbox, tmp_path, pack):
    slow = agent(tmp_path, 900)
    proc, err = start(home, pack, slow, "killed", "--stop-grace", "900")
    wait_for(err, "to run with 1 workers")  # printed once the stop handlers are installed
    wait_for_agent(proc, slow)
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    wait_for(err, "SIGINT received: no further unit starts")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=600)
    assert proc.returncode == 130, err.read_text()
    assert time.monotonic() - started < 600  # the second signal, not the agent's 900 s or the grace period
    stderr = err.read_text()
    assert "SIGINT received again" in stderr and "closed at seq" in stderr
    assert [s for _, s in ends(home, "killed")] == ["abandoned"]
    verified = run_cli("replay", str(home / "runs" / "killed" / "events.avro"), "--verify", home=home)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads((home / "runs" / "killed" / "report.json").read_text())
    assert report["partial"]["attempts_abandoned"] == 1 and report["partial"]["units_not_started"] == 1


# `membench` with one step of run_embedded wrapped so the process signals itself while that step runs
SIGNAL_DURING = """import os, signal, sys
import membench.pipeline.grid_run as run
import membench.pipeline.embedded as embedded
owner, name = (embedded.EmbeddedPipeline, "recover") if STEP == "recover" else (run, "write_log_root")
original = getattr(owner, name)
def signalled(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return original(*args, **kwargs)
setattr(owner, name, signalled)
from membench.cli import main
main()
"""


@pytest.mark.parametrize("step", ["recover", "write_log_root"])
def test_a_signal_outside_the_grid_is_a_clean_stop_too(home, bwrap_sandbox, tmp_path, pack, step):
    """The handlers cover the whole run, not only the grid. A SIGTERM during the
    recovery starts no unit (no report: nothing ran; exit 130); one while the log root is written lets
    it and the complete report be written, then exits 130. Without them the process died of the
    signal (-15) with no log root."""
    wrapper = tmp_path / "membench_signalled.py"
    wrapper.write_text(SIGNAL_DURING.replace("STEP", repr(step)))
    run_set = f"signal-{step.replace('_', '-')}"
    proc, err = start(home, pack, agent(tmp_path, 0), run_set, program=(str(wrapper),))
    proc.communicate(timeout=300)
    stderr = err.read_text()
    assert proc.returncode == 130, stderr
    assert "SIGTERM received" in stderr and (home / "runs" / run_set / "log_root.json").exists()
    if step == "recover":  # nothing ran, so there is nothing to report
        assert "stopped: no report" in stderr and "resume with the same command: membench run" in stderr
        assert ends(home, run_set) == [] and not (home / "runs" / run_set / "report.json").exists()
    else:
        report = json.loads((home / "runs" / run_set / "report.json").read_text())
        assert report.get("partial") is None and "stopped after the grid finished" in stderr
        assert sorted(s for _, s in ends(home, run_set)) == ["completed", "completed"]
        verified = run_cli("replay", str(home / "runs" / run_set / "events.avro"), "--verify", home=home)
        assert verified.returncode == 0, verified.stdout + verified.stderr
