"""B3, B6, B7 and the DF family: what each stores, what a read admits within the budget, and how
the variants differ. Events are built as the runner emits them (agent-visible Turns, a patch, the
session's end); the pack events carry declared scopes through MemorySetup."""

from __future__ import annotations

import pytest

from membench.memory_systems.base import MemorySetup, Namespace
from membench.memory_systems.registry import MEMORY_SYSTEMS, make_memory
from membench.memory_systems.subtask import MAX_PER_EPISODE
from membench.memory_systems.tracker import TRACKER_ID
from membench.memory_systems.typed import VARIANTS
from membench.schemas.events import Event, bounded_text

NEW = ["B3", "B6", "B7", *VARIANTS]
_n = [0]


def ev(kind: str, payload: dict, session: int, visibility: str = "agent") -> Event:
    _n[0] += 1
    return Event(event_id=f"ev-{_n[0]}", run_set="rs", run_id="r", unit_id="u", session_index=session, seq=_n[0],
                 ts=0, producer="t", kind=kind, visibility=visibility, prev_hash="0" * 64, payload=payload)


def turn(text: str, session: int, source: str | None = None, kind: str | None = None, role: str = "user",
         visibility: str = "agent") -> Event:
    return ev("Turn", {"role": role, "text": bounded_text(text), "source_event_id": source, "source_kind": kind,
                       "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0,
                       "latency_ms": 0}, session, visibility)


def session(index: int, instruction: str, changed: list[str], *events: tuple[str, str, str]) -> list[Event]:
    out = [turn(instruction, index),
           ev("ToolCall", {"call_id": f"c{index}", "name": "write_file", "arguments_digest": "0" * 64,
                           "is_patch": True}, index),
           turn("Filled 0 of 0 decisive slots from context.", index, role="agent"),
           ev("PatchProduced", {"production_paths": changed}, index),
           ev("SessionEnded", {"session_index": index, "status": "completed"}, index)]
    out += [turn(text, index, source=eid, kind=kind) for eid, kind, text in events]
    out.append(turn("harness-only secret HX-1", index, visibility="harness"))
    return out


S1 = session(1, "In tabular/csvout.py add to_csv(rows). Keep it simple.", ["tabular/csvout.py"],
             ("e1", "review", "Review of the CSV writer: regulator exports must end with the trailer #END-aa11. "
                              "Thanks for the quick turnaround."),
             ("e2", "decision", "Billing webhooks in payhook/hooks.py sign with the key KID-bill."))
S2 = session(2, "In tabular/widths.py add column_widths(rows, columns).", ["tabular/widths.py"],
             ("e3", "decision", "Correction: regulator exports now end with the trailer #END-bb22 instead."))
SCOPES = {"e1": ("tabular/csvout.py", "to_csv"), "e2": ("payhook/hooks.py",), "e3": ("tabular/csvout.py",)}
SETUP = MemorySetup(event_scopes=SCOPES)
QUERY = "Create tabular/regulator.py with to_regulator_csv(rows): CSV for the regulator's loader."
ON_FILE = "Change tabular/csvout.py so that to_csv(rows) writes the regulator trailer."


def filled(condition: str, budget: int = 2000, query: str = QUERY, sessions=(S1, S2)):
    mem = make_memory(condition, Namespace("rs", condition, 1, "seq"), SETUP)
    written = [mem.write(s) for s in sessions]
    return mem, written, mem.read(query, budget)


def text_of(ctx) -> str:
    return "\n".join(i.text for i in ctx.items)


def test_the_new_conditions_are_registered_with_model_free_descriptions() -> None:
    for condition in NEW:
        assert condition in MEMORY_SYSTEMS
        assert MEMORY_SYSTEMS[condition].condition == condition
    for condition in ("B3", *VARIANTS):  # the paper's versions use a model; these say they do not
        assert "model-free" in MEMORY_SYSTEMS[condition].description


