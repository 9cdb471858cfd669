"""A sequence's gold labels as OracleLabel event payloads.

Processors are pure folds over events and never read a pack, so everything they classify by
(which delivered pack events support a required fact, which carry a stale or forbidden fact, which
open a hygiene opportunity) reaches them as harness-visible OracleLabel events emitted right after
RunStarted.

Sources, in order: the sequence's explicit `gold_labels` (imported packs write them); one
`required` label per `required_fact_ids` entry, whose evidence is the events `event_fact_map` maps
to that fact; one label per `oracle_labels` entry, typed by its `type`. An oracle label without
explicit `event_ids` gets the events delivered before its active session, except for:
- `stale` labels, where guessing which earlier event is the stale one would be wrong: they get the
  events `event_fact_map` maps to one of the label's `fact_ids` (the superseded facts), else none;
- `commission-check` / `omission-check` labels (the oracle tests that check the trap's bad
  behaviour is absent / its required behaviour present): they judge the patch, not evidence, so
  they carry no events; their `cases` (test names) become the label's `fact_ids`.
Last, one `task_scope` label per task session naming the files the task is about (its scoring
rules' `allowed_paths`, else its `visible_files`; the label's `fact_ids` hold the paths), for
scope and overscope hygiene.
"""

from __future__ import annotations

import json
from typing import Any, cast

from membench.formats.pack_format import Sequence
from membench.schemas.payloads import OracleLabel


CHECK_LABELS = frozenset({"commission-check", "omission-check"})


def sequence_labels(seq: Sequence) -> list[OracleLabel]:
    scored = seq.scored_session.index
    # a pack's gold labels are OracleLabel records already (membench/formats/pack_format.py reads them)
    labels: list[OracleLabel] = [
        cast("OracleLabel", {**label, "detail": json.dumps(label, sort_keys=True)}) for label in seq.gold_labels]
    for fact in seq.required_fact_ids:
        events = [e for e, facts in seq.event_fact_map.items() if fact in facts]
        labels.append({"label_id": f"{seq.seq_id}:required:{fact}", "label_type": "required",
                       "active_session": scored, "event_ids": events, "fact_ids": [fact], "detail": "{}"})
    for i, raw in enumerate(seq.oracle_labels):
        label_type = str(raw.get("type", "unknown"))
        active = int(raw.get("active_session", scored))
        facts = [str(f) for f in raw.get("cases" if label_type in CHECK_LABELS else "fact_ids", [])]
        if "event_ids" in raw:
            events = [str(e) for e in raw["event_ids"]]
        elif label_type == "stale":
            events = [e.event_id for e in seq.events if set(seq.event_fact_map.get(e.event_id, ())) & set(facts)]
        elif label_type in CHECK_LABELS:
            events = []
        else:
            events = [e.event_id for e in seq.events if e.after_session < active]
        labels.append({"label_id": str(raw.get("label_id", f"{seq.seq_id}:label:{i}")), "label_type": label_type,
                       "active_session": active, "event_ids": events, "fact_ids": facts,
                       "detail": json.dumps(raw, sort_keys=True, default=str)})
    for session in seq.sessions:
        scope = session.scoring.allowed_paths if session.scoring is not None else session.visible_files
        if session.mode == "task" and scope:
            labels.append({"label_id": f"{seq.seq_id}:s{session.index}:task_scope", "label_type": "task_scope",
                           "active_session": session.index, "event_ids": [], "fact_ids": list(scope),
                           "detail": "{}"})
    return labels
