"""MemoryUseFold: a run's MemoryRead events split into the harness's read before each session (its
query is the session's instruction) and the memory tool calls the agent made during it."""

from __future__ import annotations

from membench.processors import derive_all
from membench.bus.emitter import RunEmitter
from membench.schemas.events import bounded_text


def _read(query: str, tokens: int) -> dict:
    return {"query": bounded_text(query), "candidates": [], "admitted_ids": [], "tokens_admitted": tokens,
            "token_budget": 100, "context": bounded_text("")}


def build_run(sessions: list[list[tuple[str, int]]]) -> list:
    """SESSIONS: per session, its MemoryReads as (query, tokens); every session's instruction is 'fix it'."""
    out: list = []
    em = RunEmitter("rs", "r1", "suite/task/B5/1", lambda e, d: out.append(e))
    em.emit("RunStarted", {"suite": "suite", "task": "task", "condition": "B5", "seed": 1, "agent": "scripted:x",
                           "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                           "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1})
    for i, reads in enumerate(sessions, start=1):
        em.session_index = i
        em.emit("SessionStarted", {"session_index": i, "instruction": bounded_text("fix it"),
                                   "start_state": "continuation", "workspace_digest": "w",
                                   "scored": i == len(sessions), "oracle_id": None})
        for query, tokens in reads:
            em.emit("MemoryRead", _read(query, tokens))
        em.emit("SessionEnded", {"session_index": i, "status": "completed"})
    em.session_index = -1
    em.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")
    return out


def memory_use(events) -> dict:
    (use,) = [d.payload for d in derive_all(events) if d.kind == "MemoryUse"]
    return use


def counts(use: dict) -> tuple[int, int, int, int]:
    return use["harness_reads"], use["harness_tokens_read"], use["agent_memory_calls"], use["agent_tokens_read"]


def test_the_harness_read_is_the_instruction_query_and_every_other_read_is_an_agent_call():
    use = memory_use(build_run([
        [("fix it", 30), ("search_memory: parser bug", 12), ('{"arguments": {"query": "x"}, "tool": "search"}', 5)],
        [("fix it", 20), ("get_memory: m1", 4)],
    ]))
    assert counts(use) == (2, 50, 3, 21)
    assert use["run_id"] == "r1" and use["condition"] == "B5"


def test_only_the_first_instruction_read_of_a_session_is_the_harness_s():
    # an agent whose memory tool happened to record the instruction itself, after the harness's read
    assert counts(memory_use(build_run([[("fix it", 30), ("fix it", 30)]]))) == (1, 30, 1, 30)


def test_a_run_without_memory_has_zero_counts_and_an_agent_only_run_no_harness_read():
    assert counts(memory_use(build_run([[], []]))) == (0, 0, 0, 0)
    # an MCP memory condition puts nothing into the prompt: every read is the agent's
    assert counts(memory_use(build_run([[("search_memory: a", 3)], [("search_memory: b", 0)]]))) == (0, 0, 2, 3)
