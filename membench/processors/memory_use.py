"""How a run used its memory (derived v6 `MemoryUse`): a pure fold over one run's `MemoryRead` events.

A MemoryRead is either the harness's read before a session (what the condition puts into the prompt:
its query is the session's instruction, membench/runner/grid.py) or a call the agent made to a memory tool
during the session (`search_memory`/`get_memory`, membench/memory_systems/agent_tools.py; an MCP memory server's
read-only tool, its query the call's JSON). The events carry no marker of which, so the fold tells them
apart by the one thing the harness's read always has: within a session, the first MemoryRead whose
query digest equals the SessionStarted instruction's is the harness's; a read outside any session is
the harness's too; every other read is an agent memory call (an agent that searches memory with the
instruction itself gets a prefixed or JSON query, so it is never taken for the harness's). At the run's
`RunEnded` the fold derives one `MemoryUse` with both counts and the tokens each admitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from membench.schemas.derived import DerivedEvent, UnitKey, make_derived, shallow_fields
from membench.schemas.events import Event


@dataclass
class MemoryUseTotals:
    """The fields of MemoryUse beyond the unit key."""

    harness_reads: int = 0
    harness_tokens_read: int = 0
    agent_memory_calls: int = 0
    agent_tokens_read: int = 0


@dataclass
class MemoryUseFold:
    key: UnitKey | None = None
    totals: MemoryUseTotals = field(default_factory=MemoryUseTotals)
    # the current session's instruction digest until its harness read is seen (then None)
    awaiting: str | None = None
    done: bool = False

    def apply(self, event: Event) -> list[DerivedEvent]:
        kind, p = event.kind, event.payload
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"], p["condition"],
                               p["seed"], p["agent"])
        elif kind == "SessionStarted":
            self.awaiting = p["instruction"]["sha256"]
        elif kind == "MemoryRead":
            t = self.totals
            if event.session_index < 0 or (self.awaiting is not None and p["query"]["sha256"] == self.awaiting):
                self.awaiting = None
                t.harness_reads += 1
                t.harness_tokens_read += p["tokens_admitted"]
            else:
                t.agent_memory_calls += 1
                t.agent_tokens_read += p["tokens_admitted"]
        elif kind == "RunEnded" and self.key is not None and not self.done:
            self.done = True
            return [make_derived(self.key, "MemoryUse", event.seq, shallow_fields(self.totals), "memory_use")]
        return []
