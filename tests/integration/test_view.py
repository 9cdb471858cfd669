"""`membench view` over real runs (bubblewrap, the embedded pipeline): the API agrees with the
report and the warehouse, and in a real headless Chromium the page lists the run set, shows a
unit's trajectory, and follows a run while it runs — without taking the chDB lock from it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from membench.reports.effort import effort_row, pass_hat_k_text
from membench.reports.model import Report, from_json
from membench.viewer.http_server import ViewApp
from membench.bus.attempts import read_log
from tests.conftest import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def smoke_home(smoke_run_set) -> Path:
    """One finished run set: the session's shared smoke grid, the smoke pack's 3 traps under B0 and
    B5, seeds 1 and 2 (12 units), served read-only (tests/integration/conftest.py)."""
    return smoke_run_set.home


@pytest.fixture(scope="module")
def run_set_id(smoke_run_set) -> str:
    """The shared run set's id."""
    return smoke_run_set.run_set


def _warehouse_rows(home: Path, run_set: str) -> dict:
    """run_results, session_results and failures of the run set, read by a process of its own (the
    one owner of the chDB path at a time; the run has ended)."""
    script = (
        "import dataclasses, json, sys\n"
        "from membench.pipeline.settings import load_settings\n"
        "from membench.warehouse.client import connect\n"
        "from membench.warehouse import queries\n"
        "w = connect(load_settings().warehouse, create=False, read_only=True)\n"
        "rs = sys.argv[1]\n"
        "out = {'runs': [dataclasses.asdict(r) for r in queries.run_results(w, rs)],\n"
        "       'sessions': [dataclasses.asdict(s) for s in queries.session_results(w, rs)],\n"
        "       'failures': w.query_dicts('SELECT run_id, session_index, failure_reason FROM failures '\n"
        "                                 'WHERE run_set = {rs:String} LIMIT 1 BY run_id, session_index', {'rs': rs})}\n"
        "w.close()\n"
        "print(json.dumps(out, default=str))\n")
    proc = subprocess.run([sys.executable, "-c", script, run_set], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MEMBENCH_HOME": str(home)}, cwd=str(home.parent))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_api_agrees_with_the_report_and_the_warehouse(smoke_home, run_set_id):
    app = ViewApp(smoke_home / "runs")
    assert [rs["run_set"] for rs in app.run_sets()["run_sets"]] == [run_set_id]
    detail = app.run_set(run_set_id)
    log = smoke_home / "runs" / run_set_id / "events.avro"
    assert detail["events"] == sum(1 for _ in read_log(log))
    assert detail["chain"] == {"ok": True, "events_checked": detail["events"], "breaks": []}
    assert detail["dead_letters"] == [] and detail["log"]["pending_bytes"] == 0 and detail["log"]["error"] is None
    progress = {row["condition"]: row for row in detail["progress"]}
    assert {c: (r["units_started"], r["completed"], r["passed"], r["running"]) for c, r in progress.items()} == \
        {"B0": (6, 6, 0, 0), "B5": (6, 6, 6, 0)}

    report = json.loads((smoke_home / "runs" / run_set_id / "report.json").read_text())
    keys = ("condition", "cells", "passed", "pass_rate", "ci95", "excluded", "pass_hat_k", "effort")
    assert [{k: row[k] for k in keys} for row in detail["ladder"]] == \
        [{k: row[k] for k in keys} for row in report["conditions"]]

    stored = _warehouse_rows(smoke_home, run_set_id)
    # a unit's tokens are run_results' (as the report's tokens per cell); a scripted run's cost is unknown, not $0
    assert sorted((u["unit_id"], u["run_id"], u["status"], u["passed"], u["input_tokens"], u["output_tokens"])
                  for u in detail["units"]) == \
        sorted((r["unit_id"], r["run_id"], r["status"], bool(r["scored_passed"]), int(r["input_tokens"]),
                int(r["output_tokens"])) for r in stored["runs"])
    assert {u["cost_usd"] for u in detail["units"]} == {None}
    failures = {(f["run_id"], f["session_index"]): f["failure_reason"] for f in stored["failures"]}
    verdicts = {(s["run_id"], s["session_index"]): s["outcome"] for s in stored["sessions"]}
    for unit in detail["units"]:
        run = app.run(unit["run_id"])
        assert run["chain"]["ok"] and run["chain"]["events_checked"] == unit["events"]
        assert [s["index"] for s in run["sessions"]] == [1, 2, 3]
        for session in run["sessions"]:
            kinds = {e["kind"] for e in session["events"]}
            assert {"SessionStarted", "Turn", "ToolCall", "ToolResult", "PatchProduced", "OracleVerdict"} <= kinds
            assert session["verdict"]["outcome"] == verdicts[(unit["run_id"], session["index"])]
            if session["failure"] is not None:
                assert session["failure"]["failure_reason"] == failures[(unit["run_id"], session["index"])]
        scored = run["sessions"][-1]
        reads = [e["payload"] for e in scored["events"] if e["kind"] == "MemoryRead"]
        if unit["condition"] == "B5":
            assert reads and reads[0]["admitted_ids"] and set(reads[0]["admitted_ids"]) <= set(reads[0]["candidates"])
        assert any(e["payload"]["production_diff"] for e in scored["events"] if e["kind"] == "PatchProduced")


# ------------------------------------------------------------------------------ in a real browser

@contextmanager
def viewer(home: Path):
    """`membench view --port 0` in a subprocess, as a user starts it; yields its URL."""
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "membench", "view", "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=str(home.parent),
                            env={**os.environ, "MEMBENCH_HOME": str(home)})
    try:
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, f"membench view printed {line!r}; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def page_of(browser):
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type == "error" else None)
    try:
        yield page, problems
    finally:
        page.close()


