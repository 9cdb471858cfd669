"""Deterministic extraction shared by the derived-memory conditions (B3, B6, B7, the DF family):
sentences, rule-bearing sentences, the scope of a delivered event, the files and symbols a task
names. No model: everything here is a fixed function of the text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from membench.memory_systems.text import Piece

_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9'\"(\[#`])")
# Words that mark a sentence as a rule, a decision or a correction — what a reflection keeps.
_RULE = re.compile(r"\b(must|never|always|only|should|shall|require[sd]?|use[sd]?|instead|now|no longer|"
                   r"supersede[sd]?|replace[sd]?|correction|deprecated|do not|don't|avoid|expects?|keep)\b", re.I)
# A token that looks like a literal worth keeping byte for byte: has a digit, a quote, a backtick, or
# is an upper-case code with a dash or underscore.
_LITERAL = re.compile(r"[`'\"]|\b[A-Z][A-Z0-9]*[-_][A-Za-z0-9_-]+\b|\b\w*\d\w*\b")
_PATH = re.compile(r"\b[\w.-]+(?:/[\w.-]+)*\.(?:py|pyi|json|md|txt|toml|cfg|ini|csv|ya?ml|sh|sql|js|ts)\b")
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")


def sentences(text: str) -> list[str]:
    text = " ".join(text.split())
    return [s for s in _SENTENCES.split(text) if s] if text else []


def rule_sentences(text: str) -> list[str]:
    """The sentences of TEXT that state a rule or carry a literal, in order; the first sentence
    when none does (a lesson is never empty)."""
    found = [s for s in sentences(text) if _RULE.search(s) or _LITERAL.search(s)]
    return found or sentences(text)[:1]


def paths_in(text: str) -> list[str]:
    return list(dict.fromkeys(_PATH.findall(text)))


def symbols_in(text: str) -> list[str]:
    return list(dict.fromkeys(_CALL.findall(text)))


def piece_scope(piece: Piece, event_scopes: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """A delivered event's declared scope (files, symbols); otherwise the paths and called names
    its text mentions."""
    if piece.source_event_id and event_scopes.get(piece.source_event_id):
        return tuple(event_scopes[piece.source_event_id])
    return tuple(paths_in(piece.text) + symbols_in(piece.text))


def union(scopes: Iterable[Iterable[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for scope in scopes for s in scope))
