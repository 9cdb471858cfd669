"""The viewer's state and JSON API over synthetic logs (no sandbox): progress per condition, the
ladder by the report's conventions, a unit's trajectory, chain breaks, and the HTTP surface."""

from __future__ import annotations

import http.client
import json
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from membench.commands.view import view
from membench.viewer.http_server import ViewApp, ViewServer, is_loopback
from membench.viewer.state import LiveRunSet
from membench.reports.conventions import pass_summary
from membench.schemas.codec import encode_datum
from tests.viewer.test_view_logs import SCHEMA, LogWriter, emit_run, emit_run_turn_first, write_log

RUNS = [
    dict(run_set="rs", task="t1", condition="B0", seed=1, outcome="fail"),
    dict(run_set="rs", task="t2", condition="B0", seed=1, outcome="pass"),
    dict(run_set="rs", task="t1", condition="B5", seed=1),
    dict(run_set="rs", task="t2", condition="B5", seed=1),
    dict(run_set="rs", task="t1", condition="B5", seed=2, end="excluded"),
    dict(run_set="rs", task="t2", condition="B5", seed=2, end="error"),
]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    write_log(tmp_path / "runs" / "rs" / "events.avro", RUNS).close()
    return tmp_path / "runs"


def test_progress_and_ladder_follow_the_report_conventions(runs_dir):
    live = LiveRunSet("rs", runs_dir / "rs" / "events.avro")
    live.refresh()
    detail = live.detail()
    assert detail["dead_letters"] == [] and detail["chain"]["ok"] and detail["log"]["error"] is None
    progress = {row["condition"]: row for row in detail["progress"]}
    assert progress["B0"] == {"condition": "B0", "units_started": 2, "running": 0, "finished": 2, "completed": 2,
                              "passed": 1, "excluded": 0, "errors": 0, "attempts": 2}
    assert progress["B5"] == {"condition": "B5", "units_started": 4, "running": 0, "finished": 4, "completed": 2,
                              "passed": 2, "excluded": 1, "errors": 1, "attempts": 4}
    ladder = {row["condition"]: row for row in detail["ladder"]}
    outcomes = defaultdict(list)
    outcomes["t1"].append(True), outcomes["t2"].append(True)
    passed, valid, rate, ci95, _ = pass_summary(outcomes)
    assert (ladder["B5"]["cells"], ladder["B5"]["valid"], ladder["B5"]["passed"], ladder["B5"]["excluded"]) == (4, 2, 2, 2)
    assert ladder["B5"]["pass_rate"] == rate and ladder["B5"]["ci95"] == ci95
    assert ladder["B0"]["pass_rate"] == 0.5 and [c["condition"] for c in detail["ladder"]] == ["B0", "B5"]
    # pass^k beside it (k = the log's 2 seeds): B5's excluded and errored seeds leave both traps out
    assert ladder["B5"]["pass_hat_k"] == {"k": 2, "traps": 2, "complete": 0, "passed": 0, "incomplete": 2,
                                          "value": None}
    assert (ladder["B5"]["effort"]["cells"], ladder["B5"]["effort"]["passes"]) == (2, 2)
    # USD: the valid runs' priced ModelCalls (2 sessions × $0.0125 each), the excluded ones' left out
    assert ladder["B5"]["effort"]["priced_calls"] == 4
    assert ladder["B5"]["effort"]["cost_usd"] == pytest.approx({"total": 0.05, "per_cell": 0.025, "per_pass": 0.025})
    assert detail["planned"] is None and detail["units_started"] == 6 and detail["units_finished"] == 6


def test_progress_grows_as_the_log_grows_and_open_runs_count_as_running(tmp_path):
    path = tmp_path / "events.avro"
    writer = LogWriter(path)
    live = LiveRunSet("rs", path)
    emit_run(writer.publish, "rs", "t1", "B0", 1, end=None)  # still running: no RunEnded
    writer.flush()
    live.refresh()
    row = live.detail()["progress"][0]
    assert (row["units_started"], row["running"], row["finished"]) == (1, 1, 0)
    assert live.detail()["units"][0]["state"] == "running" and live.detail()["ladder"] == []
    emit_run(writer.publish, "rs", "t2", "B0", 1)
    writer.flush()
    live.refresh()
    row = live.detail()["progress"][0]
    assert (row["units_started"], row["running"], row["finished"], row["completed"]) == (2, 1, 1, 1)
    writer.close()


