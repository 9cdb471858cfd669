"""The viewer's HTTP server: the page's three static files and a read-only JSON API (docs/viewer.md).

Standard library only (`http.server.ThreadingHTTPServer`). Every answer is computed from the run
sets' event logs by `membench.viewer.state`; nothing is written, and no warehouse is opened.

    GET /                                  the page (index.html; app.js and style.css under /static/)
    GET /api/run_sets                      every run set under the runs directory, with its progress
    GET /api/run_sets/<run_set>            progress per condition, ladder, units, chain, log position
    GET /api/runs/<run_id>                 one run's trajectory by session, derived rows, chain status
    GET /api/run_sets/<run_set>/units/<unit_id>        the trajectory of the unit's cell (its run)
    GET /api/run_sets/<run_set>/pair/<task>/<seed>     the paired view (?conditions=B0,B5)
    GET /api/run_sets/<run_set>/search?q=TEXT          units whose turns, tool output or memory hold TEXT
    GET /api/blobs/<run_set>/<sha256>      a diff too large to sit in its PatchProduced event
    GET /runs/<run_set>/report.html        the run set's report, its links leading back into the page

Bound to loopback, the server answers only requests whose Host header names a loopback address, so
a web page elsewhere cannot read the API through DNS rebinding.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from membench.viewer.state import Catalog

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/style.css": ("style.css", "text/css; charset=utf-8"),
}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RUN_ID = re.compile(r"^[0-9A-Za-z._-]{1,128}$")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# report.html is one self-contained document: inline style, inline SVG, no script at all
REPORT_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; "
              "frame-ancestors 'none'")
REPORT_TYPE = "text/html; charset=utf-8; report"  # route's marker: served under REPORT_CSP
MAX_QUERY = 200  # characters of a search
# a JSON answer carries an ETag (a digest of its body): the page re-asks every 1.5 s naming the
# last one it got, and an answer that has not changed (a finished run set: about 1 KB per unit)
# comes back as a bodiless 304, the page reusing the answer it holds


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def matches(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match names ETAG (a list of tags, weak or strong, or *)."""
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or etag in tags or f"W/{etag}" in tags


class NotFound(LookupError):
    pass


class BadRequest(ValueError):
    pass


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_of(header: str) -> str:
    """The host part of a Host header (`name`, `name:port`, `[v6]:port`)."""
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def static_file(name: str) -> bytes:
    return resources.files("membench.viewer").joinpath("static", name).read_bytes()


class ViewApp:
    """The API's answers, independent of HTTP (tests call it directly)."""

    def __init__(self, runs_dir: Path, catalog: Any = None):
        self.catalog = catalog if catalog is not None else Catalog(runs_dir)

    def run_sets(self) -> dict[str, Any]:
        return {"run_sets": [live.overview() for live in self.catalog.all()]}

    def run_set(self, run_set: str) -> dict[str, Any]:
        live = self.catalog.get(run_set)
        if live is None:
            raise NotFound(f"no run set {run_set!r}")
        return live.detail()

    def run(self, run_id: str) -> dict[str, Any]:
        live = self.catalog.find_run(run_id) if _RUN_ID.match(run_id) else None
        detail = live.run_detail(run_id) if live is not None else None
        if detail is None:
            raise NotFound(f"no run {run_id!r}")
        return detail

    def blob(self, run_set: str, digest: str) -> bytes:
        from membench.bus.blobs import get_blob

        if self.catalog.get(run_set, refresh=False) is None or not _SHA256.match(digest):
            raise NotFound("no such blob")
        data = get_blob(self.catalog.runs_dir / run_set / "blobs", digest)
        if data is None:
            raise NotFound(f"blob {digest} is missing or does not hash to its name")
        return data

    def unit(self, run_set: str, unit_id: str) -> dict[str, Any]:
        live = self._live(run_set)
        run_id = live.cell_run_id(unit_id)
        detail = live.run_detail(run_id) if run_id is not None else None
        if detail is None:
            raise NotFound(f"no unit {unit_id!r} in run set {run_set!r}")
        return detail

    def pair(self, run_set: str, task: str, seed: str, conditions: list[str] | None) -> dict[str, Any]:
        from membench.viewer.paired import pair_view

        live = self._live(run_set)
        answer = pair_view(live, self.catalog.runs_dir / run_set / "blobs", task, seed, conditions)
        if answer is None:
            raise NotFound(f"no unit of trap {task!r} seed {seed!r} in run set {run_set!r}")
        return answer

    def search(self, run_set: str, query: str) -> dict[str, Any]:
        if not query.strip() or len(query) > MAX_QUERY:
            raise BadRequest(f"search: q must be 1 to {MAX_QUERY} characters")
        return self._live(run_set).search(query)

    def report(self, run_set: str) -> bytes:
        self._live(run_set, refresh=False)
        path = self.catalog.runs_dir / run_set / "report.html"
        try:
            return path.read_bytes()
        except OSError:
            raise NotFound(f"run set {run_set!r} has no report.html yet (written when its run ends)") from None

    def _live(self, run_set: str, refresh: bool = True) -> Any:
        live = self.catalog.get(run_set, refresh=refresh)
        if live is None:
            raise NotFound(f"no run set {run_set!r}")
        return live

    def route(self, path: str, query: str = "") -> tuple[bytes, str]:
        """(body, content type) for a GET of `path` (and its query string); NotFound otherwise."""
        if path in STATIC:
            name, content_type = STATIC[path]
            return static_file(name), content_type
        parts = [unquote(p) for p in path.strip("/").split("/")]
        params = parse_qs(query)
        if len(parts) == 3 and parts[0] == "runs" and parts[2] == "report.html":
            return self.report(parts[1]), REPORT_TYPE
        if parts[0] != "api":
            raise NotFound(path)
        if parts[1:] == ["run_sets"]:
            answer: Any = self.run_sets()
        elif len(parts) >= 5 and parts[1] == "run_sets" and parts[3] == "units":
            answer = self.unit(parts[2], "/".join(parts[4:]))  # a unit id's slashes, escaped or not
        elif len(parts) == 6 and parts[1] == "run_sets" and parts[3] == "pair":
            named = [c for v in params.get("conditions", []) for c in v.split(",") if c]
            answer = self.pair(parts[2], parts[4], parts[5], named or None)
        elif len(parts) == 4 and parts[1] == "run_sets" and parts[3] == "search":
            answer = self.search(parts[2], (params.get("q") or [""])[0])
        elif len(parts) == 3 and parts[1] == "run_sets":
            return self._live(parts[2]).detail_json(), "application/json"  # run_set(), encoded and kept
        elif len(parts) == 3 and parts[1] == "runs":
            answer = self.run(parts[2])
        elif len(parts) == 4 and parts[1] == "blobs":
            return self.blob(parts[2], parts[3]), "text/plain; charset=utf-8"
        else:
            raise NotFound(path)
        return json.dumps(answer, allow_nan=False).encode(), "application/json"


