"""Helpers for the integration tests against the real Kafka broker(s) started by deploy/kafka."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from membench.bus.kafka_read import consumer_group_caught_up  # noqa: F401 - the tests' wait for the processors
from tests.conftest import REPO, skip_or_fail

SINGLE = "127.0.0.1:9092"
CLUSTER = "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"


def reachable(bootstrap: str) -> bool:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def require_broker(bootstrap: str = SINGLE) -> None:
    if reachable(bootstrap):
        return
    message = f"no Kafka broker at {bootstrap}; start it with deploy/kafka/start.sh (deploy/services.sh start)"
    skip_or_fail(message)


def namespace() -> str:
    return "t" + uuid.uuid4().hex[:10]


def membench(*args: str, home: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "MEMBENCH_HOME": str(home), **kwargs.pop("env", {})}
    return subprocess.Popen([sys.executable, "-m", "membench", *args], env=env, cwd=str(home.parent),
                            stdout=kwargs.pop("stdout", subprocess.PIPE), stderr=kwargs.pop("stderr", subprocess.PIPE),
                            text=True, start_new_session=True, **kwargs)


ENGINES = ("kafka", "faust")  # `membench process --engine`: the acceptance tests run on both


class Worker:
    """A `membench process` worker in its own process group."""

    def __init__(self, dsn: str, home: Path, log: Path, engine: str = "kafka"):
        self.log = open(log, "a")
        self.proc = membench("process", "--engine", engine, "--bus", dsn, home=home, stdout=self.log,
                             stderr=subprocess.STDOUT)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def topic_size(bootstrap: str, topic: str) -> int:
    """Messages in the topic (0 while it does not exist or elects leaders)."""
    from confluent_kafka import KafkaException

    try:
        return _topic_size(bootstrap, topic)
    except (KafkaException, KeyError):
        return 0


def _topic_size(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "size-probe"})
    try:
        meta = consumer.list_topics(topic, timeout=20)
        total = 0
        for p in meta.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)
            total += high - low
        return total
    finally:
        consumer.close()


CONSOLE_CONSUMER = REPO / "deploy" / "kafka" / "console-consumer.sh"
