"""What an agent sends through the model gateway can fail its session, never exclude its cell. Real
runner, real smoke pack, real gateway against the scripted model server (which answers 429
"Request too large … tokens per min" to the requests the test marks, as a provider answers one
request over the key's per-minute limit), real processors, scoring in real bubblewrap.

(a) In the session it is going to fail, the agent sends one oversized request. Defended: the
    gateway retries, its probe of the configured model is answered, so the 429 is the request's own:
    the cell is scored as the agent's failure (`model_request_failed`), nothing is excluded. The
    control, the defence bypassed (the probe made to fail as well — which is also what a genuine
    outage looks like): the same request excludes the unit.
(b) Through the memory model, after the scored session: the agent's last turn makes B3-llm's
    post-S3 reflection request too large. Defended: the policy's own failure (stores nothing, says
    why), the recorded S3 verdict stands. Even a genuine outage after the verdict only leaves a note.
    The control: the same outage before the scored session excludes the unit.
(c) Under `--model-replay`, a request the recording does not hold is the agent's divergence.
"""

from __future__ import annotations

import http.client
import json
import socket

import pytest

import membench.gateway.preflight as preflight
from membench.bench.scripted_model_server import ScriptedUpstream
from membench.processors import derive_all
from membench.agents.base import AgentOutcome
from membench.gateway.preflight import Target
from membench.gateway.recording import Recording
from membench.gateway.server import GatewaySettings, ModelGateway
from membench.runner.grid import AFTER_VERDICT, RunConfig, RunUnit, run_unit
from membench.packs.pack_resolver import open_pack
from membench.reports.conventions import exclusion_of, run_summary_row, valid_run
from membench.schemas.events import bounded_text

pytestmark = pytest.mark.integration

SEQ = "smoke-currency"
MARKER = "PADDING-OVER-THE-TPM-LIMIT"  # the scripted provider answers 429 "Request too large" to a body holding it
AGENT = Target("openai", "chat_completions", "gpt-4o-mini", "agent", "--agent openai:gpt-4o-mini")
MEMORY = Target("openai", "chat_completions", "mem-model", "memory", "--memory-model mem-model")


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    return open_pack("smoke", tmp_path_factory.mktemp("home"))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str):
        super().__init__("gateway", timeout=60)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


class HostileAgent:
    """Changes nothing in the workspace (it fails every session); in the chosen session it calls the
    model through its own gateway channel, as a sandboxed model agent's relay would, with `prompt`;
    it says `said` in its last turn (what a memory policy reads). A channel failure is raised after
    the session, as membench/agents/model_agents.py does."""

    name = "test:hostile"
    kind = "command"

    def __init__(self, session: int, prompt: str = "hello", said: str = "done"):
        self.session, self.prompt, self.said = session, prompt, said

    def act(self, task, emitter):
        failure = None
        if emitter.session_index == self.session:
            with task.gateway.open_channel(emitter.unit_id, emitter.emit) as channel:
                connection = _UnixConnection(str(channel.socket_path))
                body = {"model": AGENT.model, "messages": [{"role": "user", "content": self.prompt}]}
                connection.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                                   headers={"Content-Type": "application/json"})
                connection.getresponse().read()
                connection.close()
            failure = channel.failure
        emitter.emit("Turn", {"role": "agent", "text": bounded_text(self.said), "source_event_id": None,
                              "source_kind": None, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 1,
                              "reasoning_tokens": 0, "latency_ms": 0})
        if failure is not None:
            raise failure
        return AgentOutcome()


def _run(pack, sandbox, agent, gateway, tmp_path, condition="B0", memory_model=None):
    events = []
    run_unit(pack, RunUnit("smoke", SEQ, condition, 1),
             RunConfig("rs", agent.name, oracle_timeout_s=60, blob_dir=tmp_path / "blobs", gateway=gateway,
                       memory_model=memory_model),
             sandbox, lambda event, datum: events.append(event), agent=agent)
    derived = derive_all(events)
    summary = run_summary_row(next(d for d in derived if d.kind == "RunSummary"))
    failures = {d.payload["session_index"]: d.payload for d in derived if d.kind == "FailureClassified"}
    return events, summary, failures


def _probe_fails(monkeypatch):
    """The defence bypassed: the gateway's probe carries the marker, so the provider refuses it too —
    exactly what the probe meets in a genuine outage of the configured model."""
    real = preflight.probe_body
    monkeypatch.setattr(preflight, "probe_body", lambda api, model: real(api, model).replace(b"ping", MARKER.encode()))


def _calls(events, purpose):
    return [e.payload for e in events if e.kind == "ModelCall" and e.payload["purpose"] == purpose]


