"""A hostile agent attacks the model gateway's front door from inside the real sandbox, through the
real relay, in a real `membench run` (the upstream is a local scripted server holding the key's
one-minute window, as a provider does): nothing it sends reaches the upstream off the served path,
its malformed framing is answered at once, its oversized body and its flood are refused by the
gateway as its own 4xx — so the upstream never answers 429 and no unit, its own or another, is
excluded — and the log verifies. The controls (each defence bypassed) are in
tests/gateway/test_front_door.py."""

from __future__ import annotations

import json

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream
from membench.bus.attempts import read_log
from tests.conftest import REPO

pytestmark = pytest.mark.integration
ATTACKER = REPO / "tests" / "fixtures" / "agents" / "front_door_attacker.py"
KEY = "sk-membench-front-door-3c9d1a7e"


def test_a_hostile_agent_reaches_nothing_off_the_path_and_excludes_no_unit(cli, home, bwrap_sandbox):
    with ScriptedUpstream(rpm=12) as upstream:
        proc = cli("run", "smoke", "--agent", f"command:{ATTACKER}", "--conditions", "B0", "--seeds", "1",
                   "--run-set", "door", "--workers", "2", "--model-base-url", upstream.base_url,
                   "--model-rpm", "12", "--model-max-request-bytes", "65536", env={"MEMBENCH_MODEL_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert upstream.requests
    assert {r["target"] for r in upstream.requests} == {"/v1/chat/completions"}
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in upstream.requests)
    assert len(upstream.requests) <= 12 * 2  # the run lasts under two minutes: the key's window held
    events = [e for e, _ in read_log(home / "runs" / "door" / "events.avro")]
    reports = [json.loads(e.payload["text"]["text"]) for e in events
               if e.kind == "Turn" and e.payload["role"] == "agent" and e.payload["text"]["text"].startswith("{")]
    assert len(reports) == 9
    for found in reports:
        assert found["paths"] == [400, 400, 400] and found["oversize"] == 413
        assert found["framing"] == 400 and found["framing_s"] < 5
        assert set(found["flood"]) <= {200, 429} and 429 in found["flood"]
    calls = [e.payload for e in events if e.kind == "ModelCall"]
    assert {c["status"] for c in calls} == {"ok", "client_error"}  # no upstream_error: the provider never said 429
    assert {c["http_status"] for c in calls if c["status"] == "client_error"} == {400, 413, 429}
    ends = [e.payload for e in events if e.kind == "RunEnded"]
    assert len(ends) == 3 and not [e for e in ends if e["status"] == "excluded"]
    verified = cli("replay", str(home / "runs" / "door" / "events.avro"), "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