@pytest.mark.parametrize("condition", NEW)
def test_read_respects_the_budget_and_never_sees_harness_events(condition: str) -> None:
    for budget in (0, 5, 30, 80, 2000):
        _, written, ctx = filled(condition, budget)
        assert ctx.tokens_admitted <= ctx.token_budget <= budget
        assert len(set(i.memory_id for i in ctx.items)) == len(ctx.items)
        assert all(i.memory_id in ctx.candidates for i in ctx.items)
    assert all("HX-1" not in i.text for items in written for i in items)


@pytest.mark.parametrize("condition", NEW)
def test_every_memory_carries_provenance_and_scope(condition: str) -> None:
    _, written, _ = filled(condition)
    items = [i for batch in written for i in batch]
    assert items
    turns = {e.event_id for e in S1 + S2 if e.visibility == "agent"}
    for item in items:
        assert item.provenance_event_ids and set(item.provenance_event_ids) <= turns
        assert item.scope, item


@pytest.mark.parametrize("condition", NEW)
def test_no_namespace_reads_another(condition: str) -> None:
    writer = make_memory(condition, Namespace("rs", condition, 1, "seq"), SETUP)
    for s in (S1, S2):
        writer.write(s)
    assert writer.read(ON_FILE, 2000).items
    for ns in (Namespace("rs", condition, 2, "seq"), Namespace("rs", condition, 1, "other"),
               Namespace("rs2", condition, 1, "seq"), Namespace("rs", "B5", 1, "seq")):
        assert make_memory(condition, ns, SETUP).read(ON_FILE, 2000).items == ()


def test_b3_stores_extractive_lessons_only_and_ranks_by_similarity() -> None:
    _, written, ctx = filled("B3", query="billing webhook key")
    lessons = [i for batch in written for i in batch]
    assert [i.memory_type for i in lessons] == ["reflection"] * 3  # one per delivered event, no raw events
    assert lessons[0].text.startswith("Lesson from session 1 (review): ")
    assert "#END-aa11" in lessons[0].text and "Thanks" not in lessons[0].text  # rule sentences, verbatim
    assert lessons[0].scope == SCOPES["e1"]
    assert "KID-bill" in ctx.items[0].text  # the billing lesson ranks first for a billing query


def test_b6_keeps_at_most_three_action_items_per_episode() -> None:
    _, written, ctx = filled("B6")
    for batch in written:
        assert 1 <= len(batch) <= MAX_PER_EPISODE == 3
        assert len({i.memory_id.split(":")[1] for i in batch}) == 1  # one episode's items
    s1 = {i.memory_type: i for i in written[0]}
    assert set(s1) == {"subtask", "action", "outcome"}
    assert "write_file x1" in s1["action"].text and "tabular/csvout.py" in s1["action"].text
    assert "review x1" in s1["outcome"].text and "decision x1" in s1["outcome"].text
    everything = "\n".join(i.text for batch in written for i in batch)
    assert "#END-" not in everything and "KID-bill" not in everything  # actions, not what was said
    # an episode with many events and tool calls still yields three items
    busy = session(3, "In a.py add f().", ["a.py"], *[(f"x{k}", "review", f"Note {k}.") for k in range(8)])
    mem = make_memory("B6", Namespace("rs", "B6", 1, "busy"))
    assert len(mem.write(busy)) == 3


