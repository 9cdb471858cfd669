"""`membench bench viewer`: what the live viewer's run-set page costs at a given number of units.

On a synthetic run set (`write_run_set`: UNITS runs of two sessions each, over traps × 2
conditions × 5 seeds, a third of the scored sessions failing, each run with a memory read, model
calls with a price, tool calls and a patch; written as a real events.avro) served by a real
`membench view` server (membench.viewer.http_server.ViewServer, over HTTP on loopback):

- **first answer**: GET /api/run_sets/<rs> on a fresh server: reading and folding the whole log,
  then the page's JSON (wall time, bytes);
- **poll**: the same GET again with nothing new in the log, as the page re-asks every 1.5 s (wall
  time, bytes; and with the ETag of the previous answer in If-None-Match: status and bytes);
- **search**: GET /api/run_sets/<rs>/search?q=… over every unit's trajectory (wall time, units hit);
- **unit**: GET of one unit's trajectory (wall time, bytes);
- **page** (with `--browser`, Playwright driving Chromium): the run-set page's first render
  (navigation until the units table shows its first page), a filter (condition), a sort (cost,
  then events descending), the in-page search of ids and reasons and the server's trajectory
  search (typed text until the page shows the hits; 250 ms of it is the page's debounce, and the
  server's answer is the one kept from the search above). The page is opened on a server that
  has read the log: its first render is a poll's answer, the JSON parsed and the first page drawn.

Each timed request is repeated and the median reported (the first answer once: it is a cold start).
Command: `membench bench viewer --units 10000` (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

RUN_SET = "bench-viewer"
CONDITIONS = ("B0", "B5")
SEEDS = 5
SEARCHED = "X-Ledger-Client"  # a literal only the failing runs' agent turns hold


def _units(units: int) -> list[tuple[str, str, int]]:
    """(trap, condition, seed) of each unit: traps in order, every condition and seed of a trap."""
    per_trap = len(CONDITIONS) * SEEDS
    return [(f"t{i // per_trap:05d}", CONDITIONS[(i // SEEDS) % len(CONDITIONS)], 1 + i % SEEDS)
            for i in range(units)]


def _fails(n: int) -> bool:
    """Whether the Nth unit's scored session fails: every third."""
    return n % 3 == 0


def _emit_unit(emitter: Any, trap: str, condition: str, seed: int, fails: bool) -> None:
    from membench.schemas.events import bounded_text

    def turn(role: str, text: str, tokens: tuple[int, int] = (0, 0)) -> dict:
        return {"role": role, "text": bounded_text(text), "source_event_id": None, "source_kind": None,
                "input_tokens": tokens[0], "cached_tokens": 0, "output_tokens": tokens[1], "reasoning_tokens": 0,
                "latency_ms": 400}

    emitter.emit("RunStarted", {
        "suite": "bench", "task": trap, "condition": condition, "seed": seed, "agent": "bench", "agent_kind": "scripted",
        "model": None, "budgets": {}, "code_digest": "0" * 64, "pack_digest": "1" * 64, "fixture_digest": "2" * 64,
        "skill_bank_digest": None, "attempt": 1, "construct": f"C{1 + int(trap[1:]) % 4}", "family": "bench"},
        visibility="harness")
    for index in (1, 2):
        scored = index == 2
        outcome = "fail" if scored and fails else "pass"
        emitter.session_index = index
        emitter.emit("SessionStarted", {"session_index": index, "instruction": bounded_text(f"step {index} of {trap}"),
                                        "start_state": "continuation", "workspace_digest": "3" * 64, "scored": scored,
                                        "oracle_id": f"o{index}"})
        emitter.emit("Turn", turn("user", f"do step {index} of {trap}: keep the client header on every request"))
        if condition != "B0":
            emitter.emit("MemoryRead", {"query": bounded_text(f"step {index}"), "candidates": ["m1", "m2"],
                                        "admitted_ids": ["m1"], "tokens_admitted": 40, "token_budget": 2000,
                                        "context": bounded_text("[m1] send the registered client id header")})
        emitter.emit("ModelCall", {
            "call_id": f"mc-{index}", "provider": "openai", "api": "chat", "model": "bench-model", "mode": "live",
            "status": "ok", "http_status": 200, "request_digest": "a" * 64, "match_digest": "b" * 64,
            "response_digest": "c" * 64, "recorded": False, "streamed": False, "chunks": 1, "input_tokens": 900,
            "cached_tokens": 0, "output_tokens": 80, "reasoning_tokens": 0, "latency_ms": 400, "first_byte_ms": 90,
            "cost_usd": 0.0021, "price": "bench", "error": None})
        for call in range(2):
            emitter.emit("ToolCall", {"call_id": f"c{index}-{call}", "name": "edit", "arguments_digest": "4" * 64,
                                      "is_patch": call == 1})
            emitter.emit("ToolResult", {"call_id": f"c{index}-{call}", "name": "edit", "exit_code": 0, "duration_ms": 3,
                                        "output_size": 2, "is_patch": call == 1, "output": bounded_text("ok")})
        said = f"sent {SEARCHED} only on the first request" if outcome == "fail" else "sent the header on every request"
        emitter.emit("Turn", turn("agent", said, (900, 80)))
        diff = "--- a/client.py\n+++ b/client.py\n@@ -1 +1,2 @@\n x = 1\n+headers = {'X-Client': ID}\n"
        emitter.emit("PatchProduced", {"files": ["client.py"], "added_lines": 1, "removed_lines": 0,
                                       "production_paths": ["client.py"], "test_paths": [], "stripped_paths": [],
                                       "diff_sha256": "5" * 64, "production_diff": diff,
                                       "production_diff_sha256": "6" * 64, "stripped_diff": None,
                                       "stripped_diff_sha256": None})
        emitter.emit("OracleVerdict", {"oracle_id": f"o{index}", "outcome": outcome,
                                       "cases": [{"case_id": "test_header", "outcome": outcome, "duration_ms": 4}],
                                       "exit_status": 0 if outcome == "pass" else 1, "inconclusive": False,
                                       "duration_ms": 40, "isolation": "process"}, visibility="harness")
        emitter.emit("SessionEnded", {"session_index": index, "status": "completed"})
    emitter.session_index = -1
    emitter.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")


