"""The frozen pre-evaluation conformance suite of a memory system (`membench memory check`,
docs/memory-systems.md), after DreamBench-SWE's external audit: a library or external condition is
measured only once it has passed.

The suite runs twice, in two fresh processes (`python -m membench.memory_systems.conformance`,
request on stdin, result on stdout), each on a fresh store, with the same CSPRNG tokens (drawn once
by the parent, one per secret class of the pack format: SECRET_CLASSES). Gates:

- `literal_round_trip`: a namespace is given one session whose delivered events each carry one
  token; a read per class (the read budget CHECK_BUDGET) must return that token byte-exact;
- `cross_process_identity`: the normalized context of every read (the items' texts in presentation
  order, whitespace collapsed; ids dropped, they may be random) is the same in both processes;
- `namespace_isolation`: a second namespace written with other tokens never returns a token of the
  first, nor the first one of the second;
- `empty_namespace`: a namespace never written returns nothing;
- `read_budget`: no read admits more tokens than its budget (also at a small budget, SMALL_BUDGET);
- `errors_timeouts`: no operation raises, none takes longer than OP_TIMEOUT_S (a system that starts
  a server process, an MCP memory server, declares its start's own limit, `start_timeout_s`);
- `no_network`: the process opens no connection but to the model gateway's sockets and the
  configured upstream (a `sys.addaudithook` on `socket.connect` and `socket.getaddrinfo`).

The verdict is `pass` when every gate passes, else `fail` naming the failed gates. A record holds
the configuration (`configuration`: settings, code digests, versions, memory model and upstream,
membench/memory_systems/admission.py), its digest, each gate's verdict and evidence, and the repair
budget: REPAIR_BUDGET recorded attempts (distinct configurations of a condition) — once spent
without a pass, the condition stays unavailable.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import string
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

GATES = ("literal_round_trip", "cross_process_identity", "namespace_isolation", "empty_namespace", "read_budget",
         "errors_timeouts", "no_network")
CHECK_BUDGET = 2000  # the runner's default read budget (membench/runner/grid.py DEFAULT_READ_BUDGET)
SMALL_BUDGET = 24
OP_TIMEOUT_S = 60.0
CHILD_TIMEOUT_S = 900.0
REPAIR_BUDGET = 3
SUITE_VERSION = 1  # frozen: a change of the suite is a new version, and old records no longer admit


def _draw(alphabet: str, n: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


# the pack format's secret classes (membench/pipeline/report_inputs.py CLASS_PATTERNS), drawn with a CSPRNG
SECRET_CLASSES: dict[str, Callable[[], str]] = {
    "hex8": lambda: _draw("0123456789abcdef", 8),
    "hex12": lambda: _draw("0123456789abcdef", 12),
    "hex16": lambda: _draw("0123456789abcdef", 16),
    "token": lambda: _draw(string.ascii_letters + string.digits, 16),
    "word": lambda: _draw(string.ascii_uppercase, 8),
    "int": lambda: _draw(string.digits, 4),
}
TOPICS = {"hex8": "deploy region tag", "hex12": "cache shard prefix", "hex16": "webhook signing salt",
          "token": "partner api token", "word": "release codename", "int": "service port pin"}


def draw_tokens() -> dict[str, dict[str, str]]:
    """Tokens for the two written namespaces: {"a": {class: token}, "b": {class: token}}."""
    return {ns: {cls: make() for cls, make in SECRET_CLASSES.items()} for ns in ("a", "b")}


def fact(cls: str, token: str) -> str:
    return f"The {TOPICS[cls]} of the conformance project is {token}."


def question(cls: str) -> str:
    return f"What is the {TOPICS[cls]} of the conformance project?"


def normalize(texts: list[str]) -> list[str]:
    return [" ".join(t.split()) for t in texts]


# ------------------------------------------------------------------------------------- the child
def _turn(run_set: str, n: int, text: str, source: str | None, role: str = "user"):
    from membench.schemas.events import Event, bounded_text

    return Event(event_id=f"conf-{n}", run_set=run_set, run_id="conformance", unit_id="conformance", session_index=1,
                 seq=n, ts=0, producer="conformance", kind="Turn", visibility="agent", prev_hash="0" * 64,
                 payload={"role": role, "text": bounded_text(text), "source_event_id": source,
                          "source_kind": "decision" if source else None, "input_tokens": 0, "cached_tokens": 0,
                          "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})


def _session(run_set: str, tokens: dict[str, str]) -> list:
    events = [_turn(run_set, 0, "Configure the conformance project.", None)]
    events += [_turn(run_set, i, fact(cls, tok), f"conf-{cls}") for i, (cls, tok) in enumerate(tokens.items(), 1)]
    return events


class _NetworkAudit:
    """Every connection the process opens that is neither a Unix socket under ALLOWED_DIRS nor the
    configured upstream's host:port; DNS lookups of any other host."""

    def __init__(self, allowed_hosts: set[tuple[str, int]]):
        self.allowed = allowed_hosts
        self.violations: list[str] = []
        self.active = False

    def __call__(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event == "socket.connect":
            address = args[1]
            if isinstance(address, (str, bytes)):  # a Unix socket: the gateway's channels (private dirs)
                return
            host, port = address[0], address[1]
            if (str(host), int(port)) not in self.allowed and len(self.violations) < 20:
                self.violations.append(f"connect {host}:{port}")
        elif event == "socket.getaddrinfo":
            host = args[0]
            host = host.decode() if isinstance(host, bytes) else str(host)
            if host not in {h for h, _ in self.allowed} and len(self.violations) < 20:
                self.violations.append(f"getaddrinfo {host}")


def probe(request: dict[str, Any]) -> dict[str, Any]:
    """One process's run of the suite (module docstring); REQUEST: condition, tokens, memory_model,
    base_urls, timeout_s."""
    from urllib.parse import urlsplit

    from membench.gateway.preflight import targets_for
    from membench.gateway.server import GatewaySettings, ModelGateway, keys_from_env
    from membench.memory_systems.base import MemorySetup, Namespace
    from membench.memory_systems.model_client import MemoryModel
    from membench.memory_systems.registry import make_memory, register_adapters_from_env, register_plugins

    register_adapters_from_env(os.environ)
    register_plugins()
    condition, tokens = request["condition"], request["tokens"]
    from membench.memory_systems.registry import MEMORY_SYSTEMS

    start_limit = getattr(MEMORY_SYSTEMS.get(condition), "start_timeout_s", None)
    allowed = set()
    for url in (request.get("base_urls") or {}).values():
        parts = urlsplit(url)
        allowed.add((parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)))
    for spec_url in request.get("adapter_urls") or []:
        parts = urlsplit(spec_url)
        allowed.add((parts.hostname or "", parts.port or 80))
    audit = _NetworkAudit(allowed)
    sys.addaudithook(audit)
    run_set = f"conformance-{uuid.uuid4().hex[:12]}"  # a fresh namespace set per process
    store = tempfile.mkdtemp(prefix="membench-conformance-")
    calls: list[dict[str, Any]] = []
    models: list[Any] = []
    gateway = None
    if request.get("memory_model"):
        # the memory model is the configured target: a failure its probe reproduces is the model's
        gateway = ModelGateway(GatewaySettings(dict(request.get("base_urls") or {}), keys_from_env(),
                                               timeout_s=float(request.get("timeout_s", 120))),
                               targets=targets_for(None, request["memory_model"]))

    def emit(kind: str, payload: Mapping[str, Any], visibility: str = "harness") -> None:
        if kind == "ModelCall":
            calls.append({k: payload.get(k) for k in ("api", "purpose", "status", "latency_ms")})

    ops: list[dict[str, Any]] = []

    def timed(what: str, fn, *args, limit_s: float | None = None):
        started = time.monotonic()
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 (recorded as evidence: the gate fails)
            ops.append({"op": what, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            return None
        finally:
            elapsed = time.monotonic() - started
            ops.append({"op": what, "seconds": round(elapsed, 3), **({"limit_s": limit_s} if limit_s else {})})

    def memory(name: str, seed: int):
        model = MemoryModel(request["memory_model"], gateway, f"conformance/{name}/{condition}/{seed}", emit) \
            if gateway is not None else None
        if model is not None:
            models.append(model)
        namespace = Namespace(run_set, condition, seed, f"probe-{name}")
        # a system that starts a server process declares how long its start may take (the server's
        # own start-up: imports, its index); every operation on the memory keeps OP_TIMEOUT_S
        return timed(f"start {name}", make_memory, condition, namespace,
                     MemorySetup(model=model, store_dir=__import__("pathlib").Path(store)), limit_s=start_limit)

    audit.active = True
    try:
        a, b, empty = memory("a", 1), memory("b", 2), memory("empty", 3)
        reads: dict[str, Any] = {}
        if a is not None:
            timed("write a", a.write, _session(run_set, tokens["a"]))
        if b is not None:
            timed("write b", b.write, _session(run_set, tokens["b"]))
        for ns, mem in (("a", a), ("b", b), ("empty", empty)):
            for cls in SECRET_CLASSES:
                ctx = timed(f"read {ns} {cls}", mem.read, question(cls), CHECK_BUDGET) if mem is not None else None
                reads[f"{ns}/{cls}"] = None if ctx is None else {
                    "texts": [i.text for i in ctx.items], "tokens": ctx.tokens_admitted, "budget": CHECK_BUDGET}
        small = timed("read a small", a.read, question("token"), SMALL_BUDGET) if a is not None else None
    finally:
        audit.active = False
        for model in models:
            model.close()
        # a system that runs a server process (an MCP memory server) says how that process is kept
        # off the network, which the audit hook of this process cannot see; and stops it
        isolation = sorted({str(m.network_isolation) for m in (a, b, empty) if getattr(m, "network_isolation", None)})
        for mem in (a, b, empty):
            if hasattr(mem, "close"):
                timed("close", mem.close)
        shutil.rmtree(store, ignore_errors=True)  # the probe's store is this process's alone
    return {"reads": reads, "small": None if small is None else {"tokens": small.tokens_admitted,
                                                                  "budget": SMALL_BUDGET},
            "ops": ops, "network": audit.violations, "calls": calls, "server_isolation": isolation}


# ------------------------------------------------------------------------------------- the parent
def run_child(request: dict[str, Any]) -> dict[str, Any]:
    """PROBE in a fresh Python process (nothing of this process's state, caches or stores)."""
    proc = subprocess.run([sys.executable, "-m", "membench.memory_systems.conformance"], input=json.dumps(request),
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=dict(os.environ))
    if proc.returncode != 0:
        return {"crashed": f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"crashed": f"no result: {proc.stdout[-500:]} {proc.stderr[-1000:]}"}


def _normalized(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if v is None else normalize(v["texts"])) for k, v in sorted(result.get("reads", {}).items())}


def grade(tokens: dict[str, dict[str, str]], first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Each gate's verdict and evidence from the two processes' results (pure)."""
    gates: dict[str, dict[str, Any]] = {}
    crashed = [r["crashed"] for r in (first, second) if "crashed" in r]
    if crashed:
        return {g: {"verdict": "fail", "evidence": f"the probe process crashed: {crashed[0]}"} for g in GATES}
    reads = first["reads"]

    def text(key: str) -> str:
        return "\n".join((reads.get(key) or {}).get("texts", []))

    missing = [cls for cls, tok in tokens["a"].items() if tok not in text(f"a/{cls}")]
    # what each failing read returned beside the token it should have carried
    returned = {f"a/{cls}": {"expected": tokens["a"][cls], "returned": text(f"a/{cls}")[:300] or "(nothing)"}
                for cls in missing}
    gates["literal_round_trip"] = {"verdict": "fail" if missing else "pass",
                                   "evidence": {"classes": sorted(SECRET_CLASSES), "missing": missing,
                                                "reads": returned}}
    d1, d2 = _normalized(first), _normalized(second)
    differ = [k for k in d1 if d1[k] != d2.get(k)]
    digest = lambda d: hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()  # noqa: E731
    gates["cross_process_identity"] = {"verdict": "fail" if differ else "pass",
                                       "evidence": {"digests": [digest(d1), digest(d2)], "differing_reads": differ}}
    leaks = [f"{ns}/{cls} holds a token of {other} ({other}/{leaked} {tok})" for ns, other in (("a", "b"), ("b", "a"))
             for cls in SECRET_CLASSES for leaked, tok in tokens[other].items() if tok in text(f"{ns}/{cls}")]
    gates["namespace_isolation"] = {"verdict": "fail" if leaks else "pass", "evidence": {"leaks": leaks[:12]}}
    nonempty = [k for k, v in reads.items() if k.startswith("empty/") and (v is None or v["texts"])]
    gates["empty_namespace"] = {"verdict": "fail" if nonempty else "pass", "evidence": {"nonempty_reads": nonempty}}
    over = [k for r in (first, second) for k, v in r["reads"].items() if v is not None and v["tokens"] > v["budget"]]
    over += [f"small ({r['small']['tokens']} > {SMALL_BUDGET})" for r in (first, second)
             if r.get("small") and r["small"]["tokens"] > SMALL_BUDGET]
    gates["read_budget"] = {"verdict": "fail" if over else "pass",
                            "evidence": {"budget": CHECK_BUDGET, "small_budget": SMALL_BUDGET, "over": over}}
    errors = [o for r in (first, second) for o in r["ops"] if "error" in o]
    slow = [o for r in (first, second) for o in r["ops"] if o.get("seconds", 0) > o.get("limit_s", OP_TIMEOUT_S)]
    failed_calls = [c for r in (first, second) for c in r.get("calls", []) if c.get("status") not in ("ok",)]
    gates["errors_timeouts"] = {"verdict": "fail" if errors or slow or failed_calls else "pass",
                                "evidence": {"errors": errors[:6], "slow": slow[:6], "failed_model_calls": failed_calls[:6],
                                             "timeout_s": OP_TIMEOUT_S,
                                             "max_seconds": max([o.get("seconds", 0) for r in (first, second)
                                                                 for o in r["ops"]] or [0])}}
    network = sorted({v for r in (first, second) for v in r.get("network", [])})
    isolation = sorted({i for r in (first, second) for i in r.get("server_isolation", [])})
    gates["no_network"] = {"verdict": "fail" if network else "pass",
                           "evidence": {"violations": network, **({"server_isolation": isolation} if isolation else {})}}
    return gates


def evidence_lines(evidence: Any, limit: int = 6) -> list[str]:
    """A failed gate's evidence as text lines (`memory check`'s text output): each non-empty field,
    a list item or a read per line, values cut at 300 characters."""
    def cut(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        return text if len(text) <= 300 else text[:297] + "…"

    if not isinstance(evidence, dict):
        return [cut(evidence)]
    lines = []
    for key, value in evidence.items():
        if value in ([], {}, None, ""):
            continue
        if isinstance(value, list) and all(isinstance(item, (str, int, float)) and len(str(item)) < 40
                                           for item in value):
            lines.append(f"{key}: {cut(', '.join(map(str, value)))}")
        elif isinstance(value, list):
            lines += [f"{key}: {cut(item)}" for item in value[:limit]]
            lines += [f"{key}: … {len(value) - limit} more"] if len(value) > limit else []
        elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            lines += [f"{key} {name}: {cut(item)}" for name, item in list(value.items())[:limit]]
        else:
            lines.append(f"{key}: {cut(value)}")
    return lines


def check(condition: str, memory_model: str | None = None, base_urls: dict[str, str] | None = None,
          timeout_s: float = 120.0) -> dict[str, Any]:
    """The suite against CONDITION in two fresh processes: {gates, verdict, failed}."""
    tokens = draw_tokens()
    adapter_urls = []
    try:  # an external HTTP adapter's own endpoint is where its memory lives: not a leak
        for spec in json.loads(os.environ.get("MEMBENCH_MEMORY_ADAPTERS") or "{}").values():
            if isinstance(spec, dict) and spec.get("url"):
                adapter_urls.append(spec["url"])
    except ValueError:
        pass
    request = {"condition": condition, "tokens": tokens, "memory_model": memory_model, "base_urls": base_urls or {},
               "timeout_s": timeout_s, "adapter_urls": adapter_urls}
    first, second = run_child(request), run_child(request)
    gates = grade(tokens, first, second)
    failed = [g for g in GATES if gates[g]["verdict"] != "pass"]
    calls = first.get("calls", []) + second.get("calls", [])
    by_purpose: dict[str, int] = {}
    for call in calls:  # which of the system's calls the gate exercised (e.g. native Mem0's extraction: `sleep`)
        by_purpose[str(call.get("purpose"))] = by_purpose.get(str(call.get("purpose")), 0) + 1
    return {"suite_version": SUITE_VERSION, "gates": gates, "verdict": "fail" if failed else "pass", "failed": failed,
            "model_calls": len(calls), "model_calls_by_purpose": dict(sorted(by_purpose.items()))}


def main() -> None:
    request = json.loads(sys.stdin.read())
    result = probe(request)
    sys.stdout.write("\n" + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
