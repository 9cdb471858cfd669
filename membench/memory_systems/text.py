"""Shared text helpers: what a memory system may see of an event, tokens, sentences, TF-IDF."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from membench.schemas.events import Event

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9'\"(\[])")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with "
    "we you they our your their it's into than then there these those not no do does did can should must "
    "add new use using".split())


@dataclass(frozen=True)
class Piece:
    """One agent-visible, text-bearing event of a session."""

    event_id: str
    session_index: int
    label: str  # "instruction", "agent", or the pack event's kind
    text: str
    source_event_id: str | None


def pieces(events: Sequence[Event]) -> list[Piece]:
    """The text-bearing agent-visible events (turns: instructions, agent replies, delivered pack
    events), in order. Harness-visible events never reach a memory system."""
    out = []
    for event in events:
        if event.visibility != "agent" or event.kind != "Turn":
            continue
        p = event.payload
        text = (p.get("text") or {}).get("text", "")
        if not text:
            continue
        if p.get("source_event_id"):
            label = p.get("source_kind") or "event"
        elif p.get("role") == "user":
            label = "instruction"
        else:
            label = p.get("role") or "turn"
        out.append(Piece(event.event_id, event.session_index, label, text, p.get("source_event_id")))
    return out


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    return _SENTENCE.split(text, maxsplit=1)[0] if text else ""


def tfidf_scores(docs: Sequence[str], query: str) -> np.ndarray:
    """Cosine similarity of each document to the query in a TF-IDF space fitted on the documents:
    tf = 1 + log(count), idf = log((1 + N) / (1 + df)) + 1, L2-normalised vectors."""
    tokenized = [words(d) for d in docs]
    vocab: dict[str, int] = {}
    for toks in tokenized:
        for tok in toks:
            vocab.setdefault(tok, len(vocab))
    if not vocab or not docs:
        return np.zeros(len(docs))
    n = len(docs)
    df = np.zeros(len(vocab))
    for toks in tokenized:
        for tok in set(toks):
            df[vocab[tok]] += 1
    idf = np.log((1 + n) / (1 + df)) + 1.0

    def vector(toks: list[str]) -> np.ndarray:
        v = np.zeros(len(vocab))
        for tok, count in Counter(toks).items():
            if tok in vocab:
                v[vocab[tok]] = (1.0 + math.log(count)) * idf[vocab[tok]]
        norm = np.linalg.norm(v)
        return v / norm if norm else v

    matrix = np.vstack([vector(t) for t in tokenized])
    q = vector(words(query))
    return matrix @ q


def clip_to_tokens(text: str, budget_tokens: int) -> str:
    """The longest prefix of `text` that fits `budget_tokens` (ceil(chars / 4) tokens)."""
    return text[: max(0, budget_tokens) * 4]
