"""`membench export otel` end to end: a real run set with model calls (the built-in `openai:` loop in
bubblewrap, through the real model gateway, against the scripted upstream), exported to a real OTLP
receiver — Arize Phoenix, started here on a free loopback port — and read back through Phoenix's own
REST API; and the same spans as an OTLP JSON file.

Phoenix is not a dependency of membench (its package registers a pytest plugin that imports the
whole server into every pytest run), so it lives in a virtualenv of its own: the `phoenix`
executable named by MEMBENCH_PHOENIX, else `.venv-phoenix/bin/phoenix` in the repository, else one
on PATH."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from membench.exports.otel import span_id_of
from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.bus.attempts import read_log
from tests.conftest import REPO, skip_or_fail

pytestmark = pytest.mark.integration
PROJECT = "membench-otel-test"


def phoenix_executable() -> str:
    named = os.environ.get("MEMBENCH_PHOENIX")
    for candidate in (named, str(REPO / ".venv-phoenix" / "bin" / "phoenix"), shutil.which("phoenix")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    skip_or_fail("Arize Phoenix is not installed: python -m venv .venv-phoenix && .venv-phoenix/bin/pip install "
                 "arize-phoenix (or set MEMBENCH_PHOENIX to its `phoenix` executable)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Phoenix:
    """`phoenix serve` on free loopback ports with a working directory of its own."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "phoenix.log"
        env = {**os.environ, "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": str(workdir),
               "PHOENIX_TELEMETRY_ENABLED": "false"}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([phoenix_executable(), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"phoenix exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        pytest.fail(f"phoenix did not answer within {timeout_s} s:\n{self.log.read_text()[-3000:]}")

    def spans(self, project: str) -> list[dict]:
        out, cursor = [], None
        while True:
            query = f"limit=1000&cursor={cursor}" if cursor else "limit=1000"
            try:
                with urllib.request.urlopen(f"{self.url}/v1/projects/{project}/spans?{query}", timeout=10) as answer:
                    page = json.load(answer)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # the project appears with its first span
                    return []
                raise
            out += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: the server and any worker it started
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def phoenix(tmp_path):
    """Phoenix, started before the test body: it comes up while the run set is made."""
    workdir = tmp_path / "phoenix"
    workdir.mkdir()
    server = Phoenix(workdir)
    yield server
    server.stop()


def test_a_run_set_exported_to_phoenix_reads_back_as_genai_traces(cli, home, bwrap_sandbox, phoenix, tmp_path):
    server = phoenix
    with ScriptedUpstream(script_from_pack(REPO / "fixtures" / "smoke")) as upstream:
        cli("run", "smoke", "--agent", "openai:local-model", "--model-base-url", upstream.base_url,
            "--conditions", "B0,B5", "--seeds", "1", "--run-set", "S", "--workers", "6", check=True)
    events = [e for e, _ in read_log(home / "runs" / "S" / "events.avro")]
    run_ids = sorted({e.run_id for e in events})
    calls = [e for e in events if e.kind == "ModelCall"]
    assert len(run_ids) == 6 and calls

    # the OTLP JSON file: one ExportTraceServiceRequest per line, one line (trace) per run
    out = tmp_path / "S.otlp.jsonl"
    cli("export", "otel", "S", "--file", str(out), check=True)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == len(run_ids)
    file_spans = [s for doc in lines for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert {s["traceId"] for s in file_spans} == {uuid.UUID(r).hex for r in run_ids}
    assert [len({s["traceId"] for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]})
            for doc in lines] == [1] * len(lines)

    # errors: an unknown run set is a usage error naming it; an endpoint nobody serves is exit 1
    unknown = cli("export", "otel", "no-such-set", "--file", str(tmp_path / "x.jsonl"))
    assert unknown.returncode == 2 and "no-such-set" in unknown.stderr
    closed = f"http://127.0.0.1:{free_port()}"
    unreachable = cli("export", "otel", "S", "--endpoint", closed, "--timeout", "1")
    assert unreachable.returncode == 1 and f"{closed}/v1/traces" in unreachable.stderr, unreachable.stderr

    server.wait_ready()
    started = time.monotonic()
    cli("export", "otel", "S", "--endpoint", server.url, "--resource", f"openinference.project.name={PROJECT}",
        check=True)
    spans = server.spans(PROJECT)
    while len(spans) < len(file_spans) and time.monotonic() - started < 60:  # Phoenix ingests asynchronously
        time.sleep(0.5)
        spans = server.spans(PROJECT)
    assert len(spans) == len(file_spans)
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert set(by_id) == {s["spanId"] for s in file_spans}

    # one trace per run, each with one root; sessions under the root; everything else under a session
    assert {s["context"]["trace_id"] for s in spans} == {uuid.UUID(r).hex for r in run_ids}
    for run_id in run_ids:
        trace = [s for s in spans if s["context"]["trace_id"] == uuid.UUID(run_id).hex]
        [root] = [s for s in trace if not s["parent_id"]]
        assert root["context"]["span_id"] == f"{span_id_of(run_id, 'run'):016x}"
        assert root["attributes"]["gen_ai.operation.name"] == "invoke_workflow"
        assert root["attributes"]["membench.run_id"] == run_id
        sessions = [s for s in trace if s["attributes"].get("gen_ai.operation.name") == "invoke_agent"]
        assert len(sessions) == 3 and {s["parent_id"] for s in sessions} == {root["context"]["span_id"]}
        for s in sessions:
            assert s["attributes"]["gen_ai.agent.name"] == "openai:local-model"
            assert s["attributes"]["gen_ai.conversation.id"].startswith(run_id + "/")
        session_ids = {s["context"]["span_id"] for s in sessions}
        assert all(s["parent_id"] in session_ids for s in trace if s not in sessions and s is not root)

    # a chat span per ModelCall, its GenAI attributes and token counts those of the event
    chats = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert len(chats) == len(calls)
    for call in calls:
        span = by_id[f"{span_id_of(call.run_id, f'seq/{call.seq}'):016x}"]
        a, p = span["attributes"], call.payload
        assert span["name"] == f"chat {p['model']}"
        assert span["parent_id"] == f"{span_id_of(call.run_id, f'session/{call.session_index}'):016x}"
        assert (a["gen_ai.request.model"], a["gen_ai.provider.name"]) == (p["model"], p["provider"])
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == \
               (p["input_tokens"], p["output_tokens"])
        assert a["gen_ai.usage.cache_read.input_tokens"] == p["cached_tokens"]
        assert a["gen_ai.usage.reasoning.output_tokens"] == p["reasoning_tokens"]
        assert "error.type" not in a and span["status_code"] != "ERROR"

    # tool calls, memory reads and writes, verdicts
    tool_calls = [e for e in events if e.kind == "ToolCall"]
    tools = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "execute_tool"]
    assert sorted(s["attributes"]["gen_ai.tool.call.id"] for s in tools) == \
           sorted(e.payload["call_id"] for e in tool_calls)
    writes = [e for e in events if e.kind == "MemoryWrite"]
    updates = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "update_memory"]
    assert writes and sorted(s["attributes"]["gen_ai.memory.record.id"] for s in updates) == \
           sorted(e.payload["memory_id"] for e in writes)
    reads = [e for e in events if e.kind == "MemoryRead"]
    searches = [s for s in spans if s["attributes"].get("gen_ai.operation.name") == "search_memory"]
    assert len(searches) == len(reads)
    for read in reads:
        a = by_id[f"{span_id_of(read.run_id, f'seq/{read.seq}'):016x}"]["attributes"]
        assert a["gen_ai.memory.record.count"] == len(read.payload["admitted_ids"])
        assert a["membench.memory.token_budget"] == read.payload["token_budget"]
        assert "gen_ai.memory.query.text" not in a  # content stays out without --include-content
    for verdict in (e for e in events if e.kind == "OracleVerdict"):
        session = by_id[f"{span_id_of(verdict.run_id, f'session/{verdict.session_index}'):016x}"]
        assert session["attributes"]["membench.verdict.outcome"] == verdict.payload["outcome"]
    assert not [s for s in spans if "OracleLabel" in json.dumps(s)]  # gold labels are harness-only