def test_the_page_lists_the_run_set_and_shows_a_unit_trajectory(smoke_home, run_set_id, browser):
    with viewer(smoke_home) as url, page_of(browser) as (page, problems):
        page.goto(url)
        polls: list[int] = []
        page.on("response", lambda r: polls.append(r.status) if r.url.endswith(f"/api/run_sets/{run_set_id}") else None)
        page.locator(f"a.runset-link[data-run-set='{run_set_id}']").click(timeout=30_000)
        page.wait_for_selector("#progress")
        # a finished run set: after the first answer the page's polls name its ETag and get a bodiless 304
        page.wait_for_timeout(3500)
        assert polls[0] == 200 and 304 in polls[1:], polls
        assert page.locator("#total-completed").inner_text() == "12"
        assert page.locator("#progress tr[data-condition='B5'] td[data-field='passed']").inner_text() == "6"
        assert page.locator("#ladder .row[data-condition='B5'] [data-field='pass_rate']").inner_text().startswith("100.0%")
        # cost and reliability beside the pass rate, figure for figure as report.md and report.html word them
        report = from_json(Report, json.loads((smoke_home / "runs" / run_set_id / "report.json").read_text()))
        for entry in report.conditions:
            shown = page.locator(f"#effort tr[data-condition='{entry.condition}'] td.num").all_inner_texts()
            assert shown == effort_row(entry)[1:], entry.condition
            pass_hat_k = page.locator(f"#ladder .row[data-condition='{entry.condition}'] [data-field='pass_hat_k']")
            assert pass_hat_k.inner_text().strip() == "pass^k " + pass_hat_k_text(entry.pass_hat_k, short=True)
        b5 = page.locator("#effort tr[data-condition='B5']")
        assert b5.locator("[data-field='pass_hat_k']").inner_text() == "100.0% (3/3 traps, k=2)"
        assert b5.locator("[data-field='usd_per_cell']").inner_text() == "—"  # a scripted agent: no priced call
        # memory-literal calls no memory tool: the harness's reads are no calls, so no rate per call
        assert b5.locator("[data-field='memory_calls_per_session']").inner_text() == "0.00"
        assert b5.locator("[data-field='passes_per_memory_call']").inner_text() == "—"
        page.locator("a.unit-link[data-unit-id='smoke/smoke-client-header/B5/1']").click()
        page.wait_for_selector("section.session[data-session='3']", timeout=30_000)
        assert page.locator("#chain-status").get_attribute("data-ok") == "true"
        scored = page.locator("section.session[data-session='3']")
        assert scored.locator(".event[data-kind='Turn']").count() >= 2
        assert scored.locator(".event[data-kind='ToolCall']").count() >= 1
        assert scored.locator(".event[data-kind='MemoryRead'] .memory-candidates li.admitted").count() >= 1
        assert "+++ b/" in scored.locator(".event[data-kind='PatchProduced'] pre.diff").inner_text()
        assert scored.locator(".verdict[data-outcome='pass']").count() == 1
        page.locator("#crumbs").get_by_role("link", name=run_set_id, exact=True).click()
        page.wait_for_selector("#units")
        failed = page.locator("tr[data-unit-id='smoke/smoke-client-header/B0/1']")
        assert "test_failure" in failed.inner_text()
        assert problems == []


