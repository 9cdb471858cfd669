"""Each unit's share of the run's model rate limit, enforced by the gateway itself.

A provider's rate limit belongs to the key, and every unit of a run calls through the same key: one
unit that floods the key's per-minute window would have the provider answer *other* units' honest
calls with 429. So the gateway splits the run's limit per provider — requests and tokens per
minute, from `--model-rpm` / `--model-tpm`, else as the upstream stated them in the rate-limit
headers of the pre-flight probe's answer — evenly among the run's concurrent units (`--workers`),
and refuses a call that would take a unit over its share in the last 60 seconds with its own 429
(and `retry-after`): the calling unit's own 4xx, never the model's failure. A unit with nothing in
its window may send one call larger than its token share (a long context is slowed to a call a
minute, not refused for good); a request whose estimated tokens exceed the run's whole limit can
never pass at the provider either and is refused with 413.

The run's whole window is kept too: a unit that finished within the last minute still holds its
calls in the key's window, and so may one large call, so a call that fits its unit's share but not
what the run has left is refused the same way (429, `retry-after` until the oldest calls age out)
rather than sent to meet the provider's 429: such a refusal delays a call for at most a minute.

Tokens are counted as the upstream reports them (input + output) once a call is answered; until
then, and for a call that reported none, a call counts as its request's bytes / 4 (BYTES_PER_TOKEN).
With no limit configured or stated (a local server) nothing is refused.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Mapping

WINDOW_S = 60.0
BYTES_PER_TOKEN = 4
# the upstream's statement of the key's limits: OpenAI's, then Anthropic's header names
LIMIT_HEADERS = {
    "requests": ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"),
    "tokens": ("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit"),
}


@dataclass(frozen=True)
class RateLimit:
    """A key's limit per minute; None: not limited in that dimension."""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    @property
    def limited(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


def limit_of_headers(headers: Mapping[str, str]) -> RateLimit:
    """The limits an upstream's answer states (header names case-insensitive); unparsable values are ignored."""
    lowered = {k.lower(): v for k, v in headers.items()}

    def first(names: tuple[str, ...]) -> int | None:
        for name in names:
            value = (lowered.get(name) or "").strip()
            if value.isdigit() and int(value) > 0:
                return int(value)
        return None
    return RateLimit(first(LIMIT_HEADERS["requests"]), first(LIMIT_HEADERS["tokens"]))


@dataclass(frozen=True)
class OverShare:
    """A refused call: the HTTP status the gateway answers (429, or 413 for a request that can never
    fit), why, and the seconds until the unit's window has room (`retry-after`)."""
    http_status: int
    message: str
    retry_after_s: int


class _Call:
    __slots__ = ("at", "tokens")

    def __init__(self, at: float, tokens: int):
        self.at, self.tokens = at, tokens


class RateShares:
    """The per-unit windows of one run set's gateway (thread-safe)."""

    def __init__(self, limits: Mapping[str, RateLimit], units: int, clock: Callable[[], float] = time.monotonic):
        self._limits = dict(limits)  # provider (or "*") -> the run's limit
        self.units = max(1, units)
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], list[_Call]] = defaultdict(list)  # (unit, provider) -> its calls
        self._run_windows: dict[str, list[_Call]] = defaultdict(list)  # provider -> every unit's calls

    def limit(self, provider: str) -> RateLimit:
        return self._limits.get(provider) or self._limits.get("*") or RateLimit()

    def learn(self, provider: str, stated: RateLimit) -> None:
        """Fills what the run did not configure for `provider` from the upstream's own statement."""
        with self._lock:
            known = self._limits.get(provider) or self._limits.get("*") or RateLimit()
            self._limits[provider] = RateLimit(known.requests_per_minute or stated.requests_per_minute,
                                               known.tokens_per_minute or stated.tokens_per_minute)

    def share(self, provider: str) -> RateLimit:
        limit = self.limit(provider)
        return RateLimit(limit.requests_per_minute and max(1, limit.requests_per_minute // self.units),
                         limit.tokens_per_minute and max(1, limit.tokens_per_minute // self.units))

    def admit(self, unit: str, provider: str, request_bytes: int) -> _Call | OverShare | None:
        """Takes a place in the unit's window and the run's (returned: settle it with the call's
        tokens), or the refusal; None when the provider has no limit."""
        share = self.share(provider)
        if not share.limited:
            return None
        estimate = -(-request_bytes // BYTES_PER_TOKEN)
        limit = self.limit(provider)
        if limit.tokens_per_minute and estimate > limit.tokens_per_minute:
            return OverShare(413, f"this request alone (~{estimate} tokens at {BYTES_PER_TOKEN} bytes a token) is over "
                                  f"the run's whole rate limit ({limit.tokens_per_minute} tokens per minute): "
                                  "no provider would take it", 60)
        with self._lock:
            now = self._clock()
            # `answered` moves calls later, so a window is not in order: every call is checked
            since = now - WINDOW_S
            window = self._windows[(unit, provider)] = [c for c in self._windows[(unit, provider)] if c.at > since]
            whole = self._run_windows[provider] = [c for c in self._run_windows[provider] if c.at > since]
            # a unit with nothing in its window may send one call up to the run's whole limit: a long
            # context is slowed to a call a minute, never refused for good
            wait = _wait(window, share, estimate, now) if window else None
            if wait is not None:
                return OverShare(429, f"over this unit's share of the run's rate limit ({wait[1]}; the run's limit "
                                      f"{limit.requests_per_minute or '-'} requests / {limit.tokens_per_minute or '-'} "
                                      f"tokens per minute among {self.units} concurrent units)", wait[0])
            wait = _wait(whole, limit, estimate, now)
            if wait is not None:
                return OverShare(429, f"the run's rate limit ({wait[1]}) is spent for the moment, by units "
                                      "including ones that finished within the last minute", wait[0])
            call = _Call(now, estimate)
            window.append(call)
            whole.append(call)
            return call

    def answered(self, call: _Call) -> None:
        """The upstream began its answer: it has counted the call by now, so the call stays in the
        windows for a minute from here, never less than the provider keeps it (a window kept from
        admission would free the place while the provider still counts the call)."""
        with self._lock:
            call.at = max(call.at, self._clock())

    def settle(self, call: _Call, tokens: int) -> None:
        """The tokens the upstream reported for an admitted call (0: none reported; the estimate stays)."""
        if tokens > 0:
            with self._lock:
                call.tokens = tokens


def _wait(window: list[_Call], limit: RateLimit, estimate: int, now: float) -> tuple[int, str] | None:
    """(seconds until `window` has room for one more call of `estimate` tokens under `limit`, what
    binds), or None when it has room now."""
    if limit.requests_per_minute and len(window) >= limit.requests_per_minute:
        at = sorted(c.at for c in window)[len(window) - limit.requests_per_minute]
        return max(1, int(at + WINDOW_S - now + 0.999)), f"{limit.requests_per_minute} requests per minute"
    tokens = limit.tokens_per_minute
    used = sum(c.tokens for c in window)
    if tokens and used + estimate > tokens:
        freed, at = 0, now
        for call in sorted(window, key=lambda c: c.at):  # the oldest calls leave the window first
            freed += call.tokens
            at = call.at
            if used - freed + estimate <= tokens:
                break
        return max(1, int(at + WINDOW_S - now + 0.999)), f"{tokens} tokens per minute"
    return None
