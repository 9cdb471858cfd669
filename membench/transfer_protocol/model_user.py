"""The model-driven simulated user (`membench transfer --user model:MODEL`, docs/transfer.md).

The same four messages as the scripted user (`user.py`) — the plan handed over, the answer to an
agent's question, the review of a delivery, the test feedback — but each written by a model: the
scenario file is the model's brief (system message), and each phase is one OpenAI Chat Completions
request with what the user has to react to. Requests are stateless (brief + this phase's facts),
so a recording replays them by content whatever order the units ran in.

Calls go through the run set's model gateway (`membench/gateway/`) on a channel of the user's own,
host-side: the gateway adds the key, records or replays the bodies and emits each call as a
`ModelCall` event in the unit's log, its `call_id` prefixed `user-` so it is told apart from the
agent's calls (the verdict fold keeps its tokens out of the session's, as the transfer fold keeps
user time out of agent time; its cost counts in the run set's cost). A model that cannot answer —
unreachable, a timeout, 5xx/429 through the gateway's retries, and the gateway's own probe of the
`--user` model failing too — raises `ModelUnavailable`: the unit is excluded, never scored. A
request that was only its own failure (the probe answered: say an agent's question too large for
the model's limit), a request a replay does not hold, or an answer with no text is never an
exclusion (the agent's words shape the request, so it could choose it): the scripted user's
message for that phase is said instead, and a harness Turn (`simulated_user_fallback`) says why.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from membench.gateway.server import Channel, ModelGateway, ModelUnavailable
from membench.transfer_protocol.user import ScriptedUser
from membench.schemas.events import SIMULATED_USER_CALL_PREFIX, bounded_text, error_text
from membench.formats.transfer_format import Scenario

if TYPE_CHECKING:  # annotations only (docs/design.md §3, typed payloads)
    from membench.schemas.payloads import Emit

PREFIX = "model:"
BRIEF = """You are the simulated user (the product owner) of a software project that an engineer \
builds for you in a conversation. Stay in that role: write only the message you send to the engineer, \
plain text, no preamble. Your scenario, as JSON: `plan` is the plan you hand over; `answers` are your \
answers to questions matching each regular expression (`default_answer` otherwise); `accept` is what \
you say when the delivery passes the public check; `public_check_failed` is your review when it fails \
(`{output}` stands for the check's output); `test_feedback` relays the hidden tests' result (`{passed}` \
of `{cases}`). Keep every fact of the scenario; never invent requirements it does not state.

Scenario:
"""


class _UserChannel(Channel):
    """A gateway channel whose ModelCall ids say they are the simulated user's."""

    def next_call_id(self) -> str:
        return SIMULATED_USER_CALL_PREFIX + super().next_call_id()

    @property
    def role(self) -> str:  # a refused call is checked against the --user model (ModelGateway.verify)
        return "user"


def model_of(spec: str) -> str | None:
    """MODEL of a `model:MODEL` user spec; None for the scripted user (`scripted`)."""
    if spec == "scripted":
        return None
    if not spec.startswith(PREFIX) or not spec[len(PREFIX):].strip():
        raise ValueError(f"unknown simulated user {spec!r} (known: scripted, model:MODEL)")
    return spec[len(PREFIX):].strip()


class ModelUser:
    def __init__(self, scenario: Scenario, model: str, gateway: ModelGateway | None, unit_id: str,
                 emit: Emit[Any]):
        if gateway is None:
            raise ModelUnavailable(f"the simulated user model:{model} needs the model gateway: run with "
                                   "--model-base-url or --model-replay")
        self.name = PREFIX + model
        self.model = model
        self.scenario = scenario
        self.brief = BRIEF + json.dumps({
            "plan": scenario.plan, "answers": [{"match": m, "reply": r} for m, r in scenario.answers],
            "default_answer": scenario.default_answer, "accept": scenario.accept,
            "public_check_failed": scenario.public_check_failed, "test_feedback": scenario.test_feedback}, indent=1)
        self.timeout_s = gateway.settings.timeout_s + 30  # the gateway times the upstream out first
        self.channel = _UserChannel(gateway, unit_id, emit)
        self.scripted = ScriptedUser(scenario)  # what the user says when its model's request was its own failure
        self._emit = emit

    def close(self) -> None:
        self.channel.close()

    def plan(self) -> str:
        return self._say("Phase: plan_handoff. Hand the plan over to the engineer.", self.scripted.plan)

    def answer(self, question: str) -> str:
        return self._say(f"Phase: implementing. The engineer asks you:\n{question}\nAnswer the question.",
                         lambda: self.scripted.answer(question))

    def review(self, check_passed: bool, check_output: str) -> str:
        fallback = lambda: self.scripted.review(check_passed, check_output)  # noqa: E731
        if check_passed:
            return self._say("Phase: delivery_review. The delivery passed the public check. Accept it.", fallback)
        return self._say("Phase: delivery_review. The delivery failed the public check, whose output was:\n"
                         f"{check_output.strip()[-2000:]}\nSend the engineer your review.", fallback)

    def feedback(self, passed: int, cases: int) -> str:
        return self._say(f"Phase: test_feedback. The hidden tests passed {passed} of {cases} cases. "
                         "Tell the engineer.", lambda: self.scripted.feedback(passed, cases))

    def _say(self, prompt: str, fallback: Callable[[], str]) -> str:
        body = json.dumps({"model": self.model, "temperature": 0, "messages": [
            {"role": "system", "content": self.brief}, {"role": "user", "content": prompt}]}).encode()
        connection = self.channel.http_connection(self.timeout_s)
        try:
            connection.request("POST", "/v1/chat/completions", body=body,
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            status, data = response.status, response.read()
        except OSError as exc:
            raise ModelUnavailable(f"simulated user {self.name}: the gateway did not answer: {exc}") from None
        finally:
            connection.close()
        if self.channel.failure is not None:  # the model is down: the gateway's probe failed too
            raise self.channel.failure
        text = _reply_text(data) if status < 400 else None
        if not text:  # the request's own failure (module doc): never an exclusion
            why = error_text(f"simulated user {self.name}: no reply (HTTP {status}: "
                             f"{data[:300].decode('utf-8', 'replace')})", tuple(self.channel.gateway.settings.keys.values()))
            self._emit("Turn", {"role": "system", "text": bounded_text(f"{why}; the scripted user's message is said "
                                                                       "instead"), "source_event_id": None,
                "source_kind": "simulated_user_fallback", "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")
            return fallback()
        return text


def _reply_text(data: bytes) -> str | None:
    """The assistant's text of a Chat Completions answer."""
    try:
        message = json.loads(data)["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content.strip() if isinstance(content, str) and content.strip() else None


__all__ = ["ModelUser", "model_of"]
