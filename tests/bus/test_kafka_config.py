"""One place builds the confluent-kafka client configs (`membench/bus/kafka_config.py`): the shared
settings of each client kind, and a caller's own settings on top."""

from __future__ import annotations

from membench.bus.kafka_config import admin_config, consumer_config, producer_config, reader_config


def test_a_producer_is_idempotent_and_acknowledged_by_every_replica():
    config = producer_config("b:9092")
    assert config["bootstrap.servers"] == "b:9092"
    assert config["enable.idempotence"] is True and config["acks"] == "all"
    assert config["compression.type"] == "none"


def test_a_caller_adds_its_own_settings_and_they_win():
    def on_delivery(err, msg):
        pass

    config = producer_config("b:9092", {"message.timeout.ms": 5000, "on_delivery": on_delivery, "linger.ms": 20})
    assert config["message.timeout.ms"] == 5000 and config["on_delivery"] is on_delivery
    assert config["linger.ms"] == 20 and config["acks"] == "all"
    consumer = consumer_config("b:9092", "g", {"max.poll.interval.ms": 600_000})
    assert consumer["max.poll.interval.ms"] == 600_000 and consumer["group.id"] == "g"


def test_consumers_commit_explicitly_start_at_the_beginning_and_read_committed_records():
    for config in (consumer_config("b:9092", "g"), reader_config("b:9092", "g")):
        assert config["bootstrap.servers"] == "b:9092" and config["group.id"] == "g"
        assert config["enable.auto.commit"] is False
        assert config["auto.offset.reset"] == "earliest"
        assert config["isolation.level"] == "read_committed"


def test_a_reader_does_not_wait_for_a_fetch_to_fill():
    assert reader_config("b:9092", "g")["fetch.wait.max.ms"] == 10
    assert "fetch.wait.max.ms" not in consumer_config("b:9092", "g")
    assert reader_config("b:9092", "g", {"fetch.wait.max.ms": 100})["fetch.wait.max.ms"] == 100


def test_configs_are_fresh_dicts():
    first = consumer_config("b:9092", "g")
    first["enable.auto.commit"] = True
    assert consumer_config("b:9092", "g")["enable.auto.commit"] is False
    assert admin_config("b:9092") == {"bootstrap.servers": "b:9092"}
