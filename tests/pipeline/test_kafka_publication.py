"""A run set published to Kafka from this process (`pipeline/distributed/publication.py`), against a
stand-in bus: which units it skips, the attempt each gets, what it marks, what it says at the end.
The broker end to end: tests/integration/test_kafka_pipeline.py, test_transfer_kafka.py."""

from __future__ import annotations

import producers.bus.kafka as kafka_bus
from pipeline.distributed.publication import KafkaPublication
from pipeline.settings import Settings
from producers.grid import RunUnit, run_id_for
from schemas.topics import topics_from_dsn


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
    publication.publish("event", b"datum")
    publication.completed(todo[1], "run-b")
    assert publication.bus.published == [("event", b"datum")]
    assert publication.bus.marks[-1] == ("s/t/B1/2", "completed", "run-b", 1)

    from rich.console import Console

    publication.close(Console(stderr=True))
    assert publication.bus.closed
    out, err = capsys.readouterr()
    assert out == "rs\n"
    assert "published run set rs; when `membench sink --until-idle` has drained the topics, " \
           "`membench report rs` builds the report" in " ".join(err.split())
