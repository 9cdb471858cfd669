"""A run set as a static site: the viewer's page and its answers as files (docs/viewer.md, "Static export").

The answers are the live viewer's (`membench.viewer.http_server.ViewApp`, `membench.viewer.paired`), computed once from
the event log and written as JavaScript files that assign them to a global, because a page opened
from disk (file://) cannot fetch(): the page (`static/app.js`) loads them with <script src>, which a
`script-src 'self'` policy allows, and never evaluates text. Layout of OUT:

    index.html               the viewer's page, marked static (<meta name="membench-static">) and CSP'd
    static/app.js, style.css the viewer's own files, unchanged
    data/site.js             the index: run set, file of each run, unit's cell, (trap, seed) pair, blob
    data/run_sets.js, data/run_set.js, data/runs/<n>.js, data/pairs/<n>.js, data/search.js
    runs/<run_set>/report.html   the run set's report (its matrix links reach ../../index.html#/…)
    blobs/<sha256>.txt       diffs too large for their event

Every JSON text is written ASCII-only with `<`, `>` and `&` escaped, so no logged text can end a
<script> element or hide a line terminator, wherever the file is placed.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

from membench.viewer.http_server import REPORT_CSP, SECURITY_HEADERS, static_file
from membench.viewer.paired import memory_items, patch_diff, scored_patch
from membench.viewer.state import LiveRunSet

MARKER = ".membench-site"  # names a directory this writer made, so a second export may replace it
PARTS = ("index.html", "static", "data", "runs", "blobs", MARKER)


def _meta_policy(policy: str) -> str:
    """A CSP as a <meta> element may carry it: `frame-ancestors` is ignored there (and warned about)."""
    return "; ".join(d for d in policy.split("; ") if not d.startswith("frame-ancestors"))


PAGE_CSP = _meta_policy(SECURITY_HEADERS["Content-Security-Policy"])
STATIC_REPORT_CSP = _meta_policy(REPORT_CSP)


class SiteError(ValueError):
    """OUT cannot be written (it holds other files), or the run set is unknown."""


def script_json(value: Any) -> str:
    """VALUE as a JSON text safe inside any script: ASCII, no `<`, `>` or `&` (escaped as \\u00XX)."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def data_file(name: str, value: Any) -> str:
    """The script that hands VALUE to the page under NAME (its path below OUT)."""
    return f"(window.MEMBENCH_DATA = window.MEMBENCH_DATA || {{}})[{script_json(name)}] = {script_json(value)};\n"


