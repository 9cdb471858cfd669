"""The model-driven simulated user (`membench transfer --user model:MODEL`) through the real
CLI, the model gateway, bubblewrap and the chDB warehouse. The model's responses are scripted: the
upstream is `membench.bench.scripted_model_server.ScriptedUpstream` answering each phase's request with a fixed
reply (no model runs on this machine), so the test shows the wiring — brief, key, gateway, recording,
replay, exclusion — not a model's judgement. The same run is then replayed from its recording with
no upstream at all and must hold the same conversation and get the same verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from membench.bus.attempts import read_log
from tests.conftest import assert_run_sets_verify, run_cli, run_cli_inprocess

pytestmark = pytest.mark.integration

KEY = "sk-user-model-test-key"
REPLIES = {
    "plan_handoff": "Hello from the model user: please build what README.md describes, house rules included.",
    "delivery_review": "The model user accepts the delivery.",
    "test_feedback": "The model user relays the hidden test results.",
    "implementing": "The model user says: follow the house rules.",
}
SCRIPT = {"sessions": [{"when": f"Phase: {phase}.", "reply": reply} for phase, reply in REPLIES.items()]}
UNITS = ("transfer-v1/settle/no_memory/1", "transfer-v1/jobqueue/no_memory/1")


def transfer_args(run_set: str, *more: str) -> list[str]:
    return ["transfer", "transfer-v1", "--agent", "scripted:refsol", "--phase", "transfer", "--conditions",
            "no_memory", "--seeds", "1", "--run-set", run_set, "--user", "model:sim-user", "--workers", "1", *more]


def events(home: Path, run_set: str) -> list:
    return [e for e, _ in read_log(home / "runs" / run_set / "events.avro")]


def by_unit(evs, kind: str, field: str | None = None) -> dict[str, list]:
    out: dict[str, list] = {u: [] for u in UNITS}
    for e in evs:
        if e.kind == kind:
            out[e.unit_id].append(e.payload if field is None else e.payload[field])
    return out


def user_turns(evs) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {u: [] for u in UNITS}
    for e in evs:
        if e.kind == "Turn" and e.payload["role"] == "simulated_user":
            out[e.unit_id].append(e.payload["text"]["text"])
    return out


def test_a_model_user_recorded_then_replayed_holds_the_same_conversation(home, bwrap_sandbox):
    from membench.bench.scripted_model_server import ScriptedUpstream

    with ScriptedUpstream(SCRIPT) as upstream:
        run_cli(*transfer_args("recorded", "--model-base-url", upstream.base_url, "--model-record"), home=home,
                check=True, env={"MEMBENCH_MODEL_API_KEY": KEY})
    recorded = events(home, "recorded")
    expected_turns = [REPLIES["plan_handoff"], REPLIES["delivery_review"], REPLIES["test_feedback"]]
    assert user_turns(recorded) == {u: expected_turns for u in UNITS}
    # each user message was one model call through the gateway, with the key the gateway added
    probe, *asked = upstream.requests  # the gateway's pre-flight probe of the --user model comes first
    assert json.loads(probe["body"])["messages"] == [{"role": "user", "content": "ping"}]
    assert len(asked) == 6
    assert {r["headers"].get("Authorization") for r in upstream.requests} == {f"Bearer {KEY}"}
    first = json.loads(asked[0]["body"])
    assert first["model"] == "sim-user" and first["messages"][0]["role"] == "system"
    assert "Scenario:" in first["messages"][0]["content"] and "Phase: plan_handoff." in first["messages"][1]["content"]
    calls = by_unit(recorded, "ModelCall")
    for unit in UNITS:
        assert [c["call_id"] for c in calls[unit]] == ["user-m1", "user-m2", "user-m3"], unit
        assert all(c["status"] == "ok" and c["recorded"] and c["mode"] == "forward" for c in calls[unit])
        assert all(c["input_tokens"] > 0 for c in calls[unit])
    verdicts = by_unit(recorded, "OracleVerdict")
    assert all(v[0]["outcome"] == "pass" and v[0]["isolation"] == "process" for v in verdicts.values())
    assert all(e.payload["status"] == "completed" for e in recorded if e.kind == "RunEnded")
    # the user's tokens are not the agent's: the session's usage is the agent's turns' alone
    agent_tokens = sum(e.payload["input_tokens"] for e in recorded if e.kind == "Turn")
    sums = run_cli("sql", "SELECT sum(input_tokens) FROM (SELECT * FROM session_results WHERE run_set = 'recorded' "
                          "LIMIT 1 BY derived_id)", home=home, check=True).stdout.split()
    assert sums == [str(agent_tokens)]

    # no upstream at all now: the user's every message comes from the recording
    run_cli(*transfer_args("replayed", "--model-replay", "recorded"), home=home, check=True)
    replayed = events(home, "replayed")
    assert user_turns(replayed) == user_turns(recorded)
    again = by_unit(replayed, "ModelCall")
    assert all([c["mode"] for c in again[u]] == ["replay"] * 3 for u in UNITS)
    assert {u: [c["response_digest"] for c in again[u]] for u in UNITS} == \
        {u: [c["response_digest"] for c in calls[u]] for u in UNITS}
    for kind, field in (("EvaluatorCase", "status"), ("OracleVerdict", "outcome"), ("PublicCheck", "passed")):
        assert by_unit(replayed, kind, field) == by_unit(recorded, kind, field), kind
    assert all(e.payload["status"] == "completed" for e in replayed if e.kind == "RunEnded")

    # another user model asks what the recording never answered: a replay miss is never an exclusion
    # (the agent's words shape the user's requests): the scripted user speaks instead, and says so
    args = transfer_args("missed", "--model-replay", "recorded")
    args[args.index("model:sim-user")] = "model:another-user"
    run_cli(*args, home=home, check=True)
    missed = events(home, "missed")
    ended = {e.unit_id: e.payload for e in missed if e.kind == "RunEnded"}
    assert ended == {u: {"status": "completed", "error_type": None} for u in UNITS}
    assert {c["status"] for cs in by_unit(missed, "ModelCall").values() for c in cs} == {"replay_miss"}
    assert [e for e in missed if e.kind == "Turn" and e.payload["source_kind"] == "simulated_user_fallback"]
    assert_run_sets_verify(home, "recorded", "replayed", "missed")


def test_an_unavailable_user_model_excludes_the_unit(home, bwrap_sandbox):
    from membench.bench.scripted_model_server import ScriptedUpstream

    with ScriptedUpstream(SCRIPT, status=503) as upstream:
        run_cli(*transfer_args("down", "--model-base-url", upstream.base_url), home=home, check=True,
                env={"MEMBENCH_MODEL_API_KEY": KEY})
    evs = events(home, "down")
    ended = {e.unit_id: e.payload for e in evs if e.kind == "RunEnded"}
    assert ended == {u: {"status": "excluded", "error_type": "model_unavailable"} for u in UNITS}
    assert not [e for e in evs if e.kind in ("EvaluatorCase", "OracleVerdict")]  # never scored
    assert all(c["status"] == "upstream_error" for cs in by_unit(evs, "ModelCall").values() for c in cs)
    rows = run_cli("sql", "SELECT task, exclusion_reason FROM transfer_results WHERE run_set = 'down' "
                          "ORDER BY task LIMIT 1 BY derived_id", "--format", "JSONEachRow", home=home,
                   check=True).stdout.splitlines()
    assert [json.loads(r) for r in rows] == [{"task": "jobqueue", "exclusion_reason": "model_unavailable"},
                                             {"task": "settle", "exclusion_reason": "model_unavailable"}]


def test_a_model_user_needs_an_upstream_or_a_recording(home):
    proc = run_cli_inprocess("transfer", "transfer-v1", "--user", "model:sim-user", home=home)
    assert proc.returncode == 2 and "--user model:sim-user: a model user needs --model-base-url" in proc.stderr
    proc = run_cli_inprocess("transfer", "transfer-v1", "--user", "human", home=home)
    assert proc.returncode == 2 and "--user: unknown simulated user 'human'" in proc.stderr
    assert not (home / "runs").exists()
