"""The gateway's pre-flight probe: is the harness configured to reach each model the run names?

One cheap call per (provider, wire API, model) the grid uses — the agent's, the memory policy's,
the transfer model user's — sent through a gateway channel exactly as an agent's call would be
(same upstream URL, same key, same path), so a passing probe proves the configuration an agent
will use: the key is accepted, the endpoint is reachable, it speaks that wire API (Codex needs the
Responses API, Claude Code the Messages API), and it knows the model.

The probe runs twice in a run's life (docs/gateway.md, "Pre-flight"):
- before any unit runs (`membench run`, unless `--no-preflight`): a failure is a usage error
  naming the provider, URL, HTTP status and the fix, and nothing is written;
- during a run, when an agent's call is refused with 401/403/404/405 (`Channel` in server.py):
  the gateway probes the *configured* model again. A failing probe proves the harness is
  misconfigured (the unit is excluded, `model_misconfigured`); a passing one proves the refused
  request was the agent's own choice (its path or its model), which counts against the agent as
  any other 4xx does. The probe only ever uses a target the run configured for that caller, never
  the model or path the agent named: a refusal on a provider the run never configured for it (or
  anything a `command:` agent calls) proves nothing, and on another wire API of a configured
  provider only a refused key does (ModelGateway.verify). An agent cannot exclude its own cell by
  asking for a bogus model or calling another provider.

The probe's call is a `ModelCall` payload of purpose `preflight`, built by the same code as every
other; it is returned to the caller, never written to a run's log, so it is in no cell's tokens or
cost.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from membench.gateway.rate_shares import RateLimit, limit_of_headers

API_NAMES = {"chat_completions": "Chat Completions", "responses": "Responses", "messages": "Messages"}
API_PATHS = {"chat_completions": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
# statuses of a refused call that may mean the harness, not the agent, is misconfigured
MISCONFIGURED_STATUSES = frozenset({401, 403, 404, 405})
PROBE_TIMEOUT_S = 60.0
_MODEL_UNKNOWN = re.compile(r"model", re.I)


@dataclass(frozen=True)
class Target:
    """A (provider, wire API, model) the run will call, and who calls it (`role`: agent / memory /
    user) under which option (`who`, for messages)."""
    provider: str
    api: str
    model: str
    role: str
    who: str


@dataclass(frozen=True)
class ProbeResult:
    target: Target
    url: str
    http_status: int  # 0: no HTTP answer
    status: str  # the ModelCall status
    problem: str | None  # None: the configuration works; else key / unreachable / wire_api / model
    message: str  # one line: what was found and the fix
    call: dict[str, Any] = field(default_factory=dict)  # the ModelCall payload (purpose preflight)
    stated_limit: RateLimit = RateLimit()  # the key's rate limit as the answer's headers state it (rate_shares.py)

    @property
    def ok(self) -> bool:
        return self.problem is None


def targets_for(agent: Any, memory_model: str | None = None, user_model: str | None = None) -> list[Target]:
    """What the run calls: the agent's (provider, API, model) when its spec names them (a
    `command:` agent's model is its own choice and is not probed), the memory model's and the
    model user's (both Chat Completions from the harness)."""
    targets = []
    wire = getattr(agent, "wire", None)
    if wire is not None and getattr(agent, "model", None):
        provider, api = wire
        targets.append(Target(provider, api, agent.model, "agent", f"--agent {agent.name}"))
    if memory_model:
        targets.append(Target("openai", "chat_completions", memory_model, "memory", f"--memory-model {memory_model}"))
    if user_model:
        targets.append(Target("openai", "chat_completions", user_model, "user", f"--user model:{user_model}"))
    return list(dict.fromkeys(targets))


