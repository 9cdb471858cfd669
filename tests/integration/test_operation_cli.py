"""Operating membench unattended, through the real CLI: progress lines when the output is redirected,
one-line errors for an unreachable bus or warehouse, "did you mean" for misspelt names."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
import time

import pytest

from membench.bus.kafka import probe_brokers
from tests.integration.kafka_helpers import SINGLE, require_broker

pytestmark = pytest.mark.integration


def test_a_redirected_run_prints_progress_lines_with_the_counts(cli, home):
    # captured output is not a terminal: the rich bar draws nothing between its frames there;
    # a tenth of a second, as the six smoke units score in about a second on the fast oracle runner
    proc = cli("run", "smoke", "--conditions", "B0,B5", "--seeds", "1", check=True,
               env={"MEMBENCH_PROGRESS_INTERVAL": "0.1"})
    lines = [line for line in proc.stderr.splitlines() if line.startswith("progress: ")]
    assert len(lines) >= 2, proc.stderr  # at least one periodic line and the final one
    assert re.match(r"progress: \d/6 units \(\d+%\) · passed \d · excluded \d · [\d.]+ units/min", lines[0])
    run_set = re.search(r"run set (\S+):", proc.stderr).group(1)
    report = json.loads((home / "runs" / run_set / "report.json").read_text())
    passed = sum(c["passed"] for c in report["conditions"])
    excluded = sum(c["excluded"] for c in report["conditions"])
    assert lines[-1].startswith(f"progress: 6/6 units (100%) · passed {passed} · excluded {excluded} · ")
    cli("replay", str(home / "runs" / run_set / "events.avro"), "--verify", check=True)


@pytest.mark.parametrize("args, wanted", [
    (("run", "smok"), "unknown pack 'smok': not a directory and not a built-in pack; did you mean 'smoke'?"),
    (("run", "smoke", "--conditions", "B0,b5"), "unknown condition 'b5'; did you mean 'B5'?"),
    (("run", "smoke", "--conditions", "DF-hybird"), "unknown condition 'DF-hybird'; did you mean 'DF-hybrid'?"),
    (("run", "smoke", "--agent", "scripted:memory-litral"),
     "unknown agent 'scripted:memory-litral'; did you mean 'scripted:memory-literal'?"),
    (("memory", "check", "B55"), "unknown condition 'B55'; did you mean 'B5'?"),
])
def test_a_misspelt_name_gets_the_nearest_known_one(cli_inproc, args, wanted):
    proc = cli_inproc(*args)
    assert proc.returncode == 2
    assert wanted in proc.stderr


def test_a_name_near_nothing_gets_no_suggestion(cli_inproc):
    proc = cli_inproc("run", "smoke", "--conditions", "zzzz")
    assert proc.returncode == 2
    assert "unknown condition 'zzzz' (known: " in proc.stderr and "did you mean" not in proc.stderr


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on: bound, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("option, name, fix", [
    ("--bus", "the Kafka bus", "deploy/kafka/start.sh"),
    ("--warehouse", "the ClickHouse server", "use the embedded warehouse"),
])
def test_an_unreachable_service_is_one_line_and_exit_2(cli, option, name, fix):
    port = _closed_port()
    dsn = f"kafka://127.0.0.1:{port}" if option == "--bus" else f"http://127.0.0.1:{port}"
    started = time.monotonic()
    proc = cli("run", "smoke", "--seeds", "1", option, dsn, timeout=60)
    assert time.monotonic() - started < 20
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # no librdkafka log, no traceback
    assert f"{name} at " in lines[0] and f"127.0.0.1:{port} is unreachable (Connection refused)" in lines[0]
    assert fix in lines[0]


def test_a_listener_that_is_not_kafka_is_reported_within_the_timeout():
    # accepts TCP but never answers Kafka's metadata request: only librdkafka's probe can tell
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        started = time.monotonic()
        problem = probe_brokers(f"127.0.0.1:{listener.getsockname()[1]}", timeout=1.0)
    assert problem is not None and problem.startswith("no Kafka metadata within 1 s")
    assert time.monotonic() - started < 5


@pytest.mark.kafka
def test_the_probe_passes_a_live_broker():
    require_broker(SINGLE)
    assert probe_brokers(SINGLE) is None


def test_an_http_server_that_is_not_clickhouse_is_one_line_too(cli):
    # a real HTTP server on 127.0.0.1 that answers every request with an error status, as a wrong address may
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        proc = cli("sql", "SELECT 1", "--warehouse", f"http://127.0.0.1:{port}", timeout=60)
    finally:
        server.shutdown()
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"the ClickHouse server at http://127.0.0.1:{port} refused the connection" in lines[0]
