"""The viewer's log tail (membench/viewer/tail.py) over logs written here, and the synthetic runs the
other viewer tests share: sealed events of realistic runs, appended block by block like the
embedded pipeline does."""

from __future__ import annotations

import dataclasses
import io
import uuid
from pathlib import Path

import fastavro
import pytest

from membench.viewer.tail import LogTail
from membench.bus.attempts import read_log
from membench.bus.ocf import OcfAppender
from membench.bus.emitter import RunEmitter
from membench.schemas.codec import encode_datum
from membench.schemas.events import bounded_text
from membench.schemas.registry import default_registry

SCHEMA = default_registry().latest("event")


def _turn(role: str, text: str, tokens: tuple[int, int] = (0, 0), source: str | None = None) -> dict:
    return {"role": role, "text": bounded_text(text), "source_event_id": source, "source_kind": "review" if source else None,
            "input_tokens": tokens[0], "cached_tokens": 0, "output_tokens": tokens[1], "reasoning_tokens": 0,
            "latency_ms": 5}


def _model_call(n: int) -> dict:
    return {"call_id": f"mc-{n}", "provider": "openai", "api": "chat", "model": "test-model", "mode": "live",
            "status": "ok", "http_status": 200, "request_digest": "a" * 64, "match_digest": "b" * 64,
            "response_digest": "c" * 64, "recorded": False, "streamed": True, "chunks": 3, "input_tokens": 100,
            "cached_tokens": 10, "output_tokens": 20, "reasoning_tokens": 0, "latency_ms": 250, "first_byte_ms": 40,
            "cost_usd": 0.0125, "price": "test", "error": None}


def emit_run(publish, run_set: str, task: str, condition: str, seed: int, outcome: str = "pass",
             end: str | None = "completed", attempt: int = 1, cut: bool | None = None,
             agent_text: str | None = None, memory_text: str = "use the header X-Test",
             patch_line: str | None = None) -> RunEmitter:
    """One unit's run of two sessions (S1 sets up evidence, S2 is scored with `outcome`), with a model
    call, a memory read and write, a patch and an oracle verdict. `end`: RunEnded status, or None to
    leave the run open (still running). `cut` (by default when `end` is excluded): S2 stops before
    its verdict, as a run does that is excluded (nothing after the scored verdict excludes).
    `agent_text`, `memory_text`, `patch_line`: the scored session's agent turn, the memory written in S1,
    the line the scored patch adds (agent-controlled text, for the viewer's search and escaping)."""
    cut = end == "excluded" if cut is None else cut
    unit_id = f"suite/{task}/{condition}/{seed}"
    run_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run_set}/{unit_id}/{attempt}"))
    em = RunEmitter(run_set, run_id, unit_id, publish)
    em.emit("RunStarted", {
        "suite": "suite", "task": task, "condition": condition, "seed": seed, "agent": "scripted:test",
        "agent_kind": "scripted", "model": None, "budgets": {"memory_read_tokens": 2000}, "code_digest": "0" * 64,
        "pack_digest": "1" * 64, "fixture_digest": "2" * 64, "skill_bank_digest": None, "attempt": attempt,
        "construct": "C1", "family": "test"}, visibility="harness")
    em.emit("OracleLabel", {"label_id": f"{task}-l1", "label_type": "required", "active_session": 2,
                            "event_ids": [f"{task}-e1"], "fact_ids": ["fact"], "detail": "{}"}, visibility="harness")
    for index, scored in ((1, False), (2, True)):
        em.session_index = index
        em.emit("SessionStarted", {"session_index": index, "instruction": bounded_text(f"do step {index} of {task}"),
                                   "start_state": "continuation", "workspace_digest": "3" * 64, "scored": scored,
                                   "oracle_id": f"o{index}"})
        em.emit("Turn", _turn("user", f"do step {index} of {task}"))
        if scored and cut:
            break
        if index == 2:
            em.emit("MemoryRead", {"query": bounded_text("step 2"), "candidates": [f"{condition}:m1", f"{condition}:m2"],
                                   "admitted_ids": [f"{condition}:m1"], "tokens_admitted": 12, "token_budget": 2000,
                                   "context": bounded_text("[m1] use the header X-Test")})
        em.emit("ModelCall", _model_call(index))
        em.emit("ToolCall", {"call_id": f"call-{index}", "name": "write_file", "arguments_digest": "4" * 64,
                             "is_patch": True})
        em.emit("ToolResult", {"call_id": f"call-{index}", "name": "write_file", "exit_code": 0, "duration_ms": 1,
                               "output_size": 2, "is_patch": True, "output": bounded_text("ok")})
        said = agent_text if scored and agent_text is not None else f"wrote step {index}"
        em.emit("Turn", _turn("agent", said, (100, 20)))
        added = patch_line if scored and patch_line is not None else f"step_{index} = True"
        diff = f"--- a/app.py\n+++ b/app.py\n@@ -1 +1,2 @@\n x = 1\n+{added}\n"
        em.emit("PatchProduced", {"files": ["app.py"], "added_lines": 1, "removed_lines": 0,
                                  "production_paths": ["app.py"], "test_paths": [], "stripped_paths": [],
                                  "diff_sha256": "5" * 64, "production_diff": diff, "production_diff_sha256": "6" * 64,
                                  "stripped_diff": None, "stripped_diff_sha256": None})
        verdict = outcome if scored else "pass"
        em.emit("OracleVerdict", {"oracle_id": f"o{index}", "outcome": verdict,
                                  "cases": [{"case_id": "test_it", "outcome": "pass" if verdict == "pass" else "fail",
                                             "duration_ms": 3}],
                                  "exit_status": 0 if verdict == "pass" else 1, "inconclusive": False, "duration_ms": 9,
                                  "isolation": "process"}, visibility="harness")
        em.emit("SessionEnded", {"session_index": index, "status": "completed"})
        if index == 1:
            review = em.emit("Turn", _turn("user", "review: use the header X-Test", source=f"{task}-e1"))
            em.emit("MemoryWrite", {"memory_id": f"{condition}:m1", "memory_type": "review", "scope": [],
                                    "provenance_event_ids": [review.event_id],
                                    "content": bounded_text(memory_text)})
    em.session_index = -1
    if end is not None:
        em.emit("RunEnded", {"status": end, "error_type": "isolation_unavailable" if end == "excluded" else
                             ("task_exception:RuntimeError" if end == "error" else None)}, visibility="harness")
    return em


