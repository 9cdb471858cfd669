"""The harness-side model client of the model-driven memory policies (docs/design.md §5).

A model-driven policy (`B3-llm`, `DF-llm`, `DF-hybrid-llm`: membench/memory_systems/model_driven.py)
asks the run set's memory model (`--memory-model MODEL`) to write or judge memories after a
session. It calls from the harness, never from the agent's sandbox, through the same model gateway
the agents use: a gateway channel of purpose `memory` opened for the unit, so the upstream
(`--model-base-url`), the host's key, the price table, `--model-record` and `--model-replay RUN_SET`
all apply, and every call is a `ModelCall` event of the run (event v6 `purpose`: `sleep` or
`judge`; call ids `mem1`, `mem2`, …). The API is OpenAI Chat Completions, not streamed, temperature 0.

Outcomes of one call (`MemoryModel.ask`):
- an answer: its text (the first choice's message content);
- the run's memory model could not answer (unreachable, timeout, 5xx/429 through the gateway's
  retries) and the gateway's own probe of `--memory-model` failed too: the channel's failure is
  raised (`ModelUnavailable`) and the runner excludes the unit (`model_unavailable`), as it does
  for agents — unless the scored session's verdict is recorded already: then nothing can change
  the cell (membench/runner/grid.py);
- any other unusable answer — a 4xx; a 429/5xx the probe did not reproduce (the request's own:
  e.g. a session the agent made too large for the model's limit); a request a replay does not
  hold; a body without a message: `None`, and the policy falls back (stores nothing new) after
  recording why (`MemoryModel.note`, a harness `Turn` with `source_kind` `memory_policy_error`).
  That is the memory policy's own failure, never an exclusion the agent could provoke.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from membench.schemas.events import bounded_text, error_text

if TYPE_CHECKING:  # annotations only (docs/design.md §3, typed payloads)
    from membench.schemas.payloads import Emit

PURPOSE_HEADER = "X-Membench-Purpose"
MARKER = "membench memory policy"  # opens every system prompt: the scripted upstream keys on it


@dataclass
class MemoryModel:
    """One unit's memory-model client: `gateway` is the run set's ModelGateway, `emit(kind, payload,
    visibility)` the unit's emitter. The channel opens at the first call and closes with `close()`."""

    model: str
    gateway: Any
    unit_id: str
    emit: Emit[Any]
    _channel: Any = None

    def _open(self):
        if self._channel is None:
            self._channel = self.gateway.open_channel(self.unit_id, self.emit, purpose="memory")
        return self._channel

    def channel(self):
        """The unit's memory channel (opened now if need be): a memory library's own clients call
        through its socket (membench/memory_systems/libraries.py)."""
        return self._open()

    def ask(self, purpose: str, system: str, user: str) -> str | None:
        channel = self._open()
        body = json.dumps({"model": self.model, "temperature": 0, "messages": [
            {"role": "system", "content": system}, {"role": "user", "content": user}]}).encode()
        connection = channel.http_connection(self.gateway.settings.timeout_s + 30)
        try:
            connection.request("POST", "/v1/chat/completions", body=body,
                               headers={"Content-Type": "application/json", PURPOSE_HEADER: purpose})
            response = connection.getresponse()
            status, data = response.status, response.read()
        except OSError:  # the gateway itself broke off: not the model's answer
            if channel.failure is not None:
                raise channel.failure from None
            raise
        finally:
            connection.close()
        if channel.failure is not None:  # the model is down (the probe failed too): the unit is excluded
            raise channel.failure
        if status >= 400:  # the policy's own failure (e.g. the session was too large for the model)
            self.note(error_text(f"the memory model's {purpose} call was answered HTTP {status}: "
                                 f"{data[:300].decode('utf-8', 'replace')}", tuple(self.gateway.settings.keys.values())))
            return None
        return message_text(data)

    def note(self, text: str) -> None:
        """Records why a policy stored nothing new from an answer (harness-visible: no memory
        system learns from it)."""
        self.emit("Turn", {"role": "system", "text": bounded_text(text), "source_event_id": None,
                           "source_kind": "memory_policy_error", "input_tokens": 0, "cached_tokens": 0,
                           "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None


def message_text(data: bytes) -> str | None:
    """The first choice's message content of a Chat Completions body, or None."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else None
