"""The model-driven memory policies (B3-llm, DF-llm, DF-hybrid-llm): defensive parsing of the memory
model's answers, the fallbacks (store nothing new, record why), and what the policies do with a
usable answer. The memory model here is a stub returning fixed answer texts (a unit isolated from
the gateway; tests/memory_systems/test_model_client.py runs the real gateway path)."""

from __future__ import annotations

import json

import pytest

from membench.memory_systems.base import MemorySetup, Namespace
from membench.memory_systems.model_driven import (MAX_ITEMS, MAX_TEXT, AnswerError, parse_lessons, parse_memories,
                                                  parse_object, parse_supersessions)
from membench.memory_systems.registry import is_model_driven, make_memory, undefined_ablation
from tests.memory_systems.test_dreambench_conditions import QUERY, S1, S2, SCOPES


class StubModel:
    """Answers each ask with the next of `answers` (a str, or None for no message); records asks and notes."""

    def __init__(self, *answers: str | None):
        self.answers = list(answers)
        self.asks: list[tuple[str, dict]] = []
        self.notes: list[str] = []

    def ask(self, purpose: str, system: str, user: str) -> str | None:
        self.asks.append((purpose, json.loads(user)))
        return self.answers.pop(0) if self.answers else "{}"

    def note(self, text: str) -> None:
        self.notes.append(text)


def memory(condition: str, model: StubModel):
    return make_memory(condition, Namespace("rs", condition, 1, "seq"), MemorySetup(event_scopes=SCOPES, model=model))


# ---------------------------------------------------------------------------------------- parsing
def test_parse_object_accepts_json_and_a_fenced_block_and_names_what_is_wrong() -> None:
    assert parse_object('{"lessons": []}') == {"lessons": []}
    assert parse_object('Here you are:\n```json\n{"a": 1}\n```\nDone.') == {"a": 1}
    with pytest.raises(AnswerError, match="not JSON"):
        parse_object("keep the marker, I think")
    with pytest.raises(AnswerError, match="not an object"):
        parse_object("[1, 2]")
    with pytest.raises(AnswerError, match="no message"):
        parse_object(None)


def test_parse_lessons_keeps_known_evidence_and_bounds_items_and_text() -> None:
    doc = {"lessons": [{"text": "Use #END-aa11.", "evidence": ["e1", "e9", 3]}, {"text": "  "}, "junk",
                       {"text": "x" * (MAX_TEXT + 50)}] + [{"text": f"l{i}"} for i in range(2 * MAX_ITEMS)]}
    lessons = parse_lessons(json.dumps(doc), ["e1", "e2"])
    assert lessons[0] == ("Use #END-aa11.", ["e1"])  # e9 and 3 were never shown
    assert len(lessons[1][0]) == MAX_TEXT
    assert len(lessons) <= MAX_ITEMS
    with pytest.raises(AnswerError, match="no \"lessons\" list"):
        parse_lessons('{"lesson": "x"}', ["e1"])
    with pytest.raises(AnswerError, match="no lesson with text"):
        parse_lessons('{"lessons": [{"text": ""}, 5]}', ["e1"])


def test_parse_memories_drops_unknown_types_and_ungrounded_items() -> None:
    text = json.dumps({"memories": [
        {"type": "constraint", "text": "Trailer #END-bb22.", "evidence": ["e3"]},
        {"type": "opinion", "text": "Nice code.", "evidence": ["e1"]},          # unknown type
        {"type": "procedural", "text": "Regenerate the table.", "evidence": []},  # no provenance: ineligible
        {"type": "failure", "text": "Flaky test.", "evidence": ["e7"]}]})        # evidence never shown
    assert parse_memories(text, ["e1", "e3"]) == [("constraint", "Trailer #END-bb22.", ["e3"])]
    assert parse_memories('{"memories": []}', ["e1"]) == []  # nothing worth keeping is an answer
    with pytest.raises(AnswerError, match="known type, text and evidence"):
        parse_memories('{"memories": [{"type": "opinion", "text": "x", "evidence": ["e1"]}]}', ["e1"])
    with pytest.raises(AnswerError):
        parse_memories('{"memories": "all of them"}', ["e1"])


def test_parse_supersessions_keeps_pairs_of_shown_ids_only() -> None:
    text = json.dumps({"supersede": [{"old": "m0", "new": "m2"}, {"old": "m0", "new": "m2"}, {"old": "m2", "new": "m2"},
                                     {"old": "m9", "new": "m2"}, {"old": "m0", "new": "m1"}, "m0"]})
    assert parse_supersessions(text, ["m0", "m1", "m2"], ["m2"]) == [("m0", "m2")]
    assert parse_supersessions('{"supersede": []}', ["m0"], ["m1"]) == []
    with pytest.raises(AnswerError):
        parse_supersessions('{"old": "m0"}', ["m0"], ["m1"])