def test_a_unit_is_its_completed_attempt_as_run_results_picks_it(tmp_path):
    path = tmp_path / "events.avro"
    write_log(path, [dict(run_set="rs", task="t1", condition="B0", seed=1, end="abandoned", attempt=1),
                     dict(run_set="rs", task="t1", condition="B0", seed=1, attempt=2, outcome="pass")]).close()
    live = LiveRunSet("rs", path)
    live.refresh()
    detail = live.detail()
    (unit,) = detail["units"]
    assert unit["attempt"] == 2 and unit["passed"] and len(unit["attempts"]) == 2
    assert detail["progress"][0]["completed"] == 1 and detail["progress"][0]["attempts"] == 2


def test_a_run_detail_has_every_session_event_and_derived_row(runs_dir):
    app = ViewApp(runs_dir)
    unit = next(u for u in app.run_set("rs")["units"] if u["unit_id"] == "suite/t1/B0/1")
    run = app.run(unit["run_id"])
    assert run["chain"] == {"ok": True, "events_checked": run["events"], "break": None}
    assert [e["kind"] for e in run["run_events"]] == ["RunStarted", "OracleLabel", "RunEnded"]
    assert [s["index"] for s in run["sessions"]] == [1, 2]
    scored = run["sessions"][1]
    kinds = [e["kind"] for e in scored["events"]]
    assert kinds == ["SessionStarted", "Turn", "MemoryRead", "ModelCall", "ToolCall", "ToolResult", "Turn",
                     "PatchProduced", "OracleVerdict", "SessionEnded"]
    read = next(e for e in scored["events"] if e["kind"] == "MemoryRead")["payload"]
    assert read["candidates"] == ["B0:m1", "B0:m2"] and read["admitted_ids"] == ["B0:m1"]
    patch = next(e for e in scored["events"] if e["kind"] == "PatchProduced")["payload"]
    assert "+step_2 = True" in patch["production_diff"]
    assert scored["verdict"]["outcome"] == "fail" and not scored["verdict"]["passed"]
    assert scored["failure"]["failure_reason"] and scored["contract"]["memory_contract_status"]
    assert scored["hygiene"] and all(h["session_index"] == 2 for h in scored["hygiene"])
    assert scored["model"]["calls"] == 1 and scored["model"]["input_tokens"] == 100
    assert run["model"]["calls"] == 2 and run["model"]["cost_usd"] == pytest.approx(0.025)
    assert "MemoryWrite" in [e["kind"] for e in run["sessions"][0]["events"]]
    assert run["failure_reason"] == scored["failure"]["failure_reason"] and run["summary"]["status"] == "completed"
    json.dumps(run, allow_nan=False)


def test_an_edited_event_breaks_its_run_chain_at_its_seq(tmp_path):
    path = tmp_path / "runs" / "rs" / "events.avro"
    writer = LogWriter(path)
    emitted = []
    emit_run(lambda e, d: emitted.append(e), "rs", "t1", "B0", 1)
    emit_run(writer.publish, "rs", "t2", "B0", 1)
    edited = emitted[3]
    assert edited.kind == "Turn"
    edited.payload["text"]["text"] = "something else"  # the stored hash is left as it was
    for event in emitted:
        writer.publish(event, encode_datum(SCHEMA, event.to_record()))
    writer.close()
    app = ViewApp(tmp_path / "runs")
    detail = app.run_set("rs")
    assert not detail["chain"]["ok"]
    (found,) = detail["chain"]["breaks"]
    assert found["seq"] == edited.seq and found["run_id"] == edited.run_id and "edited" in found["reason"]
    assert app.run(edited.run_id)["chain"]["break"]["seq"] == edited.seq
    other = next(u for u in detail["units"] if u["unit_id"] == "suite/t2/B0/1")
    assert other["chain_ok"] and app.run(other["run_id"])["chain"]["ok"]
    assert app.run_sets()["run_sets"][0]["chain_ok"] is False


