"""Adapters for external memory systems, speaking membench's memory protocol as JSON.

Every call is one JSON request and one JSON response:

    {"op": "write", "protocol": 1, "namespace": "<run set>/<condition>/<seed>/<sequence>",
     "events": [{"event_id", "session_index", "kind", "role", "source_kind", "source_event_id", "text",
                 "scope": [files, then symbols, of a delivered pack event; else []]}]}
    -> {"items": [{"id", "type", "text", "provenance": [event ids], "scope": [...]}]}  (what was stored; optional)
    {"op": "read", "protocol": 1, "namespace": ..., "query": "...", "budget_tokens": n}
    -> {"items": [{"id", "text", "type"}], "candidates": [ids]}           (in presentation order)

Every request also carries the namespace as mem0-style ids (`mem0_ids`), for systems whose API is
keyed by user / agent / run (Mem0's `add` and `search` take `user_id`, `agent_id`, `run_id`):

    "user_id":  "mb-<run set>-<condition>-s<seed>-<sequence>-<12 hex>"  one per namespace: the isolation key
    "agent_id": "mb-<condition>"                                          groups a condition's namespaces
    "run_id":   "mb-<run set>"                                            groups a run set's namespaces
    "metadata": {"run_set", "condition", "seed", "sequence"}             the namespace, unchanged

Ids hold only [A-Za-z0-9._-] (no colon or slash; other characters become "-", long parts are cut)
and the 12 hex digits are the start of the SHA-256 of the exact namespace string, so two namespaces
that sanitize alike still get different user_ids. An adapter must add AND search by user_id (as the
DreamBench-SWE Mem0 adapters do: one reset user_id per run/condition/seed/sequence); agent_id and
run_id alone would mix conditions or seeds and are for grouping and inspection only.

Transports: a command (`command: [argv...]`, run once per call, request on stdin, response on
stdout) or an HTTP endpoint (`url`, one POST per call). The system must keep its state per
namespace; membench sends only agent-visible events and enforces the read budget itself (items past
the budget are dropped, never cut). Adapters are registered by name with `register_external` or
from the environment variable MEMBENCH_MEMORY_ADAPTERS, a JSON object
{"name": {"command": [...]} or {"url": "http://..."}, ...}.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.text import pieces
from membench.schemas.events import Event, error_text

PROTOCOL = 1


class ExternalMemoryError(RuntimeError):
    pass


def _id_part(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:limit]


def mem0_ids(namespace: Namespace) -> dict[str, Any]:
    """The mem0-style ids of NAMESPACE (module docstring): user_id is unique per namespace."""
    digest = hashlib.sha256(str(namespace).encode()).hexdigest()[:12]
    return {"user_id": f"mb-{_id_part(namespace.run_set)}-{_id_part(namespace.condition)}-s{namespace.seed}-"
                       f"{_id_part(namespace.sequence)}-{digest}",
            "agent_id": f"mb-{_id_part(namespace.condition)}",
            "run_id": f"mb-{_id_part(namespace.run_set)}",
            "metadata": {"run_set": namespace.run_set, "condition": namespace.condition, "seed": namespace.seed,
                         "sequence": namespace.sequence}}


def command_transport(argv: list[str], timeout_s: float = 60.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def call(request: dict[str, Any]) -> dict[str, Any]:
        proc = subprocess.run(argv, input=json.dumps(request), capture_output=True, text=True, timeout=timeout_s)
        if proc.returncode != 0:
            raise ExternalMemoryError(f"memory command {argv[0]} exited {proc.returncode}: "
                                      f"{error_text(proc.stderr.strip()[-2000:])}")
        try:
            return json.loads(proc.stdout or "{}")
        except json.JSONDecodeError as exc:
            raise ExternalMemoryError(f"memory command {argv[0]}: response is not JSON ({exc})") from None

    return call


def http_transport(url: str, timeout_s: float = 60.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def call(request: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(url, data=json.dumps(request).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (configured endpoint)
                return json.loads(resp.read().decode() or "{}")
        except urllib.error.HTTPError as exc:  # the adapter's own words ("vector db down"), bounded and redacted
            body = exc.read(2000).decode("utf-8", "replace").strip()
            raise ExternalMemoryError(error_text(f"memory endpoint {url}: HTTP {exc.code}: {body or exc.reason}")) \
                from None
        except (OSError, json.JSONDecodeError) as exc:
            raise ExternalMemoryError(error_text(f"memory endpoint {url}: {exc}")) from None

    return call


class ExternalMemory:
    uses_memory = True

    def __init__(self, condition: str, namespace: Namespace, transport: Callable[[dict[str, Any]], dict[str, Any]],
                 setup: MemorySetup | None = None):
        self.condition = condition
        self.namespace = namespace
        self._call = transport
        self._scopes = (setup or MemorySetup()).event_scopes

    def _request(self, op: str, **fields: Any) -> dict[str, Any]:
        response = self._call({"op": op, "protocol": PROTOCOL, "namespace": str(self.namespace),
                               **mem0_ids(self.namespace), **fields})
        if not isinstance(response, dict):
            raise ExternalMemoryError(f"{self.condition}: {op} response must be a JSON object")
        return response

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        sent = [{"event_id": p.event_id, "session_index": p.session_index, "kind": "Turn", "role": p.label,
                 "source_kind": p.label if p.source_event_id else None, "source_event_id": p.source_event_id,
                 "text": p.text, "scope": list(self._scopes.get(p.source_event_id or "", ()))}
                for p in pieces(events)]
        if not sent:
            return []
        response = self._request("write", events=sent)
        return [MemoryItem(str(i["id"]), str(i.get("type", "external")), str(i.get("text", "")),
                           tuple(i.get("provenance", ())), tuple(i.get("scope", ()))) for i in response.get("items", [])]

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        response = self._request("read", query=query, budget_tokens=budget_tokens)
        admitted, used = [], 0
        for raw in response.get("items", []):
            item = MemoryItem(str(raw["id"]), str(raw.get("type", "external")), str(raw.get("text", "")), (), ())
            if used + item.tokens > budget_tokens:
                continue
            admitted.append(item)
            used += item.tokens
        candidates = tuple(str(c) for c in response.get("candidates", [i.memory_id for i in admitted]))
        return MemoryContext(tuple(admitted), candidates, budget_tokens)


def external_factory(name: str, command: list[str] | None = None, url: str | None = None,
                     timeout_s: float = 60.0) -> Callable[[Namespace], ExternalMemory]:
    if (command is None) == (url is None):
        raise ValueError(f"external memory '{name}': give exactly one of command or url")
    transport = command_transport(command, timeout_s) if command is not None else http_transport(url or "", timeout_s)

    def make(namespace: Namespace, setup: MemorySetup | None = None) -> ExternalMemory:
        return ExternalMemory(name, namespace, transport, setup)

    make.condition = name  # type: ignore[attr-defined]
    make.accepts_setup = True  # type: ignore[attr-defined]
    # what the adapter is (its conformance configuration, registry.configuration)
    make.spec = {"command": command, "url": url, "timeout_s": timeout_s}  # type: ignore[attr-defined]
    return make


def adapters_from_env(value: str | None) -> dict[str, Callable[[Namespace], ExternalMemory]]:
    if not value:
        return {}
    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"MEMBENCH_MEMORY_ADAPTERS is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ValueError("MEMBENCH_MEMORY_ADAPTERS must be a JSON object {name: {command|url}}")
    return {name: external_factory(name, spec.get("command"), spec.get("url"), float(spec.get("timeout_s", 60)))
            for name, spec in config.items()}