# ---------------------------------------------------------------------------------------- policies
def test_registry_marks_the_model_driven_conditions_and_refuses_a_missing_model() -> None:
    assert [c for c in ("B3", "B3-llm", "DF", "DF-llm", "DF-hybrid-llm", "B5") if is_model_driven(c)] == \
        ["B3-llm", "DF-llm", "DF-hybrid-llm"]
    with pytest.raises(ValueError, match="needs --memory-model"):
        make_memory("DF-llm", Namespace("rs", "DF-llm", 1, "seq"), MemorySetup())
    assert "counterfactual replay" in undefined_ablation("A4") and "forced consolidation" in undefined_ablation("A11")
    assert undefined_ablation("A2") is None


def test_b3_llm_stores_the_model_lessons_with_provenance_and_reads_them() -> None:
    model = StubModel(json.dumps({"lessons": [{"text": "Regulator exports end with #END-aa11.", "evidence": ["e3"]},
                                              {"text": "Keep commits small."}]}))
    mem = memory("B3-llm", model)
    written = mem.write(S1)
    purpose, ask = model.asks[0]
    assert purpose == "sleep" and ask["task"] == "reflect" and ask["session"] == 1
    shown = {e["id"]: e for e in ask["evidence"]}
    assert shown["e3"]["text"].startswith("Review of the CSV writer") and shown["e3"]["scope"] == list(SCOPES["e1"])
    assert all("harness-only" not in e["text"] for e in ask["evidence"])  # harness events never reach the model
    assert [i.memory_id for i in written] == ["B3-llm:l0", "B3-llm:l1"]
    assert written[0].scope == SCOPES["e1"] and len(written[0].provenance_event_ids) == 1
    assert len(written[1].provenance_event_ids) == len(ask["evidence"])  # no evidence cited: the whole session
    assert "#END-aa11" in "\n".join(i.text for i in mem.read(QUERY, 2000).items)
    assert model.notes == []


@pytest.mark.parametrize("condition", ["B3-llm", "DF-llm", "DF-hybrid-llm"])
@pytest.mark.parametrize("answer", ["the trailer is #END-aa11", None, '{"unexpected": true}', "[]"])
def test_an_unusable_answer_stores_nothing_new_and_is_recorded(condition: str, answer: str | None) -> None:
    model = StubModel(answer)
    written = memory(condition, model).write(S1)
    kinds = {i.memory_type for i in written}
    # DF-hybrid-llm's raw-evidence capsule is raw evidence, not a model product: it is kept
    assert kinds == ({"episodic"} if condition == "DF-hybrid-llm" else set())
    assert len(model.notes) == 1 and "unusable" in model.notes[0] and condition in model.notes[0]


def test_df_llm_consolidates_typed_memories_and_its_judge_repairs_a_contradiction() -> None:
    model = StubModel(
        json.dumps({"memories": [{"type": "human_feedback", "text": "Regulator exports end with #END-aa11.",
                                  "evidence": ["e1"]},
                                 {"type": "constraint", "text": "Webhooks sign with KID-bill.", "evidence": ["e2"]}]}),
        json.dumps({"supersede": []}),  # the judge of session 1: nothing contradicts
        json.dumps({"memories": [{"type": "constraint", "text": "Regulator exports now end with #END-bb22.",
                                  "evidence": ["e1"]}]}),
        json.dumps({"supersede": [{"old": "DF-llm:m0", "new": "DF-llm:m2"}]}))
    mem = memory("DF-llm", model)
    first = mem.write(S1)
    assert [(i.memory_id, i.memory_type) for i in first] == [("DF-llm:m0", "human_feedback"), ("DF-llm:m1", "constraint")]
    assert first[0].scope == SCOPES["e1"]  # the scope of the evidence it cites, never the model's word
    second = mem.write(S2)
    assert [p for p, _ in model.asks] == ["sleep", "judge", "sleep", "judge"]
    judged = model.asks[3][1]["memories"]
    assert {m["id"]: m["new"] for m in judged} == {"DF-llm:m0": False, "DF-llm:m1": False, "DF-llm:m2": True}
    assert [i.memory_type for i in second] == ["constraint", "contradiction"]
    text = "\n".join(i.text for i in mem.read(QUERY, 2000).items)
    assert "#END-bb22" in text and "#END-aa11" not in text  # the superseded memory is suppressed


def test_df_llm_judge_failure_supersedes_nothing() -> None:
    model = StubModel(json.dumps({"memories": [{"type": "constraint", "text": "Trailer #END-aa11.", "evidence": ["e1"]},
                                               {"type": "constraint", "text": "Key KID-bill.", "evidence": ["e2"]}]}),
                      "no idea")
    mem = memory("DF-llm", model)
    written = mem.write(S1)
    assert [i.memory_type for i in written] == ["constraint", "constraint"]
    assert len(model.notes) == 1 and "judge answer unusable" in model.notes[0]
    assert all(t.status == "active" for t in mem.store)