def test_b7_keeps_one_tracker_item_replaced_each_session() -> None:
    mem = make_memory("B7", Namespace("rs", "B7", 1, "seq"))
    first = mem.write(S1)
    second = mem.write(S2)
    assert [i.memory_id for i in first] == [i.memory_id for i in second] == [TRACKER_ID]
    ctx = mem.read(QUERY, 2000)
    (item,) = ctx.items
    assert item == second[0] and item != first[0]  # replaced, not appended
    assert item.text.index("[S1]") < item.text.index("[S2]") and "tabular/widths.py" in item.text
    assert "#END-" not in item.text  # a tracker records tasks, not project rules
    assert len(item.provenance_event_ids) == 2
    clipped = mem.read(QUERY, item.tokens - 1)  # the oldest task goes first
    assert clipped.items and "[S1]" not in clipped.items[0].text and "[S2]" in clipped.items[0].text
    assert mem.read(QUERY, 3).items == ()
    other = make_memory("B7", Namespace("rs", "B7", 1, "other-seq"))
    assert other.read(QUERY, 2000).items == ()  # sequence-local


def test_df_supersedes_the_stale_fact_and_records_the_contradiction() -> None:
    mem, written, ctx = filled("DF")
    types = [i.memory_type for batch in written for i in batch]
    assert types == ["human_feedback", "semantic_project", "semantic_project", "contradiction"]
    stale = next(t for t in mem.store if "#END-aa11" in t.item.text)
    assert stale.status == "superseded" and stale.superseded_by == written[1][0].memory_id
    text = text_of(ctx)
    assert "#END-bb22" in text and "#END-aa11" not in text
    assert "KID-bill" not in text  # payhook/ is outside the task's package: gated
    assert any(i.memory_type == "contradiction" for i in ctx.items)  # typed-only admits the record


def test_df_variants_differ_as_the_paper_defines_them() -> None:
    reads = {c: filled(c)[2] for c in VARIANTS}
    kinds = {c: {i.memory_type for i in ctx.items} for c, ctx in reads.items()}
    # raw-only: capsules only, verbatim, no typed memories, no contradiction records
    assert kinds["DF-raw-only"] == {"episodic"}
    assert "Thanks for the quick turnaround" in text_of(reads["DF-raw-only"])
    # hybrid: typed and capsules, contradiction records excluded (R2)
    assert "episodic" in kinds["DF-hybrid"] and "human_feedback" not in kinds["DF-hybrid"]
    assert "semantic_project" in kinds["DF-hybrid"] and "contradiction" not in kinds["DF-hybrid"]
    # strict: θ_admit 1.5 refuses what is only package-near; on the file itself it admits, at most three
    assert reads["DF"].items and reads["DF-strict"].items == ()
    on_file = filled("DF-strict", query=ON_FILE)[2]
    assert 1 <= len(on_file.items) <= 3 and "#END-bb22" in text_of(on_file)
    assert filled("DF-strict", budget=5000)[2].token_budget == 600
    assert reads["DF-strict-hybrid"].token_budget == 600
    # A0: whole episodes (with the agent's replies), no typed memories
    assert kinds["A0"] == {"episodic"} and "Filled 0 of 0" in text_of(reads["A0"])
    # A2: no repair, so the stale trailer stays active and no contradiction record exists
    a2 = filled("A2")[0]
    assert all(t.status == "active" for t in a2.store) and "contradiction" not in {t.item.memory_type for t in a2.store}
    assert "#END-aa11" in text_of(reads["A2"])
    # A5: repair runs, but superseded memories are not suppressed at read time
    a5 = filled("A5")[0]
    assert any(t.status == "superseded" for t in a5.store) and "#END-aa11" in text_of(reads["A5"])
    # A6: no hard gate, so the out-of-package memory is admitted too
    assert "KID-bill" in text_of(reads["A6"]) and "KID-bill" not in text_of(reads["DF"])
    assert len({tuple(i.memory_id.split(":", 1)[1] for i in ctx.items) for ctx in reads.values()}) >= 6


def test_df_orders_items_by_score_and_the_threshold_admits() -> None:
    mem, _, ctx = filled("DF")
    scores = dict(zip((t.item.memory_id for t in mem.store), mem.scores(QUERY)))
    admitted = [scores[i.memory_id] for i in ctx.items]
    assert admitted == sorted(admitted, reverse=True) and min(admitted) >= mem.policy.theta_admit