def test_events_the_processors_reject_make_the_run_set_not_verified_with_an_intact_chain(tmp_path):
    """A dead letter fails `membench replay --verify` as a chain break does, so the viewer never calls
    such a log ok: the run set and the run count them (what the page's badge reads), the chain stays
    intact. Control: the same run with its RunStarted first has none."""
    writer = LogWriter(tmp_path / "runs" / "rs" / "events.avro")
    emit_run(writer.publish, "rs", "t1", "B5", 1)
    emit_run_turn_first(writer.publish, "rs", "t2", "B5", 1)
    writer.close()
    app = ViewApp(tmp_path / "runs")
    detail = app.run_set("rs")
    assert detail["chain"]["ok"] and detail["chain_ok"] and detail["dead_letter_count"] == 1
    (letter,) = detail["dead_letters"]
    assert letter["seq"] == 0 and "Turn before RunStarted" in letter["reason"]
    rows = {u["unit_id"]: u for u in detail["units"]}
    assert (rows["suite/t2/B5/1"]["dead_letters"], rows["suite/t1/B5/1"]["dead_letters"]) == (1, 0)
    assert app.run(rows["suite/t2/B5/1"]["run_id"])["dead_letters"] == 1
    assert app.run_sets()["run_sets"][0]["dead_letter_count"] == 1


# ---------------------------------------------------------------------------------------- HTTP


@pytest.fixture
def server(runs_dir):
    srv = ViewServer(runs_dir).start()
    yield srv
    srv.close()


