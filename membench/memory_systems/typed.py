"""The DreamBench-SWE reference-probe family (typed consolidation), model-free variants.

The paper's probe keeps an append-only raw episode log and a derived store of typed memories
(episodic, semantic_project, procedural, failure, human_feedback, constraint, contradiction), each
with provenance, scope, status (active / superseded / stale), confidence and risk. After each
session a sleep pass consolidates, repairs contradictions and suppresses stale memories; a read
generates candidates, rejects the inadmissible ones by hard gates, ranks the rest by a weighted
score and admits them under a token budget. In the paper a model does the consolidation and
judging; here every operator is a fixed deterministic rule (no model, no gateway call), so these
are the model-free variants, labelled as such in their descriptions:

- typed consolidation: one typed memory per delivered project event; its type follows the event's
  kind (review / human_feedback -> human_feedback, failure -> failure, contradiction / decision ->
  semantic_project), a decision about generated files or workflow is procedural and one that
  forbids or requires is a constraint; its content is the event's rule-bearing sentences, verbatim;
  its scope is the event's declared scope.
- contradiction repair: a memory whose text signals a correction (supersede, correction, now,
  instead, no longer, replaced, ...) or that comes from a `contradiction` event supersedes every
  older active typed memory whose scope overlaps it or whose text is similar (TF-IDF cosine >=
  REPAIR_SIMILARITY); each repair appends a `contradiction` record linking old to new. Episodic
  capsules are exempt (the paper's R1b).
- stale suppression: superseded memories are inadmissible.
- raw-evidence capsule (R1): one `episodic` memory per session carrying the delivered events'
  text verbatim, through the same gate.
- retrieval gate: a memory is rejected when not active, when its type is excluded (R2 excludes
  contradiction records from the hybrid and raw-only reads), or when its files lie outside the
  task's top-level packages; the rest score
  W_SEM·cos + W_FILE·F + W_SYM·Y + W_TYPE·prior(type) + W_CONF·confidence + W_PROV·provenance
  − L_RISK·risk − L_AGE·log(1 + sessions since written), and those scoring at least θ_admit are
  admitted best first, up to the read limit, within the budget.

Counterfactual replay (dream artifacts grounded in executable evidence) and the causal failure
extractor need a model or a re-execution and are not built; so A4 (no replay) is not a distinct
condition here, and `membench run` refuses A4 (and A11) with the reason (model_driven.UNDEFINED_ABLATIONS).
The model-driven consolidation and repair judge are `DF-llm` / `DF-hybrid-llm` (model_driven.py),
which keep this module's store, gate and score.

Conditions: DF (typed only), DF-raw-only (capsules only), DF-hybrid (both), DF-strict and
DF-strict-hybrid (θ_admit = 1.5, read limit 3, budget at most 600 tokens), and the ablations A0
(raw episode writes only: one episodic memory per session holding its whole agent-visible
transcript), A2 (no contradiction repair), A5 (no stale suppression), A6 (no hard gate, no
threshold: score-ranked).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.derive import paths_in, piece_scope, rule_sentences, symbols_in, union
from membench.memory_systems.text import Piece, pieces, tfidf_scores
from membench.schemas.events import Event

W_SEM, W_FILE, W_SYM, W_TYPE, W_CONF, W_PROV = 1.0, 1.0, 0.5, 0.25, 0.25, 0.1
L_RISK, L_AGE = 0.5, 0.1
THETA_ADMIT = 0.6
READ_LIMIT = 6
REPAIR_SIMILARITY = 0.3
TYPE_PRIOR = {"human_feedback": 1.0, "constraint": 1.0, "procedural": 0.8, "semantic_project": 0.8,
              "episodic": 0.6, "failure": 0.4, "contradiction": 0.2}
CONFIDENCE = {"human_feedback": 0.9, "constraint": 0.9, "procedural": 0.8, "semantic_project": 0.8,
              "episodic": 1.0, "failure": 0.5, "contradiction": 0.7}
RISK = {"failure": 0.5}

_CORRECTION = re.compile(r"\b(supersede[sd]?|superseding|correction|corrected|no longer|instead|now|replace[sd]?|"
                         r"deprecated|revis(?:e|ed|ion)|narrow(?:s|ed)?|moved|changed|overrides?)\b", re.I)
_PROCEDURAL = re.compile(r"\b(generat(?:e|ed|or)|regenerat\w*|source of truth|workflow|run the|script)\b", re.I)
_CONSTRAINT = re.compile(r"\b(must|never|always|do not|don't|only)\b", re.I)


@dataclass
class Typed:
    item: MemoryItem
    session: int
    status: str = "active"  # active / superseded
    superseded_by: str | None = None
    files: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Policy:
    typed: bool = True             # typed consolidation
    capsules: bool = False         # R1 raw-evidence capsule per session
    episodes: bool = False         # A0: whole raw episode per session
    repair: bool = True            # contradiction repair
    stale_suppression: bool = True
    hard_gate: bool = True
    exclude_contradictions: bool = False  # R2
    theta_admit: float = THETA_ADMIT
    read_limit: int = READ_LIMIT
    budget_cap: int | None = None


def _type_of(piece: Piece) -> str:
    kind = piece.label
    if kind in ("review", "human_feedback"):
        return "human_feedback"
    if kind == "failure":
        return "failure"
    if _PROCEDURAL.search(piece.text):
        return "procedural"
    if kind != "contradiction" and _CONSTRAINT.search(piece.text):
        return "constraint"
    return "semantic_project"


def _files(scope: Sequence[str]) -> tuple[str, ...]:
    return tuple(s for s in scope if "/" in s or "." in s)


def _top(path: str) -> str:
    return path.split("/", 1)[0]


class TypedConsolidationMemory:
    condition = "DF"
    description = "typed consolidation, contradiction repair, stale suppression, retrieval gate (model-free)"
    policy = Policy()
    uses_memory = True
    accepts_setup = True

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        self.namespace = namespace
        self._scopes = (setup or MemorySetup()).event_scopes
        self.store: list[Typed] = []
        self._session = 0

    # -- sleep: consolidation and repair ------------------------------------------------------
    def _add(self, memory_id: str, memory_type: str, text: str, provenance: tuple[str, ...],
             scope: tuple[str, ...], session: int) -> Typed:
        typed = Typed(MemoryItem(memory_id, memory_type, text, provenance, scope), session, files=_files(scope))
        self.store.append(typed)
        return typed

    def _capsule(self, delivered: list[Piece], session: int) -> Typed:
        """R1: the session's delivered events verbatim, one episodic memory (raw evidence, never a
        model's or a rule's product)."""
        text = "\n".join(f"[{p.label}] {p.text}" for p in delivered)
        return self._add(f"{self.condition}:s{session}:capsule", "episodic", f"Raw evidence (session {session}):\n{text}",
                         tuple(p.event_id for p in delivered), union(piece_scope(p, self._scopes) for p in delivered),
                         session)

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        parts = pieces(events)
        if not parts:
            return []
        session = parts[0].session_index
        self._session = max(self._session, session)
        delivered = [p for p in parts if p.source_event_id]
        written: list[Typed] = []
        pol = self.policy
        if pol.episodes:
            text = "\n".join(f"[{p.label}] {p.text}" for p in parts)
            written.append(self._add(f"{self.condition}:s{session}:episode", "episodic", f"Episode (session {session}):\n{text}",
                                     tuple(p.event_id for p in parts),
                                     union(piece_scope(p, self._scopes) for p in parts), session))
        if pol.capsules and delivered:
            written.append(self._capsule(delivered, session))
        if pol.typed:
            for p in delivered:
                memory_type = _type_of(p)
                scope = piece_scope(p, self._scopes)
                label = f"[{memory_type}]" + (f" scope {', '.join(scope)}:" if scope else "")
                new = self._add(f"{self.condition}:m{len(self.store)}", memory_type,
                                f"{label} " + " ".join(rule_sentences(p.text)), (p.event_id,), scope, session)
                written.append(new)
                if pol.repair and (p.label == "contradiction" or _CORRECTION.search(p.text)):
                    written += self._repair(new)
        return [t.item for t in written]

    def _repair(self, new: Typed) -> list[Typed]:
        olds = [t for t in self.store if t is not new and t.status == "active"
                and t.item.memory_type not in ("episodic", "contradiction") and t.session <= new.session]
        if not olds:
            return []
        similarity = tfidf_scores([t.item.text for t in olds], new.item.text)
        records = []
        for old, sim in zip(olds, similarity):
            overlap = set(old.item.scope) & set(new.item.scope)
            if not overlap and float(sim) < REPAIR_SIMILARITY:
                continue
            old.status, old.superseded_by = "superseded", new.item.memory_id
            records.append(self._add(
                f"{self.condition}:x{len(self.store)}", "contradiction",
                f"[contradiction] {old.item.memory_id} is superseded by {new.item.memory_id}.",
                old.item.provenance_event_ids + new.item.provenance_event_ids,
                union((old.item.scope, new.item.scope)), new.session))
        return records

    # -- read: gate, score, admit -------------------------------------------------------------
    def _gate(self, typed: Typed, task_files: tuple[str, ...]) -> bool:
        pol = self.policy
        if pol.stale_suppression and typed.status != "active":
            return False
        if pol.exclude_contradictions and typed.item.memory_type == "contradiction":
            return False
        if task_files and typed.files and not {_top(f) for f in typed.files} & {_top(f) for f in task_files}:
            return False  # outside the task's packages
        return True

    def scores(self, query: str) -> list[float]:
        task_files = tuple(paths_in(query))
        task_symbols = set(symbols_in(query)) | set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query))
        cos = tfidf_scores([t.item.text for t in self.store], query)
        out = []
        for t, c in zip(self.store, cos):
            if self.policy.hard_gate and not self._gate(t, task_files):
                out.append(-math.inf)
                continue
            mtype = t.item.memory_type
            f = 1.0 if set(t.files) & set(task_files) else (0.5 if {_top(x) for x in t.files} & {_top(x) for x in task_files} else 0.0)
            symbols = [s for s in t.item.scope if s not in t.files]
            y = 1.0 if set(symbols) & task_symbols else 0.0
            provenance = min(1.0, len(t.item.provenance_event_ids) / 2)
            age = max(0, self._session - t.session)
            out.append(W_SEM * float(c) + W_FILE * f + W_SYM * y + W_TYPE * TYPE_PRIOR.get(mtype, 0.5)
                       + W_CONF * CONFIDENCE.get(mtype, 0.5) + W_PROV * provenance
                       - L_RISK * RISK.get(mtype, 0.0) - L_AGE * math.log1p(age))
        return out

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        pol = self.policy
        budget = min(budget_tokens, pol.budget_cap) if pol.budget_cap is not None else budget_tokens
        if not self.store:
            return MemoryContext((), (), budget)
        scores = self.scores(query)
        order = sorted(range(len(self.store)), key=lambda i: (-scores[i], -i))  # ties: newest first
        admitted: list[MemoryItem] = []
        used = 0
        for i in order:
            if len(admitted) >= pol.read_limit or scores[i] == -math.inf:
                break
            if pol.hard_gate and scores[i] < pol.theta_admit:
                break
            item = self.store[i].item
            if used + item.tokens <= budget:
                admitted.append(item)
                used += item.tokens
        return MemoryContext(tuple(admitted), tuple(self.store[i].item.memory_id for i in order), budget)


def _variant(name: str, description: str, **policy) -> type:
    return type(f"TypedConsolidation_{name.replace('-', '_')}", (TypedConsolidationMemory,),
                {"condition": name, "description": description, "policy": Policy(**policy)})


STRICT = dict(theta_admit=1.5, read_limit=3, budget_cap=600)
VARIANTS: dict[str, type] = {
    "DF": TypedConsolidationMemory,
    "DF-raw-only": _variant("DF-raw-only", "raw-evidence capsules only, contradiction records excluded (model-free)",
                            typed=False, capsules=True, exclude_contradictions=True),
    "DF-hybrid": _variant("DF-hybrid", "DF plus raw-evidence capsules, contradiction records excluded (model-free)",
                          capsules=True, exclude_contradictions=True),
    "DF-strict": _variant("DF-strict", "DF with θ_admit 1.5, read limit 3, budget ≤ 600 (model-free)", **STRICT),
    "DF-strict-hybrid": _variant("DF-strict-hybrid", "DF-hybrid with DF-strict's retrieval settings (model-free)",
                                 capsules=True, exclude_contradictions=True, **STRICT),
    "A0": _variant("A0", "episodic-only: raw episode writes, no consolidation or repair (model-free)",
                   typed=False, episodes=True, repair=False),
    "A2": _variant("A2", "DF without contradiction repair (model-free)", repair=False),
    "A5": _variant("A5", "DF without read-side stale suppression (model-free)", stale_suppression=False),
    "A6": _variant("A6", "DF without the retrieval hard gate or threshold: score-ranked (model-free)", hard_gate=False),
}
