"""One unit of the smoke pack run in-process by the real runner, with an in-process test agent that
does what a test tells it — what the hostile-agent and harness-fault tests drive the runner with."""

from __future__ import annotations

from membench.processors import derive_all
from membench.agents.base import AgentOutcome
from membench.reports.conventions import run_summary_row
from membench.runner.grid import RunConfig, RunUnit, run_unit
from membench.schemas.events import bounded_text

SEQ = "smoke-currency"


class WorkAgent:
    """An in-process test agent: says something, then does `work(task, session_index)`."""

    kind = "scripted"

    def __init__(self, work, name: str = "test:hostile"):
        self.work, self.name = work, name

    def act(self, task, emitter):
        emitter.emit("Turn", {"role": "agent", "text": bounded_text("working"), "source_event_id": None,
                              "source_kind": None, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 1,
                              "reasoning_tokens": 0, "latency_ms": 0})
        self.work(task, emitter.session_index)
        return AgentOutcome()


def run_smoke_unit(pack, sandbox, agent, tmp_path, condition: str = "B0"):
    """(events, the run's `run_results` row, {session index: FailureClassified payload}) of SEQ under CONDITION, seed 1."""
    events = []
    run_unit(pack, RunUnit("smoke", SEQ, condition, 1),
             RunConfig("rs", agent.name, oracle_timeout_s=60, blob_dir=tmp_path / "blobs"),
             sandbox, lambda event, datum: events.append(event), agent=agent)
    derived = derive_all(events)
    summary = run_summary_row(next(d for d in derived if d.kind == "RunSummary"))
    failures = {d.payload["session_index"]: d.payload for d in derived if d.kind == "FailureClassified"}
    return events, summary, failures