def _get(server, path: str, method: str = "GET", host: str | None = None,
         if_none_match: str | None = None) -> tuple[int, dict, bytes]:
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Host": host} if host else {}
    if if_none_match is not None:
        headers["If-None-Match"] = if_none_match
    conn.request(method, path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def test_http_api_and_page(server):
    status, headers, body = _get(server, "/api/run_sets")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert [rs["run_set"] for rs in json.loads(body)["run_sets"]] == ["rs"]
    status, _, body = _get(server, "/api/run_sets/rs")
    detail = json.loads(body)
    assert status == 200 and detail["units_finished"] == 6
    status, _, body = _get(server, "/api/runs/" + detail["units"][0]["run_id"])
    assert status == 200 and json.loads(body)["unit_id"] == detail["units"][0]["unit_id"]
    status, headers, body = _get(server, "/")
    assert status == 200 and b"/static/app.js" in body and "default-src 'self'" in headers["Content-Security-Policy"]
    for path in ("/static/app.js", "/static/style.css"):
        assert _get(server, path)[0] == 200
    assert _get(server, "/api/run_sets", method="HEAD")[0] == 200


def test_an_unchanged_run_set_answers_a_poll_with_a_bodiless_304_and_a_changed_one_in_full(runs_dir, server):
    """The page re-asks for the run set every 1.5 s naming the ETag of the answer it holds; a
    finished run set's answer (about 1 KB per unit) is then not sent again. Control: once the log grows, the same
    ETag gets the new answer, and a poll without one always gets the body."""
    status, headers, body = _get(server, "/api/run_sets/rs")
    etag = headers["ETag"]
    assert status == 200 and etag.startswith('"') and headers["Cache-Control"] == "no-store"
    status, again, empty = _get(server, "/api/run_sets/rs", if_none_match=etag)
    assert status == 304 and empty == b"" and again["ETag"] == etag
    assert _get(server, "/api/run_sets/rs", if_none_match=f'"other", W/{etag}')[0] == 304
    assert _get(server, "/api/run_sets/rs")[2] == body  # no If-None-Match: the body
    assert _get(server, "/api/run_sets/rs", if_none_match='"other"')[0] == 200
    writer = LogWriter(runs_dir / "rs" / "events.avro")
    emit_run(writer.publish, "rs", "t3", "B5", 1)
    writer.close()
    status, headers, grown = _get(server, "/api/run_sets/rs", if_none_match=etag)
    assert status == 200 and headers["ETag"] != etag and json.loads(grown)["units_finished"] == 7
    assert "ETag" not in _get(server, "/")[1]  # the page itself is not a JSON answer


def test_a_finished_run_sets_answer_is_built_once_until_the_log_grows(runs_dir, monkeypatch):
    """A poll of an unchanged, finished run set reuses the encoded answer; a grown log, or a run
    still open (its quiet_for_s follows the clock), builds it again."""
    app = ViewApp(runs_dir)
    built = []
    detail = LiveRunSet.detail
    monkeypatch.setattr(LiveRunSet, "detail", lambda self: built.append(1) or detail(self))
    first, content_type = app.route("/api/run_sets/rs")
    assert content_type == "application/json" and app.route("/api/run_sets/rs")[0] is first and len(built) == 1
    assert json.loads(first)["quiet_for_s"] is None and json.loads(first)["units_finished"] == 6
    writer = LogWriter(runs_dir / "rs" / "events.avro")
    emit_run(writer.publish, "rs", "t3", "B5", 1)
    writer.flush()
    grown = app.route("/api/run_sets/rs")[0]
    assert json.loads(grown)["units_finished"] == 7 and len(built) == 2
    emit_run(writer.publish, "rs", "t3", "B0", 1, end=None)  # still running
    writer.close()
    open_run = [json.loads(app.route("/api/run_sets/rs")[0]) for _ in range(2)]
    assert len(built) == 4 and open_run[0]["running"] == 1 and open_run[0]["quiet_for_s"] is not None


@pytest.mark.parametrize("path", ["/api/run_sets/nope", "/api/run_sets/..%2F..%2Fetc", "/api/runs/not-a-run",
                                  "/static/../server.py", "/api/blobs/rs/" + "0" * 64, "/api/blobs/rs/..%2Fevents.avro",
                                  "/api/other", "/api"])
def test_http_unknown_paths_are_404(server, path):
    status, _, body = _get(server, path)
    assert status == 404 and "error" in json.loads(body)


def test_http_refuses_writes_and_foreign_hosts(server):
    assert _get(server, "/api/run_sets", method="POST")[0] == 405
    assert _get(server, "/api/run_sets", host="attacker.example:80")[0] == 403
    assert _get(server, "/api/run_sets", host="localhost:1234")[0] == 200
    assert _get(server, "/api/run_sets", host="[::1]:1234")[0] == 200


def test_blobs_are_served_when_they_hash_to_their_name(runs_dir, server):
    from membench.bus.blobs import put_blob

    digest = put_blob(runs_dir / "rs" / "blobs", b"--- a/big\n+++ b/big\n")
    status, headers, body = _get(server, f"/api/blobs/rs/{digest}")
    assert status == 200 and body.startswith(b"--- a/big") and headers["Content-Type"].startswith("text/plain")
    (runs_dir / "rs" / "blobs" / digest).write_bytes(b"tampered")
    assert _get(server, f"/api/blobs/rs/{digest}")[0] == 404


def test_an_empty_home_lists_nothing(tmp_path):
    assert ViewApp(tmp_path / "missing").run_sets() == {"run_sets": []}


def test_loopback_detection():
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.4", "example.com", ""))


def test_cli_refuses_a_bad_bus_and_a_busy_port(tmp_path):
    runner = CliRunner()
    result = runner.invoke(view, ["--bus", "kafka://localhost:9092?bogus=1"])
    assert result.exit_code == 2 and "unknown parameter(s) bogus" in result.output
    result = runner.invoke(view, ["--bus", "ftp://localhost/runs"])
    assert result.exit_code == 2 and "ftp://localhost/runs" in result.output
    srv = ViewServer(tmp_path)
    try:
        port = srv.httpd.server_address[1]
        result = runner.invoke(view, ["--port", str(port), "--bus", f"file://{tmp_path}"])
        assert result.exit_code == 2 and "cannot listen" in result.output
    finally:
        srv.httpd.server_close()


def test_an_excluded_runs_own_words_are_in_its_unit_row_and_detail(tmp_path):
    """Why a unit was excluded (the run-level system Turn: the model's or adapter's words)
    is shown where the user looks, not only its reason code."""
    from tests.viewer.test_view_logs import _turn

    path = tmp_path / "events.avro"
    writer = LogWriter(path)
    em = emit_run(writer.publish, "rs", "t1", "B5", 1, end=None, cut=True)
    em.emit("Turn", _turn("system", "the model is misconfigured: HTTP 401, no key is set"), visibility="harness")
    em.emit("RunEnded", {"status": "excluded", "error_type": "model_misconfigured"}, visibility="harness")
    emit_run(writer.publish, "rs", "t2", "B5", 1)  # control: a completed run has no reason to show
    writer.flush()
    writer.close()
    live = LiveRunSet("rs", path)
    live.refresh()
    rows = {u["unit_id"]: u for u in live.detail()["units"]}
    assert rows["suite/t1/B5/1"]["why"] == "the model is misconfigured: HTTP 401, no key is set"
    assert rows["suite/t2/B5/1"]["why"] is None