def write_run_set(runs_dir: Path, units: int) -> Path:
    """A finished run set of UNITS units as runs_dir/<RUN_SET>/events.avro (sealed, chained events)."""
    from membench.bus.file import FileBus
    from membench.bus.emitter import RunEmitter

    path = runs_dir / RUN_SET / "events.avro"
    bus = FileBus(path)
    try:
        for n, (trap, condition, seed) in enumerate(_units(units)):
            unit_id = f"bench/{trap}/{condition}/{seed}"
            emitter = RunEmitter(RUN_SET, str(uuid.uuid5(uuid.NAMESPACE_URL, unit_id)), unit_id, bus.publish)
            _emit_unit(emitter, trap, condition, seed, fails=_fails(n))
            if n % 50 == 49:
                bus.flush()  # blocks of about 50 runs, as a running grid appends them
    finally:
        bus.close()
    return path


def _get(url: str, etag: str | None = None) -> tuple[int, bytes, dict[str, str], float]:
    request = urllib.request.Request(url, headers={"If-None-Match": etag} if etag else {})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            body = response.read()
            status, headers = response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:  # 304 Not Modified arrives as an HTTPError
        body, status, headers = exc.read(), exc.code, dict(exc.headers)
    return status, body, headers, time.perf_counter() - started


def _median_get(url: str, repeats: int, etag: str | None = None) -> tuple[int, bytes, dict[str, str], float]:
    answers = [_get(url, etag) for _ in range(repeats)]
    return answers[-1][0], answers[-1][1], answers[-1][2], statistics.median(a[3] for a in answers)


def page_figures(url: str, units: int, chromium: str) -> dict[str, float]:
    """Seconds the run-set page takes, in a headless Chromium, for each step of the docstring."""
    from playwright.sync_api import sync_playwright

    def timed(action, done: str, arg: Any = None) -> float:
        started = time.perf_counter()
        action()
        page.wait_for_function(done, arg=arg, timeout=600_000)
        return time.perf_counter() - started

    count = "(want) => (document.getElementById('units-count')?.textContent || '').startsWith(want)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            out = {"first_render": timed(lambda: page.goto(f"{url}#/rs/{RUN_SET}"), count, f"{units} of {units} units")}
            half = sum(1 for _, condition, _ in _units(units) if condition == "B5")
            out["filter"] = timed(lambda: page.select_option("#filter-condition", "B5"), count, f"{half} of {units}")
            out["sort"] = timed(lambda: page.locator("th[data-sort='cost_usd']").click(),
                                "() => location.hash.includes('sort=cost_usd')")
            out["sort_again"] = timed(lambda: page.locator("th[data-sort='events']").click(),
                                      "() => location.hash.includes('sort=events')")
            out["search_in_page"] = timed(lambda: page.fill("#unit-search", "t00001/B5"), count, f"{SEEDS} of {units}")
            hits = sum(1 for n in range(units) if _fails(n))
            out["search_trajectories"] = timed(
                lambda: page.fill("#unit-search", SEARCHED),
                "(want) => (document.getElementById('search-state')?.textContent || '') === want",
                f"trajectories searched: {hits} units hold it")
            return out
        finally:
            browser.close()