def make_handler(app: ViewApp, loopback_only: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "membench-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass  # quiet: the page polls every second or two

        def _send(self, status: int, body: bytes, content_type: str, head: bool = False,
                  etag: str | None = None) -> None:
            headers = dict(SECURITY_HEADERS)
            if content_type == REPORT_TYPE:
                content_type, headers["Content-Security-Policy"] = "text/html; charset=utf-8", REPORT_CSP
            if etag is not None:
                headers["ETag"] = etag
            self.send_response(status)
            if status == HTTPStatus.NOT_MODIFIED:
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                return
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if not head:
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the page went away (navigated, closed) while a large answer was sent

        def _error(self, status: HTTPStatus, message: str, head: bool = False) -> None:
            self._send(status, json.dumps({"error": message}).encode(), "application/json", head)

        def _answer(self, head: bool) -> None:
            if loopback_only and not is_loopback(_host_of(self.headers.get("Host", ""))):
                self._error(HTTPStatus.FORBIDDEN, "this viewer answers only to a loopback Host", head)
                return
            url = urlsplit(self.path)
            try:
                body, content_type = app.route(url.path, url.query)
            except NotFound as exc:
                self._error(HTTPStatus.NOT_FOUND, str(exc), head)
                return
            except BadRequest as exc:
                self._error(HTTPStatus.BAD_REQUEST, str(exc), head)
                return
            except Exception as exc:  # noqa: BLE001 - the page shows the error; the server keeps serving
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}", head)
                return
            if content_type != "application/json":
                self._send(HTTPStatus.OK, body, content_type, head)
                return
            etag = etag_of(body)
            if matches(self.headers.get("If-None-Match"), etag):
                self._send(HTTPStatus.NOT_MODIFIED, b"", content_type, head, etag)
            else:
                self._send(HTTPStatus.OK, body, content_type, head, etag)

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self._answer(head=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(head=True)

        def _refuse(self) -> None:
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the viewer is read-only")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

    return Handler


class _ServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ViewServer:
    """A running viewer. `url` names it; `close` stops it."""

    def __init__(self, runs_dir: Path, host: str = "127.0.0.1", port: int = 0, kafka_dsn: str | None = None):
        """Over the file logs under `runs_dir`, or, given `kafka_dsn`, over that namespace's
        trajectory topic (blobs still read from `runs_dir`)."""
        catalog = None
        if kafka_dsn is not None:
            from membench.viewer.state import KafkaCatalog

            catalog = KafkaCatalog(kafka_dsn, runs_dir)
        self.app = ViewApp(runs_dir, catalog)
        server_class = _ServerV6 if ":" in host else ThreadingHTTPServer
        try:
            self.httpd = server_class((host.strip("[]"), port), make_handler(self.app, is_loopback(host)))
        except OSError:
            if catalog is not None:
                catalog.close()
            raise
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = str(self.httpd.server_address[0]), self.httpd.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.25)

    def start(self) -> "ViewServer":
        """Serve from a background thread (tests)."""
        self._thread = threading.Thread(target=self.serve_forever, name="membench-view", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.app.catalog.close()
