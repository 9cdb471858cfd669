"""A minimal MCP client over stdio (JSON-RPC 2.0, one message a line), for memory servers that
membench starts on the host (membench/memory_systems/mcp_servers.py).

It speaks only what a memory server needs: `initialize`, `tools/list`, `tools/call`. Server
notifications and requests (logging, resource updates, roots) are read and dropped: a request from
the server is answered with "method not found" so that it never waits on us.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


class McpError(RuntimeError):
    """The server failed to start, died, timed out or answered a JSON-RPC error."""


class StdioMcpClient:
    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None,
                 timeout_s: float = 60.0, start_timeout_s: float = 120.0):
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self._next = 0
        self._lock = threading.Lock()
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._stderr: list[str] = []
        try:
            self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, cwd=cwd,
                                          text=True, encoding="utf-8", bufsize=1)
        except OSError as exc:
            raise McpError(f"cannot start MCP server {self.argv[0]}: {exc}") from None
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.server_info = self.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "membench", "version": "1"}}, timeout_s=start_timeout_s)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    # ------------------------------------------------------------------ wire
    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a server that logs to stdout: not a message
            if not isinstance(message, dict):
                continue
            if "method" in message:
                if "id" in message:  # a request from the server: we offer no client features
                    self._send({"jsonrpc": "2.0", "id": message["id"],
                                "error": {"code": -32601, "message": "not supported by membench"}})
                continue
            self._answers.put(message)
        self._answers.put(None)

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._stderr.append(line.rstrip())
            del self._stderr[:-40]

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            try:  # its exit status and last words, which its stderr reader may not have read yet
                code = self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            time.sleep(0.2)
            raise McpError(f"MCP server {' '.join(self.argv)[:300]} is gone (exit status {code}): {exc}; "
                           f"stderr: {self.stderr_tail() or '(nothing)'}") from None

    def stderr_tail(self) -> str:
        return " | ".join(self._stderr[-6:])[-1500:]

    def request(self, method: str, params: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        with self._lock:  # one call at a time: answers come back in order
            self._next += 1
            ident = self._next
            self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
            while True:
                try:
                    answer = self._answers.get(timeout=timeout_s or self.timeout_s)
                except queue.Empty:
                    raise McpError(f"MCP server {self.argv[0]}: no answer to {method} within "
                                   f"{timeout_s or self.timeout_s:.0f} s") from None
                if answer is None:
                    raise McpError(f"MCP server {self.argv[0]} exited ({self._proc.poll()}) during {method}; "
                                   f"stderr: {self.stderr_tail()}")
                if answer.get("id") == ident:
                    break
        if "error" in answer:
            error = answer["error"] or {}
            raise McpError(f"MCP server {self.argv[0]}: {method}: {error.get('message', error)}")
        return answer.get("result") or {}

    # ------------------------------------------------------------------ MCP
    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += result.get("tools") or []
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's result ({content: [...], isError, structuredContent?}) as the server sent it."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()  # stdio servers exit at the end of their input
            except OSError:
                pass
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        for stream in (self._proc.stdout, self._proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


def result_text(result: dict[str, Any]) -> str:
    """The text a tool returned: its text contents joined, else its structured content as JSON."""
    texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    if result.get("structuredContent") is not None:
        return json.dumps(result["structuredContent"], sort_keys=True)
    return ""
