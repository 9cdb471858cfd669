"""Why a run ended as it did (derived v5 `RunEndReason`): a pure fold over one run's events.

The runner writes a run-level system `Turn` (session -1, role `system`) for an excluded or failed
run: the model's or the adapter's own words, or a traceback. The fold derives one `RunEndReason`
at the first such Turn of the run, holding its text; the report's exclusion reasons read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from membench.schemas.derived import DerivedEvent, UnitKey, make_derived
from membench.schemas.events import Event


@dataclass
class EndReasonFold:
    key: UnitKey | None = None
    said: bool = False

    def apply(self, event: Event) -> list[DerivedEvent]:
        kind, p = event.kind, event.payload
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"], p["condition"],
                               p["seed"], p["agent"])
        elif (kind == "Turn" and event.session_index < 0 and p["role"] == "system" and not self.said
              and self.key is not None):
            self.said = True
            return [make_derived(self.key, "RunEndReason", event.seq, {"text": p["text"]["text"]}, "end_reason")]
        return []
