"""Model-driven memory policies: where DreamBench-SWE has a model write or judge memories, these
ask the run set's memory model (`--memory-model MODEL`) through the model gateway
(membench/memory_systems/model_client.py); docs/design.md §5.

- `B3-llm` — B3 as the paper runs it: after each session the model writes free-form reflection
  lessons (Reflexion-style) from the session's agent-visible trajectory (instruction, agent turns,
  delivered events), one `sleep` call per session; reads are B3's (TF-IDF top 6 that fit).
- `DF-llm`, `DF-hybrid-llm` — the reference probe's sleep phase with a model: a `sleep` call
  consolidates the session's delivered events into typed memories (the model picks type and
  wording; scope is the declared scope of the events it cites), then, when older active typed
  memories exist, a `judge` call decides which of them each new memory supersedes (contradiction
  repair; a superseded memory is suppressed at read time, stale suppression). The read path —
  hard gate, weighted score, θ_admit, read limit — is DF's (`typed.py`), unchanged: the paper's
  gate is a fixed formula, not a judgement. `DF-hybrid-llm` adds DF-hybrid's raw-evidence capsule
  (deterministic raw evidence, R1; written whatever the model answers) and excludes contradiction
  records from reads (R2).

Defensive parsing (pure functions below): an answer is a JSON object (a fenced ```json block is
accepted); anything else — not JSON, the wrong shape, no usable item — makes the policy store
nothing new from that call, and the failure is recorded in the log (a harness `Turn`,
`source_kind` `memory_policy_error`), never a crash. Items are kept only when they cite evidence
the prompt showed (an id like `e1`): a derived memory without provenance is ineligible, the
paper's provenance gate; B3-llm lessons that cite none are given the whole session as provenance
(a reflection is about its session). At most MAX_ITEMS items of at most MAX_TEXT characters each
are kept per answer. A model that cannot answer excludes the unit (`model_unavailable`) only
when the gateway's probe of `--memory-model` fails too, and never after the scored session's
verdict (model_client.py); otherwise the policy stores nothing new from that call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from membench.memory_systems.base import MemoryItem, MemorySetup, Namespace
from membench.memory_systems.derive import piece_scope, union
from membench.memory_systems.model_client import MARKER, MemoryModel
from membench.memory_systems.reflection import ReflectionMemory
from membench.memory_systems.text import Piece, pieces
from membench.memory_systems.typed import Policy, Typed, TypedConsolidationMemory
from membench.schemas.events import Event

MAX_ITEMS = 12
MAX_TEXT = 2000
TYPED_TYPES = ("human_feedback", "semantic_project", "procedural", "constraint", "failure")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class AnswerError(ValueError):
    """An answer the policy cannot use; the message says why (recorded in the log)."""


# ------------------------------------------------------------------------------------------ parsing
def parse_object(text: str | None) -> dict[str, Any]:
    """The JSON object an answer holds: the whole text, or its first fenced block."""
    if text is None:
        raise AnswerError("the model returned no message")
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)]
    for candidate in candidates:
        try:
            doc = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
        raise AnswerError(f"the answer is JSON but not an object ({type(doc).__name__})")
    raise AnswerError("the answer is not JSON")


def _items(doc: dict[str, Any], key: str) -> list[Any]:
    items = doc.get(key)
    if not isinstance(items, list):
        raise AnswerError(f"the answer has no \"{key}\" list")
    return items


def _text(item: dict[str, Any]) -> str | None:
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        return None
    return " ".join(text.split())[:MAX_TEXT]


def _evidence(item: dict[str, Any], known: Sequence[str]) -> list[str]:
    cited = item.get("evidence")
    if not isinstance(cited, list):
        return []
    return list(dict.fromkeys(c for c in cited if isinstance(c, str) and c in known))


def parse_lessons(text: str | None, known: Sequence[str]) -> list[tuple[str, list[str]]]:
    """B3-llm: `{"lessons": [{"text": str, "evidence": [id, …]}]}` -> (text, cited known ids);
    an item without text is skipped; raises AnswerError when nothing usable is left."""
    doc = parse_object(text)
    out = []
    for item in _items(doc, "lessons")[:MAX_ITEMS]:
        if isinstance(item, dict) and (lesson := _text(item)):
            out.append((lesson, _evidence(item, known)))
    if not out:
        raise AnswerError("the answer has no lesson with text")
    return out


def parse_memories(text: str | None, known: Sequence[str]) -> list[tuple[str, str, list[str]]]:
    """DF-llm consolidation: `{"memories": [{"type": T, "text": str, "evidence": [id, …]}]}` ->
    (type, text, cited known ids) for items with a known type, text and at least one known id;
    `{"memories": []}` is a valid answer (nothing worth keeping); raises AnswerError otherwise."""
    doc = parse_object(text)
    raw = _items(doc, "memories")
    out = []
    for item in raw[:MAX_ITEMS]:
        if not isinstance(item, dict) or item.get("type") not in TYPED_TYPES:
            continue
        body, cited = _text(item), _evidence(item, known)
        if body and cited:
            out.append((item["type"], body, cited))
    if raw and not out:
        raise AnswerError("no memory of the answer has a known type, text and evidence the prompt showed")
    return out


def parse_supersessions(text: str | None, old_ids: Sequence[str], new_ids: Sequence[str]) -> list[tuple[str, str]]:
    """DF-llm judge: `{"supersede": [{"old": id, "new": id}]}` -> (old, new) pairs naming a shown
    memory and a different new one; unknown ids are skipped; raises AnswerError on the wrong shape."""
    doc = parse_object(text)
    pairs = []
    for item in _items(doc, "supersede"):
        if (isinstance(item, dict) and item.get("old") in old_ids and item.get("new") in new_ids
                and item["old"] != item["new"]):
            pairs.append((item["old"], item["new"]))
    return list(dict.fromkeys(pairs))


# ------------------------------------------------------------------------------------------ prompts
def _evidence_list(parts: Sequence[Piece], scopes) -> tuple[list[dict[str, Any]], dict[str, Piece]]:
    by_id = {f"e{i}": p for i, p in enumerate(parts, 1)}
    return [{"id": i, "kind": p.label, "text": p.text, "scope": list(piece_scope(p, scopes))}
            for i, p in by_id.items()], by_id


REFLECT_SYSTEM = (
    f"{MARKER} B3-llm (reflect). You write reflection lessons after a coding session, for the agent that "
    "will work on this repository in later sessions. Keep every exact value (names, markers, numbers, "
    "paths) byte for byte. Answer with one JSON object only: "
    '{"lessons": [{"text": "<lesson>", "evidence": ["<id of the evidence it comes from>"]}]}')
CONSOLIDATE_SYSTEM = (
    f"{MARKER} DF-llm (consolidate). You consolidate the evidence of a coding session into typed memories "
    f"for later sessions. Types: {', '.join(TYPED_TYPES)}. Keep every exact value byte for byte; cite the "
    "evidence each memory comes from. Answer with one JSON object only: "
    '{"memories": [{"type": "<type>", "text": "<memory>", "evidence": ["<id>"]}]}')
JUDGE_SYSTEM = (
    f"{MARKER} DF-llm (judge). The memories marked new were just written. Decide which other memories each new "
    "one supersedes (it corrects, replaces or contradicts them for the same scope); supersede nothing that is "
    'still valid. Answer with one JSON object only: {"supersede": [{"old": "<memory id>", "new": "<new memory id>"}]}')


def _user(task: str, condition: str, session: int, **parts: Any) -> str:
    return json.dumps({"task": task, "condition": condition, "session": session, **parts}, ensure_ascii=False,
                      sort_keys=True)


# ------------------------------------------------------------------------------------------ policies
class _ModelDriven:
    condition: str  # each system's own
    model_driven = True
    accepts_setup = True
    uses_memory = True

    def _model(self, setup: MemorySetup | None) -> MemoryModel:
        model = (setup or MemorySetup()).model
        if model is None:
            raise ValueError(f"{self.condition} is model-driven: it needs --memory-model MODEL and the model "
                             "gateway (--model-base-url or --model-replay)")
        return model


class ReflectionModelMemory(_ModelDriven, ReflectionMemory):
    condition = "B3-llm"
    description = "reflection lessons written by the memory model (model-driven), TF-IDF retrieval"

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        super().__init__(namespace, setup)
        self.model = self._model(setup)

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        if not parts:
            return []
        session = parts[0].session_index
        evidence, by_id = _evidence_list(parts, self._scopes)
        answer = self.model.ask("sleep", REFLECT_SYSTEM, _user("reflect", self.condition, session, evidence=evidence))
        try:
            lessons = parse_lessons(answer, list(by_id))
        except AnswerError as exc:
            self.model.note(f"{self.condition} session {session}: reflection answer unusable ({exc}); no lesson stored")
            return []
        stored = []
        for text, cited in lessons:
            sources = [by_id[c] for c in cited] or parts  # a lesson citing nothing is about its whole session
            item = MemoryItem(f"{self.condition}:l{len(self._lessons)}", "reflection", text,
                              tuple(p.event_id for p in sources), union(piece_scope(p, self._scopes) for p in sources))
            self._lessons.append(item)
            stored.append(item)
        return stored


class TypedConsolidationModelMemory(_ModelDriven, TypedConsolidationMemory):
    condition = "DF-llm"
    description = "typed consolidation and contradiction-repair judge by the memory model (model-driven), DF's gate"
    policy = Policy()

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        super().__init__(namespace, setup)
        self.model = self._model(setup)

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        if not parts:
            return []
        session = parts[0].session_index
        self._session = max(self._session, session)
        delivered = [p for p in parts if p.source_event_id]
        written: list[Typed] = []
        if self.policy.capsules and delivered:  # R1: raw evidence, not a model product
            written.append(self._capsule(delivered, session))
        if not delivered:
            return [t.item for t in written]
        evidence, by_id = _evidence_list(delivered, self._scopes)
        answer = self.model.ask("sleep", CONSOLIDATE_SYSTEM,
                                _user("consolidate", self.condition, session, evidence=evidence))
        try:
            proposed = parse_memories(answer, list(by_id))
        except AnswerError as exc:
            self.model.note(f"{self.condition} session {session}: consolidation answer unusable ({exc}); "
                            "no typed memory stored")
            return [t.item for t in written]
        new: list[Typed] = []
        for memory_type, body, cited in proposed:
            sources = [by_id[c] for c in cited]
            scope = union(piece_scope(p, self._scopes) for p in sources)
            label = f"[{memory_type}]" + (f" scope {', '.join(scope)}:" if scope else "")
            new.append(self._add(f"{self.condition}:m{len(self.store)}", memory_type, f"{label} {body}",
                                 tuple(p.event_id for p in sources), scope, session))
        written += new
        if self.policy.repair and new:
            written += self._judge(new, session)
        return [t.item for t in written]

    def _judge(self, new: list[Typed], session: int) -> list[Typed]:
        """One judge call over the active typed memories: which of them (older ones, or another memory
        of this session) each new memory supersedes. R1b: raw evidence is never repaired."""
        active = [t for t in self.store if t.status == "active" and t.item.memory_type not in ("episodic", "contradiction")]
        if len(active) < 2:
            return []
        fresh = {t.item.memory_id for t in new}
        shown = [{"id": t.item.memory_id, "type": t.item.memory_type, "text": t.item.text, "scope": list(t.item.scope),
                  "new": t.item.memory_id in fresh} for t in active]
        answer = self.model.ask("judge", JUDGE_SYSTEM, _user("judge", self.condition, session, memories=shown))
        try:
            pairs = parse_supersessions(answer, [t.item.memory_id for t in active], sorted(fresh))
        except AnswerError as exc:
            self.model.note(f"{self.condition} session {session}: judge answer unusable ({exc}); nothing superseded")
            return []
        by_id = {t.item.memory_id: t for t in active}
        records = []
        for old_id, new_id in pairs:
            old, by = by_id[old_id], by_id[new_id]
            if old.status != "active" or by.status != "active":
                continue
            old.status, old.superseded_by = "superseded", new_id
            records.append(self._add(
                f"{self.condition}:x{len(self.store)}", "contradiction",
                f"[contradiction] {old_id} is superseded by {new_id}.",
                old.item.provenance_event_ids + by.item.provenance_event_ids,
                union((old.item.scope, by.item.scope)), session))
        return records


class TypedConsolidationHybridModelMemory(TypedConsolidationModelMemory):
    condition = "DF-hybrid-llm"
    description = "DF-llm plus raw-evidence capsules, contradiction records excluded (model-driven)"
    policy = Policy(capsules=True, exclude_contradictions=True)


MODEL_DRIVEN: dict[str, type] = {
    "B3-llm": ReflectionModelMemory,
    "DF-llm": TypedConsolidationModelMemory,
    "DF-hybrid-llm": TypedConsolidationHybridModelMemory,
}

# Ablations of the paper that cannot be defined here: `membench run` refuses them (exit 2) with this reason.
UNDEFINED_ABLATIONS: dict[str, str] = {
    "A4": "A4 (no counterfactual replay) is DF without its counterfactual replay, and no DF here replays "
          "(dream artifacts need a re-execution of past sessions that membench does not build), so A4 would "
          "equal DF",
    "A11": "A11 (forced consolidation: global maintenance scope) is not defined beyond that phrase in the "
           "paper, and every DF here already consolidates every delivered event once, so it would equal DF",
}
