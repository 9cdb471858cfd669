"""The broker from deploy/kafka/start.sh works with a real client and Kafka's own tools.

Needs a broker on 127.0.0.1:9092 (``deploy/kafka/start.sh``); override with
KAFKA_BOOTSTRAP_SERVERS. Skipped when no broker answers, except under CI=true
(set by the CI runner), where a missing broker is a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

REPO = Path(__file__).resolve().parents[2]
CONSOLE_CONSUMER = REPO / "deploy" / "kafka" / "console-consumer.sh"
BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
N_MESSAGES = 100
N_KEYS = 5


def _broker_problem() -> str | None:
    """None when a broker answers a metadata request, else why not."""
    host, _, port = BOOTSTRAP.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            pass
    except OSError as exc:
        return f"nothing listens on {host}:{port} ({exc})"
    try:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(timeout=10)
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable"
        return f"broker at {BOOTSTRAP} did not answer a metadata request ({exc})"
    return None


@pytest.fixture(scope="module")
def bootstrap() -> str:
    problem = _broker_problem()
    if problem is not None:
        msg = f"Kafka broker not reachable: {problem}. Start it with deploy/kafka/start.sh"
        skip_or_fail(msg)
    return BOOTSTRAP


@pytest.fixture()
def topic(bootstrap: str):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"membench-deploy-test-{uuid.uuid4().hex[:12]}"
    futures = admin.create_topics([NewTopic(name, num_partitions=4, replication_factor=1)])
    futures[name].result(timeout=30)
    # wait until the topic's partitions have leaders
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == 4 and all(
            p.leader >= 0 for p in md.partitions.values()
        ):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"topic {name} has no leaders after 30s")
    yield name
    admin.delete_topics([name])[name].result(timeout=30)


def _produce(bootstrap: str, topic: str) -> list[tuple[str, str]]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))

    sent = []
    for i in range(N_MESSAGES):
        key, value = f"run-{i % N_KEYS}", f"event-{i:03d}"
        producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
        producer.poll(0)
        sent.append((key, value))
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered within 30s"
    assert errors == [], errors
    return sent


def _consume(bootstrap: str, topic: str, n: int) -> list[tuple[str, str]]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"membench-deploy-test-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[str, str]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key().decode(), msg.value().decode()))
    finally:
        consumer.close()
    return got


def _by_key(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for k, v in pairs:
        out[k].append(v)
    return dict(out)


def test_idempotent_produce_consume_and_console_consumer(bootstrap: str, topic: str) -> None:
    sent = _produce(bootstrap, topic)

    got = _consume(bootstrap, topic, N_MESSAGES)
    assert len(got) == N_MESSAGES
    assert sorted(got) == sorted(sent)
    # one key -> one partition -> the order of each key's events is kept
    assert _by_key(got) == _by_key(sent)

    # Kafka's own console consumer (a non-membench client) reads the same records
    proc = subprocess.run(
        [
            "bash",
            str(CONSOLE_CONSUMER),
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            str(N_MESSAGES),
            "--timeout-ms",
            "60000",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator=|",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    console = [tuple(ln.split("|", 1)) for ln in lines]
    assert len(console) == N_MESSAGES, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert sorted(console) == sorted(sent)
    assert _by_key(console) == _by_key(sent)
