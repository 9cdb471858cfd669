"""A run set published to Kafka from this process (`membench/pipeline/distributed/publication.py`), against a
stand-in bus: which units it skips, the attempt each gets, what it marks, what it says at the end.
The broker end to end: tests/integration/test_kafka_pipeline.py, test_transfer_kafka.py."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import membench.bus.kafka as kafka_bus
from membench.pipeline.distributed.publication import KafkaPublication
from membench.pipeline.settings import Settings
from membench.runner.grid import RunUnit, run_id_for
from membench.bus.topics import topics_from_dsn


class FakeBus:
    def __init__(self, dsn, run_set, spool):
        self.topics = topics_from_dsn(dsn)
        self.spool = spool
        self.marks: list[tuple[str, str, str, int]] = []
        self.published = []
        self.closed = False

    def mark_unit(self, unit_id, status, run_id, attempt):
        self.marks.append((unit_id, status, run_id, attempt))

    def publish(self, event, datum):
        self.published.append((event, datum))

    def flush(self):
        pass

    def close(self):
        self.closed = True


def test_complete_units_are_skipped_and_the_others_marked_with_their_next_attempt(monkeypatch, tmp_path, capsys):
    status = {"s/t/B0/1": {"status": "completed", "run_id": "r", "attempt": 1},
              "s/t/B0/2": {"status": "excluded", "run_id": "r2", "attempt": 2},
              "s/t/B1/1": {"status": "started", "run_id": "r3", "attempt": 2}}
    monkeypatch.setattr(kafka_bus, "KafkaBus", FakeBus)
    monkeypatch.setattr(kafka_bus, "read_unit_status", lambda topics, run_set: status)
    settings = Settings(home=tmp_path, bus="kafka://127.0.0.1:9/ns", warehouse="chdb:///unused")
    publication = KafkaPublication(settings, "rs")
    assert publication.bus.spool == tmp_path / "runs" / "rs" / "spool"
    units = [RunUnit("s", "t", c, seed) for c in ("B0", "B1") for seed in (1, 2)]
    todo = publication.todo(units)
    assert [u.unit_id for u in todo] == ["s/t/B1/1", "s/t/B1/2"]
    publication.start(todo)
    assert publication.attempts == {"s/t/B1/1": 3, "s/t/B1/2": 1}
    assert publication.bus.marks == [("s/t/B1/1", "started", run_id_for("rs", todo[0], 3), 3),
                                     ("s/t/B1/2", "started", run_id_for("rs", todo[1], 1), 1)]
    event = _event("run-b", todo[1].unit_id, 0, "RunStarted")
    publication.publish(event, b"datum")
    publication.completed(todo[1], "run-b")
    assert publication.bus.published == [(event, b"datum")]
    assert publication.bus.marks[-1] == ("s/t/B1/2", "completed", "run-b", 1)

    from membench.pipeline.run_display import PlainLines

    publication.close(PlainLines())
    assert publication.bus.closed
    out, err = capsys.readouterr()
    assert out == ""  # the run set's id is the CLI's to print
    assert "published run set rs; when `membench sink --until-idle` has drained the topics, " \
           "`membench report rs` builds the report" in " ".join(err.split())


def _hash(run_id: str, seq: int) -> str:
    return hashlib.sha256(f"{run_id}/{seq}".encode()).hexdigest()


def _event(run_id: str, unit_id: str, seq: int, kind: str) -> SimpleNamespace:
    return SimpleNamespace(run_set="rs", run_id=run_id, unit_id=unit_id, seq=seq, hash=_hash(run_id, seq), kind=kind,
                           payload={"status": "completed"} if kind == "RunEnded" else {})


def test_a_fenced_publication_closes_the_attempts_it_began_and_left_open(monkeypatch, tmp_path):
    """A clean stop's kill on the Kafka path: after `fence` nothing of a running unit is published;
    `close_open` ends each begun attempt whose run had not ended at the next seq of its chain (seq 0
    for a run with no event), records it `abandoned`, and marks `completed` a unit whose RunEnded went
    out before the fence; a unit never begun is left unmarked (resumed as its first attempt)."""
    from membench.bus.attempts import ABANDONED_STATUS

    monkeypatch.setattr(kafka_bus, "KafkaBus", FakeBus)
    monkeypatch.setattr(kafka_bus, "read_unit_status", lambda topics, run_set: {})
    publication = KafkaPublication(Settings(home=tmp_path, bus="kafka://127.0.0.1:9/ns", warehouse="chdb:///x"), "rs")
    running, ended, silent, waiting = units = [RunUnit("s", "t", c, 1) for c in ("B0", "B1", "B2", "B3")]
    publication.start(units, mark=False)
    assert publication.bus.marks == []  # nothing marked before it starts
    runs = {u.unit_id: publication.begin(u) for u in (running, ended, silent)}
    assert [m[1] for m in publication.bus.marks] == ["started"] * 3
    for seq in range(3):
        publication.publish(_event(runs[running.unit_id], running.unit_id, seq, "Turn"), b"d")
    publication.publish(_event(runs[ended.unit_id], ended.unit_id, 0, "RunEnded"), b"d")
    publication.fence()
    publication.publish(_event(runs[running.unit_id], running.unit_id, 3, "Turn"), b"late")  # dropped
    publication.completed(running, runs[running.unit_id])  # cut short: not completed
    closed = publication.close_open()
    assert [(e.run_id, e.seq, e.prev_hash, e.payload["status"]) for e in closed] == [
        (runs[running.unit_id], 3, _hash(runs[running.unit_id], 2), ABANDONED_STATUS),
        (runs[silent.unit_id], 0, "0" * 64, ABANDONED_STATUS)]
    assert b"late" not in [d for _, d in publication.bus.published]
    assert publication.bus.marks[3:] == [(running.unit_id, "abandoned", runs[running.unit_id], 1),
                                         (ended.unit_id, "completed", runs[ended.unit_id], 1),
                                         (silent.unit_id, "abandoned", runs[silent.unit_id], 1)]
    assert waiting.unit_id not in {m[0] for m in publication.bus.marks}
