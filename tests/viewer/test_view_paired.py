"""The viewer's paired view, unit lookup, trajectory search and the report it serves, over synthetic
logs (no sandbox): what the page's side-by-side view, searchable units table and report links read."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urljoin

import pytest

from membench.reports.html.study import matrix_html
from tests.reports.test_html import make_report, typed
from tests.viewer.test_view_api import _get
from tests.viewer.test_view_logs import LogWriter, emit_run, write_log
from membench.viewer.http_server import REPORT_CSP, BadRequest, NotFound, ViewApp, ViewServer

XSS = '<img src=x onerror="document.title=\'owned\'"><script>document.title="owned"</script>'
RUNS = [
    dict(run_set="rs", task="t1", condition="B0", seed=1, outcome="fail", patch_line="step_2 = False"),
    dict(run_set="rs", task="t1", condition="B5", seed=1, agent_text="I used the X-Test header " + XSS,
         memory_text="remember: " + XSS),
    dict(run_set="rs", task="t1", condition="B5-x", seed=1, end="excluded"),
    dict(run_set="rs", task="t2", condition="B0", seed=1),
]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    write_log(tmp_path / "runs" / "rs" / "events.avro", RUNS).close()
    return tmp_path / "runs"


def test_the_paired_view_aligns_sessions_memory_verdicts_and_diffs_the_patches(runs_dir):
    app = ViewApp(runs_dir)
    pair = app.pair("rs", "t1", "1", ["B0", "B5"])
    assert pair["available"] == ["B0", "B5", "B5-x"] and pair["conditions"] == ["B0", "B5"]
    b0, b5 = pair["columns"]
    assert (b0["unit_id"], b5["unit_id"]) == ("suite/t1/B0/1", "suite/t1/B5/1")
    assert (b0["run"]["passed"], b5["run"]["passed"]) == (False, True)
    assert [s["index"] for s in b0["run"]["sessions"]] == [s["index"] for s in b5["run"]["sessions"]] == [1, 2]
    scored = b5["run"]["sessions"][1]
    assert scored["memory_items"] == [
        {"memory_id": "B5:m1", "admitted": True, "cited": False, "content": "remember: " + XSS},
        {"memory_id": "B5:m2", "admitted": False, "cited": False, "content": None}]
    assert b0["run"]["sessions"][0]["memory_items"] == []  # S1 reads nothing
    verdict = next(e for e in scored["events"] if e["kind"] == "OracleVerdict")["payload"]
    assert verdict["outcome"] == "pass" and verdict["cases"][0]["case_id"] == "test_it"
    (diff,) = pair["patch_diffs"]
    assert (diff["a"], diff["b"], diff["identical"]) == ("B0", "B5", False)
    assert "-+step_2 = False" in diff["diff"] and "++step_2 = True" in diff["diff"]
    # every condition that ran the trap and seed when none is named; a condition that did not run it
    # has an empty column; a scored session that produced no patch (here: excluded, cut short) diffs as empty
    every = app.pair("rs", "t1", "1", None)
    assert every["conditions"] == ["B0", "B5", "B5-x"]
    assert [(d["a"], d["b"]) for d in every["patch_diffs"]] == [("B0", "B5"), ("B0", "B5-x")]
    assert every["patch_diffs"][1]["diff"].endswith("\n-+step_2 = False")
    assert app.pair("rs", "t2", "1", ["B0", "B5"])["columns"][1] == {"condition": "B5", "unit_id": None, "run": None}
    with pytest.raises(NotFound):
        app.pair("rs", "t9", "1", None)
    json.dumps(pair, allow_nan=False)


def test_identical_patches_are_said_to_be_identical(tmp_path):
    """Control for the diff above: the same scored patch under both conditions diffs to nothing."""
    write_log(tmp_path / "runs" / "rs" / "events.avro", [
        dict(run_set="rs", task="t1", condition="B0", seed=1), dict(run_set="rs", task="t1", condition="B5", seed=1)]).close()
    (diff,) = ViewApp(tmp_path / "runs").pair("rs", "t1", "1", None)["patch_diffs"]
    assert diff["identical"] and diff["diff"] == ""


def test_search_finds_the_units_whose_trajectories_hold_the_text(runs_dir):
    app = ViewApp(runs_dir)
    found = app.search("rs", "x-test HEADER")  # case-insensitive, in the scored agent turn only
    assert list(found["units"]) == ["suite/t1/B5/1"]
    (hit,) = found["units"]["suite/t1/B5/1"]
    assert (hit["kind"], hit["where"], hit["session"]) == ("Turn", "turn (agent)", 2)
    assert "X-Test header" in hit["snippet"]
    assert list(app.search("rs", "remember:")["units"]) == ["suite/t1/B5/1"]  # a memory item's content
    assert {u for u in app.search("rs", "ok")["units"]} >= {"suite/t2/B0/1"}  # tool output
    assert app.search("rs", "no such words")["units"] == {}
    for bad in ("", "   ", "x" * 201):
        with pytest.raises(BadRequest):
            app.search("rs", bad)


def test_search_sees_what_the_log_gained_since_its_cached_answer(tmp_path):
    path = tmp_path / "runs" / "rs" / "events.avro"
    writer = LogWriter(path)
    emit_run(writer.publish, "rs", "t1", "B0", 1)
    writer.flush()
    app = ViewApp(tmp_path / "runs")
    assert app.search("rs", "needle")["units"] == {}
    emit_run(writer.publish, "rs", "t2", "B0", 1, agent_text="a needle")
    writer.close()
    assert list(app.search("rs", "needle")["units"]) == ["suite/t2/B0/1"]


def test_a_unit_is_found_by_its_id_escaped_or_not(runs_dir):
    app = ViewApp(runs_dir)
    for path in ("/api/run_sets/rs/units/suite%2Ft1%2FB5%2F1", "/api/run_sets/rs/units/suite/t1/B5/1"):
        body, _ = app.route(path)
        run = json.loads(body)
        assert run["unit_id"] == "suite/t1/B5/1" and run["passed"] and run["construct"] == "C1"
        # tokens as run_results counts them: the agent's turns (2 × 100/20) and its ModelCalls (2 × 100/20)
        assert run["memory_tokens"] == 12 and run["input_tokens"] == 400 and run["output_tokens"] == 80
    with pytest.raises(NotFound):
        app.route("/api/run_sets/rs/units/suite/t1/B9/1")


@pytest.fixture
def server(runs_dir):
    srv = ViewServer(runs_dir).start()
    yield srv
    srv.close()


def test_http_pair_search_and_report(runs_dir, server):
    status, _, body = _get(server, "/api/run_sets/rs/pair/t1/1?conditions=B5,B0")
    assert status == 200 and json.loads(body)["conditions"] == ["B5", "B0"]
    status, _, body = _get(server, "/api/run_sets/rs/search?q=X-Test%20header")
    assert status == 200 and list(json.loads(body)["units"]) == ["suite/t1/B5/1"]
    assert _get(server, "/api/run_sets/rs/search?q=")[0] == 400
    assert _get(server, "/api/run_sets/nope/search?q=x")[0] == 404
    assert _get(server, "/api/run_sets/rs/pair/t9/1")[0] == 404
    assert _get(server, "/runs/rs/report.html")[0] == 404  # not written yet
    report = typed(make_report(run_set="rs", suite="suite", outcome_matrix={
        "traps": ["t1"], "seeds": ["1"], "conditions": {"B5": {"t1": {"1": "pass"}}}}))
    (runs_dir / "rs" / "report.html").write_text(f"<!DOCTYPE html><html><body>{matrix_html(report)}</body></html>")
    status, headers, body = _get(server, "/runs/rs/report.html")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Content-Security-Policy"] == REPORT_CSP and "script-src" not in REPORT_CSP
    # the cell's link, resolved against the report's address, is the page's unit view of that unit
    href = body.decode().split('href="')[1].split('"')[0]
    resolved = urljoin(server.url + "runs/rs/report.html", href.replace("&amp;", "&"))
    assert resolved == server.url + "index.html#/unit/rs/suite%2Ft1%2FB5%2F1"
    assert _get(server, "/index.html")[0] == 200
    unit = json.loads(_get(server, "/api/run_sets/rs/units/" + resolved.rsplit("/", 1)[1])[2])
    assert unit["unit_id"] == "suite/t1/B5/1"
    # and its pair link: the same trap and seed under every condition
    pair_link = body.decode().split('class="pair"')[1].split('href="')[1].split('"')[0]
    assert urljoin(server.url + "runs/rs/report.html", pair_link) == server.url + "index.html#/pair/rs/t1/1"
    assert json.loads(_get(server, "/api/run_sets/rs/pair/t1/1")[2])["conditions"] == ["B0", "B5", "B5-x"]
    assert _get(server, "/runs/..%2Frs/report.html")[0] == 404


def test_report_links_escape_trap_and_run_set_names():
    """A trap name is pack text: in the matrix's link it is percent-encoded and escaped, never markup.
    Control: the same name unescaped would open a script element."""
    name = '"><script>alert(1)</script>'
    html = matrix_html(typed(make_report(run_set="rs", suite="s", outcome_matrix={
        "traps": [name], "seeds": ["1"], "conditions": {"B0": {name: {"1": "fail"}}}})))
    assert "<script" not in html and "%3Cscript%3E" in html
    assert "<script" in f'<a href="{name}">'  # what an unescaped href would have put in the page
