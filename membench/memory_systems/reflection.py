"""B3: reflection-only vector retrieval, the model-free variant. DreamBench-SWE's B3 has a model
write free-form verbal reflection lessons after each session (Reflexion-style) and retrieves them
by vector similarity. Here the lesson is a deterministic extractive stand-in — no model writes it:
one lesson per delivered project event, "Lesson from session N (<kind>): " followed by that event's
rule-bearing sentences (a rule word or a literal; the first sentence when none), verbatim. Raw
events are not kept: only lessons are stored. A read ranks lessons by TF-IDF cosine similarity to
the query, ties newest first, and admits the top TOP_K with a positive score that fit the budget, in
rank order. The model-written variant is `B3-llm` (model_driven.py), through the model gateway."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.derive import piece_scope, rule_sentences
from membench.memory_systems.text import pieces, tfidf_scores
from membench.schemas.events import Event

TOP_K = 6


class ReflectionMemory:
    condition = "B3"
    description = "reflection lessons (model-free extractive stand-in), TF-IDF retrieval"
    uses_memory = True
    accepts_setup = True

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        self.namespace = namespace
        self._scopes = (setup or MemorySetup()).event_scopes
        self._lessons: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        stored = []
        for p in pieces(events):
            if not p.source_event_id:
                continue
            text = f"Lesson from session {p.session_index} ({p.label}): " + " ".join(rule_sentences(p.text))
            item = MemoryItem(f"B3:l{len(self._lessons)}", "reflection", text, (p.event_id,),
                              piece_scope(p, self._scopes))
            self._lessons.append(item)
            stored.append(item)
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if not self._lessons:
            return MemoryContext((), (), budget_tokens)
        scores = tfidf_scores([i.text for i in self._lessons], query)
        order = sorted(range(len(self._lessons)), key=lambda i: (-round(float(scores[i]), 12), -i))
        admitted: list[MemoryItem] = []
        used = 0
        for i in order:
            if len(admitted) >= TOP_K or scores[i] <= 0:
                break
            if used + self._lessons[i].tokens <= budget_tokens:
                admitted.append(self._lessons[i])
                used += self._lessons[i].tokens
        return MemoryContext(tuple(admitted), tuple(self._lessons[i].memory_id for i in order), budget_tokens)