def bench_viewer(units: int, repeats: int = 5, directory: Path | None = None,
                 chromium: str | None = None) -> dict[str, Any]:
    """The figures of the module docstring for a synthetic run set of UNITS units (the page's too,
    given a CHROMIUM executable)."""
    from membench.viewer.http_server import ViewServer

    with tempfile.TemporaryDirectory(prefix="membench-bench-viewer-") as scratch:
        runs_dir = Path(directory or scratch) / "runs"
        started = time.perf_counter()
        log = write_run_set(runs_dir, units)
        written_s = time.perf_counter() - started
        server = ViewServer(runs_dir).start()
        try:
            base = f"{server.url}api/run_sets/{quote(RUN_SET, safe='')}"
            status, body, headers, first_s = _get(base)
            if status != 200:
                raise RuntimeError(f"GET {base}: HTTP {status}: {body[:200]!r}")
            detail = json.loads(body)
            if len(detail["units"]) != units or not detail["chain"]["ok"] or detail["dead_letters"]:
                raise RuntimeError(f"the viewer read {len(detail['units'])} of {units} units, chain ok "
                                   f"{detail['chain']['ok']}, {len(detail['dead_letters'])} events rejected")
            _, poll_body, poll_headers, poll_s = _median_get(base, repeats)
            etag = poll_headers.get("ETag")
            not_modified = _median_get(base, repeats, etag) if etag else None
            search_url = f"{base}/search?q={quote(SEARCHED)}"
            _, _, _, search_first_s = _get(search_url)  # reads the log back; the answer is then kept
            _, search_body, _, search_s = _median_get(search_url, repeats)
            unit_id = detail["units"][0]["unit_id"]
            _, unit_body, _, unit_s = _median_get(f"{base}/units/{quote(unit_id, safe='')}", repeats)
            page = page_figures(server.url, units, chromium) if chromium else None
        finally:
            server.close()
        return {
            "units": units, "events": detail["events"], "log_bytes": log.stat().st_size, "log_written_s": written_s,
            "repeats": repeats,
            "first_answer": {"seconds": first_s, "bytes": len(body), "bytes_per_unit": len(body) / units},
            "poll": {"seconds": poll_s, "bytes": len(poll_body), "etag": etag is not None},
            "poll_not_modified": None if not_modified is None else {
                "status": not_modified[0], "seconds": not_modified[3], "bytes": len(not_modified[1])},
            "search": {"first_seconds": search_first_s, "seconds": search_s, "units_hit": len(json.loads(search_body)["units"]),
                       "bytes": len(search_body)},
            "unit": {"seconds": unit_s, "bytes": len(unit_body)},
            "page": page,
        }


def format_lines(result: dict[str, Any]) -> list[str]:
    first, poll, search, unit = result["first_answer"], result["poll"], result["search"], result["unit"]
    lines = [f"run set: {result['units']} units, {result['events']} events, log {result['log_bytes'] / 1e6:.1f} MB "
             f"(written in {result['log_written_s']:.1f} s)",
             f"first answer (read and fold the log, then JSON): {first['seconds']:.2f} s, "
             f"{first['bytes'] / 1e6:.2f} MB ({first['bytes_per_unit']:.0f} B per unit)",
             f"poll, nothing new: median {poll['seconds'] * 1000:.0f} ms, {poll['bytes'] / 1e6:.2f} MB"]
    nm = result["poll_not_modified"]
    if nm is not None:
        lines.append(f"poll with If-None-Match: HTTP {nm['status']}, median {nm['seconds'] * 1000:.0f} ms, "
                     f"{nm['bytes']} bytes")
    lines += [f"search {SEARCHED!r} in every trajectory: first {search['first_seconds']:.2f} s, then (kept) "
              f"median {search['seconds'] * 1000:.0f} ms, {search['units_hit']} units hit",
              f"one unit's trajectory: median {unit['seconds'] * 1000:.1f} ms, {unit['bytes'] / 1e3:.1f} kB"]
    if result.get("page"):
        lines.append("page in Chromium: " + ", ".join(f"{k.replace('_', ' ')} {v:.2f} s" for k, v in result["page"].items()))
    return lines