def emit_run_turn_first(publish, run_set: str, task: str, condition: str, seed: int) -> None:
    """`emit_run`'s run with a harness Turn before its RunStarted (its chain intact): the shape of a
    memory library's settings turn recorded while it opened, which the processors reject."""
    emitted: list = []
    first = emit_run(lambda e, d: emitted.append(e), run_set, task, condition, seed)
    em = RunEmitter(run_set, first.run_id, first.unit_id, publish)
    em.emit("Turn", _turn("system", '{"top_k": 6}'), visibility="harness")
    for event in emitted:
        em.session_index = event.session_index
        em.emit(event.kind, event.payload, visibility=event.visibility)


class LogWriter:
    """Appends sealed events to an OCF log the way the embedded pipeline does: whole blocks, flushed."""

    def __init__(self, path: Path):
        self.path = path
        self.ocf = OcfAppender(path, SCHEMA)
        self.emitted = []

    def publish(self, event, datum) -> None:
        self.emitted.append(event)
        self.ocf.append(datum)

    def flush(self) -> None:
        self.ocf.flush()

    def close(self) -> None:
        self.ocf.close()


def write_log(path: Path, runs: list[dict]) -> LogWriter:
    """A log with each run in `runs` (kwargs of emit_run) in a block of its own."""
    writer = LogWriter(path)
    for kwargs in runs:
        emit_run(writer.publish, **kwargs)
        writer.flush()
    return writer


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "runs" / "rs" / "events.avro"
    write_log(path, [dict(run_set="rs", task="t1", condition="B0", seed=1, outcome="fail"),
                     dict(run_set="rs", task="t1", condition="B5", seed=1),
                     dict(run_set="rs", task="t2", condition="B5", seed=1)]).close()
    return path


