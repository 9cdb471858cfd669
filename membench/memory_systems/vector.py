"""B2: deterministic token-vector retrieval over trace chunks. Every agent-visible text of a
session (instruction, agent reply, delivered project event) becomes one chunk, long texts are cut
into overlapping windows of CHUNK_WORDS words; a read ranks the chunks by TF-IDF cosine similarity
to the query (the task instruction), ties broken newest first, and admits the top TOP_K chunks with
a positive score that fit the token budget, in rank order."""

from __future__ import annotations

from collections.abc import Sequence

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace
from membench.memory_systems.text import pieces, tfidf_scores
from membench.schemas.events import Event

CHUNK_WORDS = 80
CHUNK_OVERLAP = 20
TOP_K = 6


def chunk(text: str) -> list[str]:
    tokens = text.split()
    if len(tokens) <= CHUNK_WORDS:
        return [text]
    step = CHUNK_WORDS - CHUNK_OVERLAP
    return [" ".join(tokens[i:i + CHUNK_WORDS]) for i in range(0, len(tokens) - CHUNK_OVERLAP, step)]


class TokenVectorMemory:
    condition = "B2"
    uses_memory = True

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self._chunks: list[MemoryItem] = []

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        stored = []
        for piece in pieces(events):
            for text in chunk(piece.text):
                item = MemoryItem(f"B2:c{len(self._chunks)}", f"chunk:{piece.label}", text, (piece.event_id,), ())
                self._chunks.append(item)
                stored.append(item)
        return stored

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if not self._chunks:
            return MemoryContext((), (), budget_tokens)
        scores = tfidf_scores([c.text for c in self._chunks], query)
        order = sorted(range(len(self._chunks)), key=lambda i: (-round(float(scores[i]), 12), -i))
        admitted: list[MemoryItem] = []
        used = 0
        for i in order:
            if len(admitted) >= TOP_K or scores[i] <= 0:
                break
            item = self._chunks[i]
            if used + item.tokens <= budget_tokens:
                admitted.append(item)
                used += item.tokens
        return MemoryContext(tuple(admitted), tuple(self._chunks[i].memory_id for i in order), budget_tokens)
