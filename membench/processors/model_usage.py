"""Model usage and cost (derived v5 `ModelUsage`): a pure fold over one run's `ModelCall` events.

The gateway records one `ModelCall` per upstream call — the agent's, its simulated user's, its
memory model's (event v4) — with its tokens, latency and `cost_usd`; a call is priced when it names
the price-table entry used (`price`), and a model without one costs 0 with a null `price`. At the
run's `RunEnded` the fold derives one `ModelUsage` per purpose the run's calls had (`agent`,
`sleep`, `judge`, `embed`, …): calls, priced calls, tokens, latency, the USD of every call and the
USD of its priced calls. The report's cost, the memory policies' calls and the viewer's totals all
add these same `ModelTotals`, so every figure has one definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from membench.schemas.derived import DerivedEvent, UnitKey, make_derived
from membench.schemas.events import Event

if TYPE_CHECKING:
    from membench.schemas.payloads import ModelCall

@dataclass
class ModelTotals:
    """The sums of some ModelCalls; the fields are ModelUsage's."""

    calls: int = 0
    priced_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    latency_ms: int = 0
    cost_usd: float = 0.0
    priced_cost_usd: float = 0.0

    def add(self, call: ModelCall) -> None:
        self.calls += 1
        self.input_tokens += call.get("input_tokens", 0)
        self.cached_tokens += call.get("cached_tokens", 0)
        self.output_tokens += call.get("output_tokens", 0)
        self.reasoning_tokens += call.get("reasoning_tokens", 0)
        self.latency_ms += call.get("latency_ms", 0)
        cost = call.get("cost_usd", 0.0)
        self.cost_usd += cost
        if call.get("price", None) is not None:
            self.priced_calls += 1
            self.priced_cost_usd += cost

    def fields(self) -> dict[str, Any]:
        return {"calls": self.calls, "priced_calls": self.priced_calls, "input_tokens": self.input_tokens,
                "cached_tokens": self.cached_tokens, "output_tokens": self.output_tokens,
                "reasoning_tokens": self.reasoning_tokens, "latency_ms": self.latency_ms,
                "cost_usd": self.cost_usd, "priced_cost_usd": self.priced_cost_usd}


@dataclass
class ModelUsageFold:
    key: UnitKey | None = None
    by_purpose: dict[str, ModelTotals] = field(default_factory=dict)

    def apply(self, event: Event) -> list[DerivedEvent]:
        kind, p = event.kind, event.payload
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"], p["condition"],
                               p["seed"], p["agent"])
        elif kind == "ModelCall":
            purpose = p.get("purpose", "agent")
            self.by_purpose.setdefault(purpose, ModelTotals()).add(p)  # type: ignore[arg-type]  # a ModelCall by its kind
        elif kind == "RunEnded" and self.key is not None:
            return [make_derived(self.key, "ModelUsage", event.seq, {"purpose": purpose, **totals.fields()},
                                 "model_usage", purpose)
                    for purpose, totals in sorted(self.by_purpose.items())]
        return []
