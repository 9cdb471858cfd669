"""The verdict fold from hand-built events: pass, exclusion, tokens, tools, patches, durations."""

import dataclasses

import pytest

from membench.processors import RunSetProcessor, derive_all
from membench.bus.emitter import RunEmitter
from membench.schemas.events import bounded_text


def _turn(role="agent", inp=0, out=0, cached=0, reasoning=0):
    return {"role": role, "text": bounded_text("t"), "source_event_id": None, "source_kind": None,
            "input_tokens": inp, "cached_tokens": cached, "output_tokens": out, "reasoning_tokens": reasoning,
            "latency_ms": 0}


def build_run(outcomes=("pass", "pass", "fail"), run_id="r1", status="completed", error_type=None):
    emitted = []
    em = RunEmitter("rs", run_id, "suite/task/B5/1", lambda e, d: emitted.append(e))
    em.emit("RunStarted", {"suite": "suite", "task": "task", "condition": "B5", "seed": 1, "agent": "scripted:x",
                           "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                           "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1})
    for i, outcome in enumerate(outcomes, start=1):
        em.session_index = i
        em.emit("SessionStarted", {"session_index": i, "instruction": bounded_text("do"), "start_state": "continuation",
                                   "workspace_digest": "w", "scored": i == len(outcomes), "oracle_id": f"o{i}"})
        em.emit("Turn", _turn("agent", inp=100, out=10, cached=5, reasoning=1))
        em.emit("MemoryRead", {"query": bounded_text("q"), "candidates": ["m1"], "admitted_ids": ["m1"],
                               "tokens_admitted": 7, "token_budget": 100, "context": bounded_text("[m1] x")})
        em.emit("ToolCall", {"call_id": "c1", "name": "write_file", "arguments_digest": "a", "is_patch": True})
        em.emit("ToolCall", {"call_id": "c2", "name": "grep", "arguments_digest": "a", "is_patch": False})
        em.emit("ContextCompaction", {"tokens_before": 10, "tokens_after": 5})
        em.emit("OracleVerdict", {"oracle_id": f"o{i}", "outcome": outcome, "cases": [], "exit_status": 0,
                                  "inconclusive": False, "duration_ms": 1}, visibility="harness")
        em.emit("SessionEnded", {"session_index": i, "status": "completed"})
    em.session_index = -1
    em.emit("RunEnded", {"status": status, "error_type": error_type}, visibility="harness")
    return emitted


def test_session_verdicts_and_run_summary():
    derived = derive_all(build_run())
    sessions = [d for d in derived if d.kind == "SessionVerdict"]
    summary = [d for d in derived if d.kind == "RunSummary"]
    assert [s.payload["passed"] for s in sessions] == [True, True, False]
    assert [s.payload["scored"] for s in sessions] == [False, False, True]
    one = sessions[0].payload
    assert (one["input_tokens"], one["output_tokens"], one["cached_tokens"], one["reasoning_tokens"]) == (100, 10, 5, 1)
    assert (one["tool_calls"], one["patch_invocations"], one["compactions"]) == (2, 1, 1)
    assert (one["memory_reads"], one["memory_tokens_admitted"]) == (1, 7)
    run = summary[0].payload
    assert run["scored_passed"] is False and run["sessions"] == 3 and run["excluded"] is False
    assert run["tool_calls"] == 6 and run["input_tokens"] == 300
    assert run["condition"] == "B5" and run["task"] == "task" and run["seed"] == 1


def test_scored_pass_passes_the_run():
    run = [d for d in derive_all(build_run(("fail", "fail", "pass"))) if d.kind == "RunSummary"][0]
    assert run.payload["scored_passed"] is True


@pytest.mark.parametrize("outcome", ["isolation_unavailable", "harness_fault"])
def test_a_fault_proven_on_the_base_checkout_is_excluded_never_a_pass(outcome):
    derived = derive_all(build_run((outcome,), status="excluded", error_type=outcome))
    run = [d for d in derived if d.kind == "RunSummary"][0].payload
    assert run["excluded"] is True and run["scored_passed"] is False
    assert run["exclusion_reason"] == outcome
    (session,) = [d.payload for d in derived if d.kind == "SessionVerdict"]
    assert session["excluded"] and session["exclusion_reason"] == outcome


