"""A real HTTP server playing an external memory store, for the external adapter's tests
(membench/memory_systems/external.py): POSTed JSON in, JSON out, on an ephemeral local port."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


@contextmanager
def json_memory_server(respond: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[int]:
    """Serve RESPOND (request body -> response body) until the block ends; yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(respond(req)).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