def test_tail_reads_every_event_of_a_complete_log(log):
    tail = LogTail(log)
    poll = tail.poll()
    assert not poll.reset and tail.error is None and len(poll.blocks) == 3
    got = [e for block in poll.blocks for e in block.events]
    want = [e for e, _ in read_log(log)]
    assert [(e.run_id, e.seq, e.hash, e.payload == w.payload) for e, w in zip(got, want)] == \
        [(w.run_id, w.seq, w.hash, True) for w in want]
    assert tail.pending_bytes == 0 and tail.offset == log.stat().st_size
    assert tail.poll().blocks == []  # nothing new
    assert [e.seq for e in tail.read_block(poll.blocks[1].offset)] == [e.seq for e in poll.blocks[1].events]


def test_tail_waits_for_a_partially_written_block_then_reads_it(log, tmp_path):
    data = log.read_bytes()
    tail = LogTail(log)
    offsets = [b.offset for b in tail.poll().blocks]
    growing = tmp_path / "growing.avro"
    cut = offsets[2] + (len(data) - offsets[2]) // 2  # the last block half written
    growing.write_bytes(data[:cut])
    tail = LogTail(growing)
    first = tail.poll()
    assert len(first.blocks) == 2 and tail.error is None
    assert tail.pending_bytes == cut - offsets[2]
    for end in (offsets[2] + 1, offsets[2] + 3, len(data) - 1):  # byte by byte, up to the sync marker
        growing.write_bytes(data[:end])
        assert tail.poll().blocks == [] and tail.error is None
    with open(growing, "ab") as handle:
        handle.write(data[len(data) - 1:])
    second = tail.poll()
    assert not second.reset and [b.offset for b in second.blocks] == [offsets[2]]
    assert tail.pending_bytes == 0 and tail.events == sum(1 for _ in read_log(log))


def test_tail_follows_an_appender_block_by_block(tmp_path):
    path = tmp_path / "events.avro"
    writer = LogWriter(path)
    tail = LogTail(path)
    assert tail.poll().blocks == []  # only the header so far
    seen = 0
    for seed in (1, 2, 3):
        emit_run(writer.publish, "rs", "t", "B0", seed)
        assert tail.poll().blocks == []  # buffered in the writer, not in the file yet
        writer.flush()
        blocks = tail.poll().blocks
        assert len(blocks) == 1
        seen += len(blocks[0].events)
    writer.close()
    assert seen == len(writer.emitted)


def test_a_replaced_log_is_read_again_from_its_start(log, tmp_path):
    tail = LogTail(log)
    assert len(tail.poll().blocks) == 3
    replacement = tmp_path / "other.avro"
    write_log(replacement, [dict(run_set="rs", task="t9", condition="B0", seed=7)]).close()
    replacement.replace(log)
    poll = tail.poll()
    assert poll.reset and len(poll.blocks) == 1 and poll.blocks[0].events[0].unit_id == "suite/t9/B0/7"


def test_a_damaged_block_stops_the_tail_and_names_its_offset(log):
    tail = LogTail(log)
    offsets = [b.offset for b in tail.poll().blocks]
    data = bytearray(log.read_bytes())
    data[offsets[2] - 1] ^= 0xFF  # the sync marker closing block 2
    log.write_bytes(bytes(data))
    fresh = LogTail(log)
    poll = fresh.poll()
    assert [b.offset for b in poll.blocks] == offsets[:1]
    assert fresh.error == f"damaged block at byte {offsets[1]} (sync marker does not match)"


def test_not_an_avro_file(tmp_path):
    path = tmp_path / "events.avro"
    path.write_bytes(b"hello world, not avro")
    tail = LogTail(path)
    assert tail.poll().blocks == [] and tail.error == "not an Avro object container file"


def test_deflate_logs_from_other_writers_are_read(tmp_path):
    """Any Avro writer's container file: here fastavro's, deflate-compressed, two blocks."""
    emitted = []
    emit_run(lambda e, d: emitted.append(e), "rs", "t", "B0", 1)
    buffer = io.BytesIO()
    records = [dataclasses.replace(e).to_record() for e in emitted]
    fastavro.writer(buffer, SCHEMA.schema_json, records, codec="deflate", sync_interval=2000)
    path = tmp_path / "events.avro"
    path.write_bytes(buffer.getvalue())
    tail = LogTail(path)
    got = [e for b in tail.poll().blocks for e in b.events]
    assert tail.error is None and [e.hash for e in got] == [e.hash for e in emitted]
    assert all(encode_datum(tail.schema, e.to_record()) for e in got)