def test_derived_ids_are_deterministic_across_replays():
    events = build_run()
    first = [d.derived_id for d in derive_all(events)]
    second = [d.derived_id for d in derive_all(events)]
    assert first == second and len(set(first)) == len(first)


def test_interleaved_runs_fold_separately():
    a, b = build_run(run_id="a"), build_run(("pass", "pass", "pass"), run_id="b")
    mixed = [e for pair in zip(a, b) for e in pair]
    runs = {d.run_id: d.payload["scored_passed"] for d in derive_all(mixed) if d.kind == "RunSummary"}
    assert runs == {"a": False, "b": True}


def test_a_run_missing_an_event_is_held_open_not_folded_wrongly():
    events = build_run()
    processor = RunSetProcessor()
    out = []
    for event in events[1:]:  # RunStarted lost
        out.extend(processor.apply(event))
    assert out == []
    assert processor.open_runs() == ["r1"] and processor.waiting("r1") == len(events) - 1
    out = processor.apply(events[0])  # it arrives late: the whole run folds, in order
    assert [d.kind for d in out].count("SessionVerdict") == 3 and processor.open_runs() == []


def test_duplicates_are_dropped_and_reordering_is_undone():
    events = build_run()
    shuffled = events[:3] + [events[4], events[3]] + events[2:]  # a swap and redeliveries
    processor = RunSetProcessor()
    derived = [d for e in shuffled for d in processor.apply(e)]
    assert [d.comparable() for d in derived] == [d.comparable() for d in derive_all(events)]
    assert processor.duplicates == 3  # the second copies of seq 2, 3 and 4


def test_a_malformed_event_goes_to_dead_letters_and_the_stream_goes_on():
    events = build_run()
    broken = dataclasses.replace(events[1], payload={"session_index": 1})  # SessionStarted without fields
    processor = RunSetProcessor()
    out = [d for e in [events[0], broken, *events[2:]] for d in processor.apply(e)]
    assert processor.dead_letters and processor.dead_letters[0].seq == 1
    assert any(d.kind == "RunSummary" for d in out)


def test_an_abandoned_attempt_is_excluded_even_when_its_trap_had_passed():
    """A crashed runner's attempt, closed by the next run (RunEnded status `abandoned`), is never a
    cell: excluded with its reason, not a pass even if its scored session passed before the crash."""
    derived = derive_all(build_run(outcomes=("pass", "pass", "pass"), status="abandoned",
                                   error_type="abandoned_attempt"))
    run = [d for d in derived if d.kind == "RunSummary"][0].payload
    assert run["status"] == "abandoned"
    assert run["excluded"] is True and run["exclusion_reason"] == "abandoned_attempt"
    assert run["scored_passed"] is False


def _model_call(call_id, tokens):
    return {"call_id": call_id, "provider": "openai", "api": "chat_completions", "model": "m", "mode": "forward",
            "status": "ok", "http_status": 200, "request_digest": "r", "match_digest": "", "response_digest": None,
            "recorded": False, "streamed": False, "chunks": 0, "input_tokens": tokens, "cached_tokens": 0,
            "output_tokens": tokens, "reasoning_tokens": 0, "latency_ms": 1, "first_byte_ms": 1, "cost_usd": 0.0,
            "price": None, "error": None}


def test_a_simulated_users_model_calls_are_not_the_agents_usage():
    """A transfer model user's calls (call_id `user-…`) stay out of the session's tokens and of the
    largest agent prompt the context evidence sees; the agent's own calls count."""
    run = build_run(("pass",))
    at = next(i for i, e in enumerate(run) if e.kind == "OracleVerdict")
    rebuilt = []
    em = RunEmitter("rs", "r2", "suite/task/B5/1", lambda e, d: rebuilt.append(e))
    for i, e in enumerate(run):
        if i == at:
            em.emit("ModelCall", _model_call("m1", 40), visibility="harness")
            em.emit("ModelCall", _model_call("user-m1", 5000), visibility="harness")
        em.session_index = e.session_index
        em.emit(e.kind, e.payload, visibility=e.visibility)
    (session,) = [d.payload for d in derive_all(rebuilt) if d.kind == "SessionVerdict"]
    assert (session["input_tokens"], session["output_tokens"]) == (100 + 40, 10 + 40)