def test_the_page_follows_a_run_while_it_runs(bwrap_sandbox, tmp_path, browser):
    """The viewer is up before the run starts (the run set does not exist yet); the run, 6 units, runs
    beside it — so the viewer must not hold the chDB lock — and the page's completed count grows
    while the run is still going."""
    home = tmp_path / "home"
    with viewer(home) as url, page_of(browser) as (page, problems):
        page.goto(url + "#/rs/LIVE")
        env = {**os.environ, "MEMBENCH_HOME": str(home)}
        # one worker, and an agent that takes a second a session (changing nothing): units end one at a
        # time, seconds apart, so the page's polls (every 1.5 s) see the count between 0 and 6 whether
        # the machine is idle or loaded (the scripted agent's six units can end within two polls)
        agent = tmp_path / "slow_agent.py"
        agent.write_text('import json, time\ntime.sleep(1)\nprint(json.dumps({"type": "turn", "text": "waited"}))\n')
        run = subprocess.Popen([sys.executable, "-m", "membench", "run", "smoke", "--conditions", "B0,B5",
                                "--agent", f"command:{agent}", "--seeds", "1", "--run-set", "LIVE",
                                "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, cwd=str(home.parent))
        seen_while_running: list[int] = []
        deadline = time.monotonic() + 600
        try:
            while run.poll() is None and time.monotonic() < deadline:
                cell = page.locator("#total-completed")
                if cell.count():
                    value = int(cell.inner_text())
                    if run.poll() is None and (not seen_while_running or value != seen_while_running[-1]):
                        seen_while_running.append(value)
                page.wait_for_timeout(300)
            out, err = run.communicate(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert run.returncode == 0, f"membench run exited {run.returncode}\n{out}\n{err}"
        # a count between none and all, shown while the run still ran (the run set did not exist when
        # the page opened): the page followed the run, whichever poll first caught it
        assert any(0 < value < 6 for value in seen_while_running), \
            f"the page showed no partial count while the run ran (seen: {seen_while_running})"
        from playwright.sync_api import expect  # (the page's CSP forbids evaluating strings: no wait_for_function)

        expect(page.locator("#total-completed")).to_have_text("6", timeout=60_000)
        report = json.loads((home / "runs" / "LIVE" / "report.json").read_text(encoding="utf-8"))
        for summary in report["conditions"]:  # the page's figures are the run's report's
            cell = page.locator(f"#progress tr[data-condition='{summary['condition']}'] td[data-field='passed']")
            assert cell.inner_text() == str(summary["passed"]), summary["condition"]
        assert problems == [] or all("404" in p for p in problems), problems  # before the log existed: 404s


def test_the_page_shows_model_calls_memory_and_a_broken_chain(tmp_path, browser):
    """A synthetic log (no sandbox): model calls, a memory read's candidates, and a run whose event
    was edited after sealing, shown as broken at its seq; a second run set whose chains are intact but
    one of whose events the processors rejected is "not verified", never "chain ok"."""
    from membench.viewer.http_server import ViewServer
    from membench.schemas.codec import encode_datum
    from tests.viewer.test_view_logs import SCHEMA, LogWriter, emit_run, emit_run_turn_first

    rejected = LogWriter(tmp_path / "runs" / "dl" / "events.avro")
    emit_run(rejected.publish, "dl", "t1", "B5", 1)
    emit_run_turn_first(rejected.publish, "dl", "t2", "B5", 1)
    rejected.close()

    writer = LogWriter(tmp_path / "runs" / "rs" / "events.avro")
    emit_run(writer.publish, "rs", "t1", "B5", 1)
    edited: list = []
    emit_run(lambda e, d: edited.append(e), "rs", "t2", "B5", 1, outcome="fail")
    call = next(e for e in edited if e.kind == "ModelCall")
    call.payload["cost_usd"] = 0.0  # its stored hash left as it was
    for event in edited:
        writer.publish(event, encode_datum(SCHEMA, event.to_record()))
    writer.close()
    server = ViewServer(tmp_path / "runs").start()
    try:
        with page_of(browser) as (page, problems):
            page.goto(server.url + "#/rs/rs")
            page.locator("a.unit-link[data-unit-id='suite/t1/B5/1']").click(timeout=30_000)
            page.wait_for_selector("section.session[data-session='2']")
            shown = page.locator("section.session[data-session='2'] .event[data-kind='ModelCall']").inner_text()
            assert "openai/test-model" in shown and "$0.0125" in shown
            candidates = page.locator("section.session[data-session='2'] .memory-candidates li")
            assert candidates.count() == 2 and page.locator(".memory-candidates li.admitted").count() == 1
            assert page.locator("#chain-status").get_attribute("data-ok") == "true"
            page.goto(server.url + "#/run/" + edited[0].run_id)
            page.wait_for_selector("#chain-status[data-ok='false']", timeout=30_000)
            assert f"seq {call.seq}" in page.locator("#chain-status").inner_text()
            page.goto(server.url + "#/rs/rs")
            page.wait_for_selector("#units")
            assert "broken" in page.locator("h1").inner_text()
            page.goto(server.url + "#/rs/dl")
            page.wait_for_function("() => (document.querySelector('h1')?.textContent || '').startsWith('dl')",
                                   timeout=30_000)
            heading = page.locator("h1").inner_text()
            assert "not verified · 1 events the processors rejected" in heading and "chain ok" not in heading
            page.goto(server.url + "#/")
            page.wait_for_selector("#run-sets")
            assert "not verified" in page.locator("tr[data-run-set='dl']").inner_text()
            assert "not verified" not in page.locator("tr[data-run-set='rs']").inner_text()
            assert problems == []
    finally:
        server.close()


def _filter_sort_search(page):
    """The smoke run set's units table as a reader uses it, live or exported: B0's failures (6 of 12),
    sorted by events descending, then every B0 unit searched for the header the review names; returns
    the rows found (2: B0, seeds 1 and 2, of the one trap whose review names it)."""
    from playwright.sync_api import expect

    page.select_option("#filter-condition", "B0")
    page.select_option("#filter-outcome", "fail")
    expect(page.locator("#units-count")).to_have_text("6 of 12 units")
    page.locator("th[data-sort='events']").click()
    page.locator("th[data-sort='events']").click()  # descending
    events = [int(t) for t in page.locator("#units tbody tr td:nth-child(14)").all_inner_texts()]
    assert events == sorted(events, reverse=True) and len(events) == 6
    page.select_option("#filter-outcome", "")
    page.fill("#unit-search", "X-Ledger-Client")
    expect(page.locator("#search-state")).to_contain_text("units hold it", timeout=30_000)
    rows = page.locator("#units tbody tr")
    expect(rows).to_have_count(2)
    assert "X-Ledger-Client" in rows.first.locator(".hit").inner_text()
    return rows


def test_a_report_cell_and_the_units_table_lead_to_units_and_paired_views(smoke_home, run_set_id, browser, tmp_path):
    """As a reader: from report.html (served by the viewer) a matrix cell opens its unit, and its ⇄
    the trap and seed under every condition side by side; on the run
    set's page the units table is filtered by condition and outcome, sorted by cost, searched in the
    trajectories (a reviewer's literal that only the turns and memory hold), and a row's pair link
    opens the same trap and seed under B0 and B5 side by side — B0 failed, B5 passed with the memory
    it read admitted. The table's state survives a reload from the URL."""
    from playwright.sync_api import expect

    with viewer(smoke_home) as url, page_of(browser) as (page, problems):
        page.set_viewport_size({"width": 1500, "height": 1000})
        page.goto(url + f"runs/{run_set_id}/report.html")
        page.locator("#matrix a[href*='smoke-client-header%2FB5%2F2']").click()
        page.wait_for_selector("section.session[data-session='3']", timeout=30_000)
        assert page.locator("h1").inner_text().startswith("smoke/smoke-client-header/B5/2")
        page.go_back()
        page.locator("#matrix a.pair[href$='/smoke-client-header/2']").first.click()
        page.wait_for_selector(".pair-session[data-session='3']", timeout=30_000)
        assert [h.get_attribute("data-condition") for h in page.locator(".pair-head").all()] == ["B0", "B5"]
        # a failure count opens the units table filtered to its condition and reason: that many units
        page.goto(url + f"runs/{run_set_id}/report.html")
        count = page.locator("#failures a.units[href*='condition=B0']").first
        shown, href = count.inner_text(), count.get_attribute("href")
        reason = href.rsplit("reason=", 1)[1]
        count.click()
        expect(page.locator("#units-count")).to_have_text(f"{shown} of 12 units", timeout=30_000)
        assert page.locator("#filter-condition").input_value() == "B0"
        assert page.locator("#filter-reason").input_value() == reason
        assert all(reason in t for t in page.locator("#units tbody tr td:nth-child(9)").all_inner_texts())

        page.goto(url + f"#/rs/{run_set_id}")
        page.wait_for_selector("#units tbody tr", timeout=30_000)
        expect(page.locator("#units-count")).to_have_text("12 of 12 units")
        page.locator("th[data-sort='cost_usd']").click()  # then re-sorted by events, in _filter_sort_search
        rows = _filter_sort_search(page)
        assert all("smoke-client-header" in u for u in rows.locator("a.unit-link").all_inner_texts())
        assert "condition=B0" in page.url and "q=X-Ledger-Client" in page.url and "sort=events" in page.url
        page.reload()
        expect(page.locator("#units-count")).to_have_text("2 of 12 units", timeout=30_000)
        assert page.locator("#filter-condition").input_value() == "B0"
        page.screenshot(path=str(tmp_path / "units.png"), full_page=True)

        page.locator("a.pair-link[data-unit-id='smoke/smoke-client-header/B0/1']").click()
        page.wait_for_selector(".pair-session[data-session='3']", timeout=30_000)
        assert "conditions=B0,B5" in page.url
        heads = page.locator(".pair-head")
        assert heads.nth(0).get_attribute("data-condition") == "B0" and heads.nth(1).get_attribute("data-condition") == "B5"
        assert "fail" in heads.nth(0).locator("h2").inner_text() and "pass" in heads.nth(1).locator("h2").inner_text()
        scored = page.locator(".pair-session[data-session='3']")
        assert scored.locator(".pair-cell[data-condition='B5'] .memory-item.admitted").count() >= 1
        assert scored.locator(".pair-cell[data-condition='B0'] .memory-item").count() == 0
        assert scored.locator(".pair-cell[data-condition='B5'] > .verdict[data-outcome='pass']").count() == 1
        assert not scored.locator(".pair-cell details.trajectory").first.evaluate("d => d.open")  # collapsed
        assert page.locator("#patch-diffs .patch-diff[data-a='B0'][data-b='B5'] pre.diff").count() == 1
        page.screenshot(path=str(tmp_path / "pair.png"), full_page=True)
        assert problems == []


def test_agent_text_stays_inert_in_the_paired_view_and_the_search(tmp_path, browser):
    """Markup in an agent's turn, a memory item and a patch (agent-controlled) is shown as text in
    the search hits and the paired view: no element is made from it and nothing of it runs.
    Control: the same text given to the page as HTML does make an element."""
    from playwright.sync_api import expect
    from membench.viewer.http_server import ViewServer
    from tests.viewer.test_view_logs import write_log

    attack = '<img class="injected" src=x onerror="document.title=\'owned\'">'
    write_log(tmp_path / "runs" / "rs" / "events.avro", [
        dict(run_set="rs", task="t1", condition="B0", seed=1, outcome="fail", patch_line=attack),
        dict(run_set="rs", task="t1", condition="B5", seed=1, agent_text="done " + attack, memory_text="note " + attack),
    ]).close()
    server = ViewServer(tmp_path / "runs").start()
    try:
        with page_of(browser) as (page, problems):
            page.goto(server.url + "#/rs/rs?q=" + "onerror")
            expect(page.locator("#search-state")).to_contain_text("units hold it", timeout=30_000)
            assert attack in page.locator("#units").inner_text()
            page.goto(server.url + "#/pair/rs/t1/1?conditions=B0,B5")
            page.wait_for_selector(".pair-session[data-session='2']", timeout=30_000)
            for d in page.locator("details").all():
                d.locator("summary").first.click()  # open every trajectory and patch: all of it in the DOM, shown
            assert attack in page.locator(".pair-cell[data-condition='B5'] .memory-content").first.inner_text()
            assert attack in page.locator("#patch-diffs").inner_text()
            assert page.locator("img.injected").count() == 0 and page.title() != "owned"
            assert page.locator("script").count() == 1  # the page's own app.js, nothing added
            assert problems == []
            page.set_content(f"<p>{attack}</p>")  # control: as HTML, the text is an element
            assert page.locator("img.injected").count() == 1
    finally:
        server.close()


# ------------------------------------------------------------------ the static export, from disk


def test_the_static_export_works_from_disk(smoke_home, run_set_id, browser, tmp_path):
    """`membench export site`, opened as file:// with no server: report.html's matrix cell opens its
    unit and its ⇄ the trap and seed side by side; the units table filters, sorts and searches the
    trajectories in the page; a row's pair link opens B0 and B5 side by side. Then the same
    directory from a plain static HTTP server."""
    from playwright.sync_api import expect

    out = tmp_path / "site"
    proc = run_cli("export", "site", run_set_id, str(out), home=smoke_home, check=True)
    assert "12 units, 12 runs, 6 trap-seed pairs" in proc.stdout
    with page_of(browser) as (page, problems):
        page.set_viewport_size({"width": 1500, "height": 1000})
        page.goto((out / "runs" / run_set_id / "report.html").as_uri())
        page.locator("#matrix a[href*='smoke-client-header%2FB5%2F2']").click()
        page.wait_for_selector("section.session[data-session='3']", timeout=30_000)
        assert page.url.startswith((out / "index.html").as_uri())
        assert page.locator("h1").inner_text().startswith("smoke/smoke-client-header/B5/2")
        assert "static export" in page.locator("#status").inner_text()
        page.go_back()
        page.locator("#matrix a.pair[href$='/smoke-client-header/2']").first.click()
        page.wait_for_selector(".pair-session[data-session='3']", timeout=30_000)
        assert [h.get_attribute("data-condition") for h in page.locator(".pair-head").all()] == ["B0", "B5"]

        page.goto((out / "index.html").as_uri() + f"#/rs/{run_set_id}")
        page.reload()  # a fresh page at the run set (a hash change alone keeps the last view's state)
        expect(page.locator("#units-count")).to_have_text("12 of 12 units", timeout=30_000)
        _filter_sort_search(page)
        page.screenshot(path=str(tmp_path / "static-units.png"), full_page=True)
        page.locator("a.pair-link[data-unit-id='smoke/smoke-client-header/B0/1']").click()
        page.wait_for_selector(".pair-session[data-session='3']", timeout=30_000)
        heads = page.locator(".pair-head")
        assert "fail" in heads.nth(0).locator("h2").inner_text() and "pass" in heads.nth(1).locator("h2").inner_text()
        scored = page.locator(".pair-session[data-session='3']")
        assert scored.locator(".pair-cell[data-condition='B5'] .memory-item.admitted").count() >= 1
        assert page.locator("#patch-diffs .patch-diff[data-a='B0'][data-b='B5'] pre.diff").count() == 1
        page.screenshot(path=str(tmp_path / "static-pair.png"), full_page=True)
        assert page.locator("script").count() == 1  # the data scripts are removed once read
        assert problems == []

    # the same directory on a plain static host, in a subdirectory: every link is relative
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    host = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=host.serve_forever, daemon=True).start()
    try:
        with page_of(browser) as (page, problems):
            page.goto(f"http://127.0.0.1:{host.server_address[1]}/site/runs/{run_set_id}/report.html")
            page.locator("#matrix a[href*='smoke-client-header%2FB0%2F1']").click()
            page.wait_for_selector("section.session[data-session='3']", timeout=30_000)
            assert page.locator("h1").inner_text().startswith("smoke/smoke-client-header/B0/1")
            assert problems == []
    finally:
        host.shutdown()
        host.server_close()


def test_agent_text_stays_inert_in_the_static_export(tmp_path, browser):
    """As the live viewer's check: markup in an agent's turn, a memory item and a patch, and a
    closing </script>, shown from the static export (file://) as text in the search hits, the unit
    page and the paired view; nothing of it runs. Control: the same text as HTML makes an element."""
    from playwright.sync_api import expect
    from tests.viewer.test_view_logs import write_log
    from membench.viewer.site import write_site
    from membench.viewer.state import LiveRunSet

    attack = '<img class="injected" src=x onerror="document.title=\'owned\'"></script><script>document.title="owned"</script>'
    write_log(tmp_path / "runs" / "rs" / "events.avro", [
        dict(run_set="rs", task="t1", condition="B0", seed=1, outcome="fail", patch_line=attack),
        dict(run_set="rs", task="t1", condition="B5", seed=1, agent_text="done " + attack, memory_text="note " + attack),
    ]).close()
    out = tmp_path / "site"
    write_site(LiveRunSet("rs", tmp_path / "runs" / "rs" / "events.avro"), tmp_path / "runs" / "rs", out)
    index = (out / "index.html").as_uri()
    with page_of(browser) as (page, problems):
        page.goto(index + "#/rs/rs?q=onerror")
        expect(page.locator("#search-state")).to_contain_text("units hold it", timeout=30_000)
        assert '<img class="injected" src=x onerror=' in page.locator("#units .hit").first.inner_text()
        page.goto(index + "#/unit/rs/suite%2Ft1%2FB5%2F1")
        page.wait_for_selector("section.session[data-session='2']", timeout=30_000)
        assert ("done " + attack) in page.locator("section.session[data-session='2']").inner_text()
        page.goto(index + "#/pair/rs/t1/1?conditions=B0,B5")
        page.wait_for_selector(".pair-session[data-session='2']", timeout=30_000)
        for d in page.locator("details").all():
            d.locator("summary").first.click()
        assert attack in page.locator(".pair-cell[data-condition='B5'] .memory-content").first.inner_text()
        assert attack in page.locator("#patch-diffs").inner_text()
        assert page.locator("img.injected").count() == 0 and page.title() != "owned"
        assert page.locator("script").count() == 1
        assert problems == []
        page.set_content(f"<p>{attack}</p>")  # control: as HTML, the text is an element
        assert page.locator("img.injected").count() == 1
