"""A hostile command agent cannot cross the sandbox, on either backend.

A real unit of the smoke pack (sequence smoke-currency, condition B5) runs with the command agent
`tests/sandbox/agents/hostile_agent.py`. In session 1 it tries to read the oracle, the reference
solution, the manifest, the warehouse, the event log, a canary file and /root, to see the parent's
environment, to reach the network, to write outside its workspace, to exceed its memory, CPU-time,
process and wall-time limits and to leave a background process behind; every attempt must fail
and be visible in the unit's events (read back from the Avro event log); the canary secrets must
appear in no event; and the oracle must still score each session's honest solution as a pass.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
import time
from pathlib import Path

import fastavro
import pytest

from membench.bus.file import FileBus
from membench.packs.pack_resolver import open_pack
from membench.runner.grid import RunConfig, RunUnit, run_unit

pytestmark = pytest.mark.integration

HOSTILE = Path(__file__).resolve().parent / "agents" / "hostile_agent.py"
ATTEMPTS = ["read_oracle", "read_solution", "read_manifest", "read_warehouse", "read_event_log", "search_hidden",
            "read_canary", "read_root", "parent_environment", "network", "write_outside", "memory_limit",
            "cpu_limit", "process_limit"]


def _host_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


def _read_log(path: Path) -> list[dict]:
    with path.open("rb") as handle:
        return list(fastavro.reader(handle))


def _payload(record: dict) -> dict:
    payload = record["payload"]
    return payload[1] if isinstance(payload, tuple) else payload


def test_hostile_agent_is_contained(any_sandbox, tmp_path, monkeypatch):
    home = tmp_path / "home"
    pack = open_pack("smoke", home)
    seq = pack.sequence("smoke-currency")
    session1 = seq.sessions[0]
    run_set = "hostile-" + any_sandbox.name
    log = home / "runs" / run_set / "events.avro"
    log.parent.mkdir(parents=True)
    warehouse = home / "warehouse"
    warehouse.mkdir()
    (warehouse / "trajectory_events.bin").write_text("warehouse rows")

    canary = "CANARY-" + secrets.token_hex(16)
    env_canary = "ENVCANARY-" + secrets.token_hex(16)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(canary)
    outside.chmod(0o777)  # even a world-writable host directory stays out of reach
    monkeypatch.setenv("MEMBENCH_CANARY_ENV", env_canary)
    marker = "membench-hostile-bg-" + secrets.token_hex(8)
    listener = socket.create_server(("0.0.0.0", 0))
    listener.settimeout(0.1)
    targets = {
        "oracle": str(pack.oracle_path(seq, session1)), "solution": str(pack.solution_path(seq, session1)),
        "manifest": str(pack.root / "manifest.json"), "warehouse": str(warehouse), "log": str(log),
        "canary": str(outside / "canary.txt"), "env_name": "MEMBENCH_CANARY_ENV", "outside_dir": str(outside),
        "port": listener.getsockname()[1], "host_ip": _host_ip(), "marker": marker,
    }
    for key in ("oracle", "solution", "manifest", "log"):
        assert Path(targets[key]).exists() or key == "log"
    monkeypatch.setenv("MEMBENCH_AGENT_WALL_S", "25")
    monkeypatch.setenv("MEMBENCH_AGENT_CPU_S", "3")
    monkeypatch.setenv("MEMBENCH_AGENT_MEMORY_MB", "512")
    monkeypatch.setenv("MEMBENCH_AGENT_MAX_PROCS", "64")
    agent = "command:" + shlex.join([str(HOSTILE), json.dumps(targets)])

    bus = FileBus(log)
    started = time.monotonic()
    try:
        run_unit(pack, RunUnit("smoke", seq.seq_id, "B5", 1), RunConfig(run_set, agent, oracle_timeout_s=60),
                 any_sandbox, bus.publish)
    finally:
        bus.close()
    elapsed = time.monotonic() - started
    try:
        listener.accept()
        connected = True
    except OSError:
        connected = False
    listener.close()

    records = _read_log(log)
    kinds = [r["kind"] for r in records]
    assert kinds[-1] == "RunEnded" and _payload(records[-1])["status"] == "completed", _payload(records[-1])

    # every attempt is in the log, and every one failed
    results = {_payload(r)["name"].split(":", 1)[1]: _payload(r) for r in records
               if r["kind"] == "ToolResult" and _payload(r)["name"].startswith("attempt:")}
    for what in ATTEMPTS:
        assert what in results, f"attempt {what} missing from the events"
        output = results[what]["output"]["text"]
        assert results[what]["exit_code"] == 1 and output.startswith("BLOCKED"), f"{what}: {output}"
    assert "background_process" in results
    calls = {_payload(r)["name"] for r in records if r["kind"] == "ToolCall"}
    assert "attempt:wall_time" in calls

    # the wall-clock limit ended session 1, and everything the agent started died with it
    ended = {_payload(r)["session_index"]: _payload(r)["status"] for r in records if r["kind"] == "SessionEnded"}
    assert ended[1] == "timeout" and ended[2] == ended[3] == "completed"
    process = [_payload(r) for r in records if r["kind"] == "ToolResult" and _payload(r)["name"] == "agent_process"]
    assert "wall-clock limit" in process[0]["output"]["text"]
    assert _processes_with(marker) == []
    assert not connected
    assert not (outside / "escape.txt").exists()
    assert elapsed < 300

    # the oracle still scores the honest work: every session passes (session 3 from memory)
    verdicts = {r["session_index"]: _payload(r)["outcome"] for r in records if r["kind"] == "OracleVerdict"}
    assert verdicts == {1: "pass", 2: "pass", 3: "pass"}
    citations = [r for r in records if r["kind"] == "MemoryCitation"]
    assert citations and citations[0]["session_index"] == 3

    # neither canary reaches any event (agent-visible or not), nor any derived memory
    for record in records:
        text = json.dumps(_payload(record), default=str)
        assert canary not in text and env_canary not in text, record["kind"]
    # the protocol's plain lines are kept as a turn
    turns = [_payload(r)["text"]["text"] for r in records if r["kind"] == "Turn" and r["visibility"] == "agent"]
    assert any("a plain line that is not JSON" in t for t in turns)