def prepare_out(out: Path) -> None:
    """OUT absent, empty, or a previous export (its parts removed); anything else is refused."""
    if out.exists() and not out.is_dir():
        raise SiteError(f"OUT_DIR: {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise SiteError(f"OUT_DIR: {out} is not empty and holds no earlier site export ({MARKER})")
        for name in PARTS:
            path = out / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def static_index(exported_at: str) -> str:
    """The viewer's index.html with relative asset paths, the static marker and its CSP as <meta>."""
    page = static_file("index.html").decode("utf-8")
    for old, new in (('href="/static/style.css"', 'href="static/style.css"'),
                     ('src="/static/app.js"', 'src="static/app.js"'),
                     ('<meta charset="utf-8">',
                      '<meta charset="utf-8">\n'
                      f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">\n'
                      '<meta name="referrer" content="no-referrer">\n'
                      '<meta name="membench-static" content="data/site.js">')):
        if old not in page:
            raise RuntimeError(f"membench/viewer/static/index.html no longer holds {old!r}")
        page = page.replace(old, new, 1)
    footer = page.index("<footer>"), page.index("</footer>")
    return (page[:footer[0]] + f"<footer>A static export of the run set's event log, made {exported_at}; it does "
            "not update.</footer>" + page[footer[1] + len("</footer>"):])


def static_report(html: str) -> str:
    """report.html with the policy the live viewer serves it under, as a <meta> (no server sends headers)."""
    head = '<meta charset="utf-8">'
    meta = f'<meta http-equiv="Content-Security-Policy" content="{STATIC_REPORT_CSP}">'
    at = html.find(head)
    if at < 0:
        at = html.lower().find("<head>")
        head = "<head>"
    if at < 0:
        return meta + html
    return html[:at + len(head)] + meta + html[at + len(head):]


def write_site(live: LiveRunSet, run_dir: Path, out: Path) -> dict[str, Any]:
    """Write the static site of LIVE (its directory RUN_DIR: blobs, report.html) into OUT; returns
    what was written (counts, bytes)."""
    from membench.bus.blobs import get_blob

    prepare_out(out)
    live.refresh()
    exported_at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
    blobs_dir = run_dir / "blobs"

    def write(name: str, text: str) -> None:
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def put(name: str, value: Any) -> None:
        write(name, data_file(name, value))

    overview = {**live.overview(), "live": False}  # a snapshot: nothing is being written to it
    detail = {**live.detail(), "live": False}
    run_set = live.run_set
    index: dict[str, Any] = {"run_set": run_set, "exported_at": exported_at, "runs": {}, "units": {}, "pairs": {},
                             "blobs": {}, "search": "data/search.js"}
    details: dict[str, dict[str, Any]] = {}
    for n, run_id in enumerate(live.run_ids()):
        run = live.run_detail(run_id)
        if run is None:
            continue
        for session in run["sessions"]:
            session["memory_items"] = memory_items(run, session)  # the paired view's columns read them
            for event in session["events"]:
                digest = event["payload"].get("production_diff_sha256") if event["kind"] == "PatchProduced" else None
                if digest and digest not in index["blobs"]:
                    data = get_blob(blobs_dir, digest)
                    if data is not None:
                        (out / "blobs").mkdir(exist_ok=True)
                        (out / "blobs" / f"{digest}.txt").write_bytes(data)
                        index["blobs"][digest] = f"blobs/{digest}.txt"
        details[run_id] = run
        name = f"data/runs/{n}.js"
        put(name, run)
        index["runs"][run_id] = name
    index["units"] = live.cell_run_ids()
    # one file per (trap, seed): which condition's cell is which run, and the scored patches' diffs
    # for every two conditions in ladder order (the page asks for its columns in that order)
    trap_seeds = sorted({(str(u["task"]), str(u["seed"])) for u in detail["units"] if u["task"] is not None})
    for n, (task, seed) in enumerate(trap_seeds):
        units = live.unit_ids(task, seed)
        available = [p["condition"] for p in detail["progress"] if p["condition"] in units]
        columns = {c: {"unit_id": units[c], "run_id": index["units"].get(units[c])} for c in available}
        patches = {}
        for c in available:
            run = details.get(columns[c]["run_id"] or "")
            if run is not None:
                patches[c] = scored_patch(run, lambda digest: get_blob(blobs_dir, digest))
        shown = [c for c in available if patches.get(c) is not None]
        diffs = [patch_diff(a, patches[a] or "", b, patches[b] or "") for i, a in enumerate(shown) for b in shown[i + 1:]]
        name = f"data/pairs/{n}.js"
        put(name, {"run_set": run_set, "task": task, "seed": seed, "available": available, "columns": columns,
                   "patched": shown, "patch_diffs": diffs})
        index["pairs"][f"{task}\u0000{seed}"] = name
    put("data/run_sets.js", {"run_sets": [overview]})
    put("data/run_set.js", detail)
    put("data/search.js", {"corpus": live.search_corpus()})
    put("data/site.js", index)
    write("index.html", static_index(exported_at))
    (out / "static").mkdir(exist_ok=True)
    for name in ("app.js", "style.css"):
        (out / "static" / name).write_bytes(static_file(name))
    report = run_dir / "report.html"
    has_report = report.is_file()
    if has_report:
        write(f"runs/{run_set}/report.html", static_report(report.read_text(encoding="utf-8")))
    (out / MARKER).write_text(f"membench export site {run_set} {exported_at}\n", encoding="utf-8")
    return {"run_set": run_set, "runs": len(index["runs"]), "units": len(index["units"]),
            "pairs": len(index["pairs"]), "blobs": len(index["blobs"]), "report": has_report,
            "bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file())}