@pytest.mark.parametrize("defended", [True, False], ids=["defended", "probe-fails"])
def test_a_request_too_large_in_a_session_the_agent_fails_is_its_failure_not_an_exclusion(
        pack, bwrap_sandbox, tmp_path, monkeypatch, defended):
    if not defended:
        _probe_fails(monkeypatch)
    with ScriptedUpstream(too_large=MARKER) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}, {"openai": "sk-test-attack-a"}),
                               targets=[AGENT])
        events, summary, failures = _run(pack, bwrap_sandbox, HostileAgent(3, prompt=MARKER * 50), gateway, tmp_path)
    (call,) = _calls(events, "agent")
    assert call["http_status"] == 429 and "Request too large" in call["error"]
    assert len(upstream.requests) == 3 + 1  # the call and its two retries, then the gateway's probe
    if defended:
        assert call["status"] == "request_failed"
        assert valid_run(summary) and summary.scored_passed is False and not summary.excluded
        assert (failures[3]["failure_reason"], failures[3]["rule"]) == ("invalid_agent_output", "model_request_failed")
        assert events[-1].payload == {"status": "completed", "error_type": None}
    else:  # the attack's effect when the probe cannot tell the request from the model: the cell leaves
        assert call["status"] == "upstream_error"
        assert exclusion_of(summary) == "model_unavailable" and 3 not in failures
        assert events[-1].payload == {"status": "excluded", "error_type": "model_unavailable"}


def test_an_unreachable_upstream_still_excludes(pack, bwrap_sandbox, tmp_path):
    """The legitimate exclusion: nothing answers, the gateway's probe included."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    gateway = ModelGateway(GatewaySettings({"*": f"http://127.0.0.1:{port}/v1"}), targets=[AGENT])
    events, summary, _ = _run(pack, bwrap_sandbox, HostileAgent(3), gateway, tmp_path)
    assert [c["status"] for c in _calls(events, "agent")] == ["upstream_unreachable"]
    assert exclusion_of(summary) == "model_unavailable"
    (note,) = [e.payload["text"]["text"] for e in events if e.kind == "Turn" and e.payload["role"] == "system"]
    assert "probe failed too" in note and f"127.0.0.1:{port}" in note


@pytest.mark.parametrize("session,outage", [(3, False), (3, True), (1, True)],
                         ids=["after-verdict", "after-verdict-outage", "control-before-verdict-outage"])
def test_a_memory_write_after_the_scored_verdict_cannot_exclude_the_cell(
        pack, bwrap_sandbox, tmp_path, monkeypatch, session, outage):
    if outage:
        _probe_fails(monkeypatch)
    agent = _SaysInSession(session, MARKER * 50)
    with ScriptedUpstream(too_large=MARKER) as upstream:
        gateway = ModelGateway(GatewaySettings({"*": upstream.base_url}), targets=[MEMORY])
        events, summary, failures = _run(pack, bwrap_sandbox, agent, gateway, tmp_path, condition="B3-llm",
                                         memory_model=MEMORY.model)
    refused = [c for c in _calls(events, "sleep") if c["http_status"] == 429]
    assert len(refused) == 1 and "Request too large" in refused[0]["error"]
    if session == 1:  # the control: the same outage before the scored session excludes the unit
        assert exclusion_of(summary) == "model_unavailable" and 3 not in failures
        return
    assert valid_run(summary) and not summary.excluded and summary.scored_passed is False
    assert failures[3]["failure_reason"] is not None and not failures[3]["excluded"]  # the recorded S3 verdict
    assert events[-1].payload == {"status": "completed", "error_type": None}
    notes = [(e.payload["source_kind"], e.payload["text"]["text"]) for e in events
             if e.kind == "Turn" and e.payload["role"] == "system"]
    if outage:  # the model is down, after the verdict: a note, the cell stands
        assert refused[0]["status"] == "upstream_error"
        assert [text for kind, text in notes if kind == AFTER_VERDICT and "model_unavailable" in text]
    else:  # the probe is answered: the policy's own failure, it stores nothing from that session
        assert refused[0]["status"] == "request_failed"
        assert [text for kind, text in notes if kind == "memory_policy_error" and "HTTP 429" in text]
        assert AFTER_VERDICT not in {kind for kind, _ in notes}


class _SaysInSession(HostileAgent):
    """Calls no model; says `text` in the chosen session's last turn (what B3-llm reflects on)."""

    def __init__(self, session: int, text: str):
        super().__init__(session=-1)
        self.chosen, self.text = session, text

    def act(self, task, emitter):
        self.said = self.text if emitter.session_index == self.chosen else "done"
        return super().act(task, emitter)


def test_a_request_the_replay_does_not_hold_is_the_agents_divergence(pack, bwrap_sandbox, tmp_path):
    """Under --model-replay an agent could vary its prompt in the cells it wants removed: a miss is
    its own failure, reported on its ModelCall and by the failure taxonomy, never an exclusion."""
    gateway = ModelGateway(GatewaySettings(), blob_dir=tmp_path / "blobs",
                           replay=Recording(tmp_path / "blobs", {}, "rs-recorded"), targets=[AGENT])
    events, summary, failures = _run(pack, bwrap_sandbox, HostileAgent(3, prompt="a prompt never recorded"),
                                     gateway, tmp_path)
    (call,) = _calls(events, "agent")
    assert (call["status"], call["mode"], call["http_status"]) == ("replay_miss", "replay", 400)
    assert valid_run(summary) and not summary.excluded
    assert (failures[3]["failure_reason"], failures[3]["rule"]) == ("invalid_agent_output", "model_replay_diverged")