def probe_body(api: str, model: str) -> bytes:
    """The cheapest request of each wire API: one word in, a few tokens out."""
    if api == "responses":
        body: dict[str, Any] = {"model": model, "input": "ping", "max_output_tokens": 16}
    elif api == "messages":
        body = {"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]}
    else:
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_completion_tokens": 16}
    return json.dumps(body).encode()


def probe(gateway: Any, target: Target) -> ProbeResult:
    """One call for `target` through a channel of `gateway` (purpose `preflight`, never recorded)."""
    # the gateway's own class (membench.gateway.server.ModelGateway, which imports this module)
    settings = gateway.settings
    quiet = type(gateway)(replace(settings, record=False, timeout_s=min(settings.timeout_s, PROBE_TIMEOUT_S)))
    calls: list[dict[str, Any]] = []
    url = settings.base_url(target.provider) or "(none)"
    body, http_status, stated = b"", 0, RateLimit()
    with quiet.open_channel("preflight", lambda kind, payload, visibility="harness": calls.append(payload),
                            purpose="preflight") as channel:
        connection = channel.http_connection(quiet.settings.timeout_s + 5)
        try:
            headers = {"Content-Type": "application/json"}
            if target.api == "messages":
                headers["anthropic-version"] = "2023-06-01"
            connection.request("POST", API_PATHS[target.api], body=probe_body(target.api, target.model), headers=headers)
            answer = connection.getresponse()
            http_status, body = answer.status, answer.read()
            stated = limit_of_headers(answer.headers)
        except OSError:
            pass
        finally:
            connection.close()
    call = calls[-1] if calls else {}
    status = call.get("status", "upstream_unreachable")
    problem, message = judge(target, url, status, call.get("http_status", http_status), body, call.get("error"),
                             bool(settings.keys.get(target.provider) or settings.keys.get("*")))
    return ProbeResult(target, url, call.get("http_status", http_status), status, problem, message, call, stated)


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except ValueError:
        return body[:300].decode("utf-8", "replace")
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        return " ".join(str(error.get(k) or "") for k in ("code", "type", "message"))
    return json.dumps(doc)[:300]


def judge(target: Target, url: str, status: str, http_status: int, body: bytes, error: str | None,
          has_key: bool) -> tuple[str | None, str]:
    """(problem, one-line message with the fix) of a probe's answer; problem None when it passed."""
    where = f"{target.who}: {target.provider} {API_NAMES[target.api]} API, model {target.model!r}, at {url}"
    path = API_PATHS[target.api]
    env = f"MEMBENCH_{target.provider.upper()}_API_KEY (or MEMBENCH_MODEL_API_KEY)"
    if http_status == 0 or status in ("upstream_unreachable", "timeout"):  # the gateway's own 502/504
        return "unreachable", f"{where}: no answer ({error or status}); check --model-base-url and that the server runs"
    if 200 <= http_status < 300:
        return None, f"{where}: ok (HTTP {http_status})" + ("" if has_key else "; no key is set and the endpoint "
                                                           "accepted the call without one")
    if http_status == 429:
        return None, f"{where}: ok, rate limited right now (HTTP 429): the key and model are accepted"
    text = _error_text(body)
    if http_status in (401, 403):
        if not has_key:
            return "key", f"{where}: HTTP {http_status} on {path}, and no key is set: export {env}"
        return "key", (f"{where}: HTTP {http_status} on {path}: the endpoint refused the key in {env}; check it is "
                       f"a valid {target.provider} key with access to this model")
    if http_status in (404, 405, 400) and _MODEL_UNKNOWN.search(text) and (
            http_status != 400 or re.search(r"not.?found|does not exist|unknown|invalid model", text, re.I)):
        return "model", (f"{where}: HTTP {http_status} on {path}: the endpoint does not know model "
                         f"{target.model!r} ({text.strip()[:160]}); check the model name in {target.who.split()[0]}")
    if http_status in (404, 405):
        caller = target.who.split()[-1].split(":")[0] if target.role == "agent" else target.who
        return "wire_api", (f"{where}: {caller} needs the {API_NAMES[target.api]} API; "
                            f"this endpoint answered {http_status} on {path}: point --model-base-url "
                            f"{target.provider}=URL at a server that speaks it")
    if http_status >= 500:  # an outage, not a configuration: the run's units are excluded while it lasts
        return None, (f"{where}: WARNING HTTP {http_status} on {path}: the server is failing now; units whose calls "
                      "fail are excluded (model_unavailable) and retried on resume")
    # another 4xx: the route, key and model were accepted, the probe's own request was not
    return None, f"{where}: ok (HTTP {http_status} to the probe's request: {text.strip()[:120]})"
