"""The model API key stays on the host: the gateway adds it to the upstream request, and a hostile
agent in the sandbox — reading its environment, every process's /proc environ and cmdline, and
every readable file — finds no trace of it; nor is it anywhere under MEMBENCH_HOME afterwards
(log, blobs, warehouse, report). The upstream is a local scripted server (no model API is
reachable here); the sandbox, the gateway and the relay are the real ones."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.bus.attempts import read_log
from tests.conftest import REPO

pytestmark = pytest.mark.integration
HUNTER = REPO / "tests" / "fixtures" / "agents" / "key_hunter.py"


def test_a_hostile_agent_finds_no_trace_of_the_key(cli, home, bwrap_sandbox):
    key = "sk-" + secrets.token_hex(24)
    since = time.time() - 1
    with ScriptedUpstream() as upstream:
        proc = cli("run", "smoke", "--agent", f"command:{HUNTER} {key[::-1]} {since}", "--conditions", "B0",
                   "--seeds", "1", "--run-set", "hunt", "--model-base-url", upstream.base_url, "--model-record",
                   env={"MEMBENCH_MODEL_API_KEY": key, "MEMBENCH_AGENT_WALL_S": "600"})
    assert proc.returncode == 0, proc.stderr
    assert upstream.requests and all(r["headers"]["Authorization"] == f"Bearer {key}" for r in upstream.requests)
    events = [e for e, _ in read_log(home / "runs" / "hunt" / "events.avro")]
    reports = [json.loads(e.payload["text"]["text"]) for e in events
               if e.kind == "Turn" and e.payload["role"] == "agent" and e.payload["text"]["text"].startswith("{")]
    assert len(reports) == 9  # three sequences of three sessions, each hunted
    for found in reports:
        assert found["model_status"] == 200
        assert found["scanned_files"] > 5  # it did read the task, the workspace, the mounts
        assert found == {**found, "environ": [], "proc": [], "files": []}
    calls = [e.payload for e in events if e.kind == "ModelCall"]
    assert len(calls) == 9 and all(c["status"] == "ok" and c["recorded"] for c in calls)
    hits = [p for p in Path(home).rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert hits == []


def test_the_hunter_finds_a_key_that_is_there(tmp_path):
    """Negative control, on the host: a key in the environment and in a fresh file is found."""
    key = "sk-" + secrets.token_hex(24)
    (tmp_path / "leak.txt").write_text(f"token={key}\n")
    with ScriptedUpstream() as upstream:
        done = subprocess.run([sys.executable, str(HUNTER), key[::-1], str(time.time() - 5), str(tmp_path)],
                              capture_output=True, text=True, timeout=120,
                              env={"OPENAI_BASE_URL": upstream.base_url, "OPENAI_API_KEY": key, "PATH": "/usr/bin"})
    found = json.loads(json.loads(done.stdout)["text"])
    assert found["environ"] == ["OPENAI_API_KEY"] and found["files"] == [str(tmp_path / "leak.txt")]
    assert any(p.endswith("/environ") for p in found["proc"])
