"""Replay's heads on disk: the log root read back from the SQLite store equals the root
over the same heads in memory, whatever order the runs ended in; replay keeps only open runs in
memory, and a fenced event of a run its processor forgot is still fenced by the store."""

from __future__ import annotations

import dataclasses
import hashlib
import random

import pytest

import membench.audit.replayer as replay_module
import membench.audit.run_heads as run_heads_module
from membench.audit.replayer import replay
from membench.audit.run_heads import RunHeads
from membench.bus.attempts import RunChain, closing_event
from membench.schemas.log_root import log_root, log_root_of_sorted
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run


def _head(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def test_the_root_read_back_from_disk_equals_the_root_in_memory(monkeypatch):
    monkeypatch.setattr(run_heads_module, "FLUSH_EVERY", 7)  # several flushes, and a pending batch at the end
    ids = [f"{random.Random(i).getrandbits(128):032x}" for i in range(60)] + ["Z-upper", "a-lower", "é-accent"]
    random.Random(3).shuffle(ids)
    store = RunHeads()
    want: dict[str, dict[str, str]] = {"rs-a": {}, "rs-b": {}}
    for i, run_id in enumerate(ids):
        run_set = "rs-a" if i % 3 else "rs-b"
        store.add(run_set, run_id, _head(i))
        want[run_set][run_id] = _head(i)
    assert ids[0] in store and ids[-1] in store and "never-seen" not in store
    assert store.counts() == {"rs-a": len(want["rs-a"]), "rs-b": len(want["rs-b"])}
    for run_set, heads in want.items():
        assert store.log_root(run_set) == log_root(heads)
        assert [r for r, _ in store.pairs(run_set)] == sorted(heads)
    directory = store.path.parent
    store.close()
    assert not directory.exists()


def test_a_workers_file_is_absorbed_whole(tmp_path):
    worker = RunHeads(tmp_path / "worker-0.sqlite")
    for i in range(5):
        worker.add("rs", f"run-{i}", _head(i))
    worker.close()
    assert (tmp_path / "worker-0.sqlite").is_file()  # a file it was given is the caller's
    parent = RunHeads()
    parent.add("rs", "run-9", _head(9))
    parent.absorb(tmp_path / "worker-0.sqlite")
    assert parent.counts() == {"rs": 6} and parent.log_root("rs") == log_root({f"run-{i}": _head(i) for i in (0, 1, 2, 3, 4, 9)})


def test_a_stream_root_refuses_pairs_out_of_order():
    with pytest.raises(ValueError, match="not sorted"):
        log_root_of_sorted([("b", _head(1)), ("a", _head(2))])
    with pytest.raises(ValueError, match="64 lowercase hex"):
        log_root_of_sorted([("a", "ABC")])


def _runs(n: int):
    return [build_run(("pass", "fail"), run_id=f"run-{i:02d}") for i in range(n)]


def _replay(events):
    schema = default_registry().latest("event")
    findings: list = []
    replayer = replay_module._Replayer(findings, None, None)
    replayer.feed_all((e, schema) for e in events)
    return replayer, findings


def test_replay_memory_holds_only_the_open_runs():
    runs = _runs(12)
    open_run = runs[5][:4]  # truncated: stays open to the end
    events = [e for i, run in enumerate(runs) for e in (open_run if i == 5 else run)]
    replayer, findings = _replay(events)
    assert set(replayer.last_seq) == set(replayer.verifier.heads()) == {"run-05"}
    assert replayer.processor.open_runs() == ["run-05"]
    replayer.finish()
    assert replayer.heads.counts() == {"rs": 12} and findings and all(f.run_id == "run-05" for f in findings)


def test_a_fenced_event_of_a_run_the_processor_forgot_is_fenced_by_the_heads_on_disk(monkeypatch):
    """A stalled runner's late events land long after the take-over closed its run: by then the
    processor's bounded window no longer holds the run, and replay must not start it anew."""
    runs = _runs(6)
    stalled = runs[0]
    chain = RunChain(stalled[0].run_set, stalled[0].run_id, stalled[0].unit_id)
    for event in stalled[:5]:
        chain.add(event)
    close = closing_event(chain.head)[0]
    late = stalled[5:]  # what the stalled runner publishes after it resumes, its own RunEnded included
    events = stalled[:5] + [close] + [e for run in runs[1:] for e in run] + late

    monkeypatch.setattr(replay_module, "PROCESSOR_ENDED_WINDOW", 2)
    result = replay([(e, default_registry().latest("event")) for e in events], findings := [])
    assert findings == []
    summary = result.run_sets[stalled[0].run_set]
    assert [seq for run_id, seq, _ in summary.fenced] == [e.seq for e in late]
    assert summary.abandoned == [(stalled[0].run_id, stalled[0].unit_id, close.seq)]
    monkeypatch.setattr(replay_module, "PROCESSOR_ENDED_WINDOW", None)
    remembered = replay([(e, default_registry().latest("event")) for e in events], [])
    assert (summary.runs, summary.log_root) == (6, remembered.log_root) and result.derived == remembered.derived


def test_an_event_filling_a_gap_after_the_runs_end_is_named_twice():
    """Seqs 16 and 17 swapped: the chain check names the gap; replay's rule fences the late event
    (the run ended at its first RunEnded read), and the processor, which orders by seq, still
    applies it, which replay names rather than hides."""
    run = build_run(("pass", "fail"), run_id="run-gap")
    ended = next(i for i, e in enumerate(run) if e.kind == "RunEnded")
    events = run[:ended - 1] + [run[ended], run[ended - 1]] + run[ended + 1:]
    schema = default_registry().latest("event")
    result = replay([(e, schema) for e in events], findings := [])
    reasons = [f.reason for f in findings]
    assert any("expected seq" in r for r in reasons), reasons
    assert any(r.startswith("the processors derived") and "filling a gap" in r for r in reasons), reasons
    assert result.run_sets["rs"].fenced == [("run-gap", run[ended - 1].seq, run[ended - 1].kind)]


def test_an_event_of_another_run_set_inside_an_open_run_is_a_finding():
    run = build_run(run_id="run-x")
    moved = [run[0]] + [dataclasses.replace(run[1], run_set="rs-other")] + run[2:]
    schema = default_registry().latest("event")
    result = replay([(e, schema) for e in moved], findings := [])
    assert any(f.run_id == "run-x" and f.seq == 1 and "run set 'rs-other'" in f.reason for f in findings)
    assert result.run_sets["rs"].runs == 1  # the run counts in the run set it started in
