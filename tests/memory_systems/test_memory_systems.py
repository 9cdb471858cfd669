"""Memory systems behind one protocol: presentation order, budgets, namespaces, adapters."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from membench.memory_systems.base import MemorySetup, Namespace
from membench.memory_systems.registry import MEMORY_SYSTEMS, make_memory, register_external
from membench.memory_systems.skill_bank import SkillBankError, verify_bank, write_manifest
from membench.schemas.events import Event, bounded_text
from tests.memory_systems.memory_server import json_memory_server

BUILTINS = ["B0", "B1", "B2", "B4", "B5", "curated_file"]


def turn(text: str, session: int, source: str | None = None, kind: str | None = None, role: str = "user",
         visibility: str = "agent", n: list = [0]) -> Event:
    n[0] += 1
    return Event(event_id=f"ev-{n[0]}", run_set="rs", run_id="r", unit_id="u", session_index=session, seq=n[0],
                 ts=0, producer="t", kind="Turn", visibility=visibility, prev_hash="0" * 64,
                 payload={"role": role, "text": bounded_text(text), "source_event_id": source, "source_kind": kind,
                          "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0,
                          "latency_ms": 0})


def session(index: int, instruction: str, *events: tuple[str, str]) -> list[Event]:
    out = [turn(instruction, index), turn("Filled 0 of 0 decisive slots from context.", index, role="agent")]
    out += [turn(text, index, source=eid, kind="decision") for eid, text in events]
    out.append(turn("harness-only secret", index, visibility="harness"))
    return out


S1 = session(1, "Add slug().", ("e1", "Exports use the code DF-old1 for dates."),
             ("e2", "Payments webhook: the key is KID-pay. Second sentence has detail XYZ-99."))
S2 = session(2, "Add widths().", ("e3", "Correction: exports now use the code DF-new2 for dates."),
             ("e4", "Billing webhook: the key is KID-bill."))


def filled(condition: str, query: str = "payments webhook key", budget: int = 2000, setup=None):
    mem = make_memory(condition, Namespace("rs", condition, 1, "seq"), setup)
    mem.write(S1)
    mem.write(S2)
    return mem.read(query, budget)


def test_registry_has_the_built_in_systems() -> None:
    assert set(BUILTINS) | {"skill_bank"} <= set(MEMORY_SYSTEMS)


def test_presentation_orders_differ() -> None:
    first_code = {}
    for condition in ("B1", "B4", "B5"):
        text = "\n".join(i.text for i in filled(condition).items)
        first_code[condition] = "old" if text.find("DF-old1") < text.find("DF-new2") else "new"
    assert first_code == {"B1": "new", "B4": "old", "B5": "old"}  # newest episode first vs chronological
    b2 = filled("B2", query="payments webhook key").items
    assert "KID-pay" in b2[0].text  # TF-IDF ranks the payments event first
    assert not filled("B0").items


def test_harness_events_never_stored_and_summaries_are_extractive() -> None:
    for condition in ("B1", "B2", "B4", "B5"):
        assert all("harness-only" not in i.text for i in filled(condition).items)
    b4 = "\n".join(i.text for i in filled("B4").items)
    assert "KID-pay" in b4 and "XYZ-99" not in b4 and "Filled" not in b4


@pytest.mark.parametrize("condition", ["B1", "B2", "B4", "B5", "curated_file"])
def test_read_respects_the_token_budget(condition: str) -> None:
    setup = MemorySetup(curated_context="note " * 400)
    for budget in (0, 5, 20, 60, 2000):
        ctx = filled(condition, budget=budget, setup=setup)
        assert ctx.tokens_admitted <= budget and ctx.token_budget == budget


def test_one_condition_never_reads_another_conditions_memory() -> None:
    """Memories written under one (run set, condition, seed, sequence) are invisible from every
    other namespace, for every system; the read is attempted, not assumed."""
    for condition in ("B1", "B2", "B4", "B5"):
        writer = make_memory(condition, Namespace("rs", condition, 1, "seq"))
        writer.write(S1 + S2)
        assert writer.read("payments webhook key", 2000).items
        for other in BUILTINS:
            for ns in (Namespace("rs", other, 1, "seq"), Namespace("rs", condition, 2, "seq"),
                       Namespace("rs", condition, 1, "other-seq"), Namespace("rs2", condition, 1, "seq")):
                if ns == Namespace("rs", condition, 1, "seq"):
                    continue
                reader = make_memory(other, ns)
                assert not any("KID-pay" in i.text or "DF-" in i.text for i in reader.read("payments webhook key", 2000).items)


def test_curated_file_reads_pack_and_sequence_context() -> None:
    ctx = filled("curated_file", setup=MemorySetup(curated_context="- code DF-cur", pack_curated_context="# notes"))
    (item,) = ctx.items
    assert item.memory_id == "curated:MEMORY.md" and "DF-cur" in item.text and "# notes" in item.text
    assert "DF-old1" not in item.text  # read-only: events never change it
    assert not filled("curated_file", setup=MemorySetup()).items


def test_skill_bank_verified_before_use(tmp_path: Path) -> None:
    bank = tmp_path / "skills"
    (bank / "regen").mkdir(parents=True)
    (bank / "regen" / "SKILL.md").write_text("# Regenerate generated files from their JSON source\n")
    (bank / "http").mkdir()
    (bank / "http" / "SKILL.md").write_text("# Add request headers with merge_headers\n")
    digest = write_manifest(bank)
    mem = make_memory("skill_bank", Namespace("rs", "skill_bank", 1, "s"), MemorySetup(skill_bank=bank))
    assert mem.skill_bank_digest == digest == verify_bank(bank)[0]
    ctx = mem.read("regenerate the generated module from JSON", 2000)
    assert ctx.items[0].memory_id == "skill:regen"
    assert mem.write(S1) == []
    (bank / "http" / "SKILL.md").write_text("# tampered\n")
    with pytest.raises(SkillBankError, match="does not match"):
        make_memory("skill_bank", Namespace("rs", "skill_bank", 1, "s"), MemorySetup(skill_bank=bank))
    write_manifest(bank)
    (bank / "extra.md").write_text("x")
    with pytest.raises(SkillBankError, match="not in MANIFEST"):
        verify_bank(bank)
    with pytest.raises(SkillBankError):
        make_memory("skill_bank", Namespace("rs", "skill_bank", 1, "s"), MemorySetup())


STORE_SCRIPT = r'''
import json, sys, pathlib
req = json.load(sys.stdin)
store = pathlib.Path(sys.argv[1]) / (req["namespace"].replace("/", "__") + ".json")
items = json.loads(store.read_text()) if store.exists() else []
if req["op"] == "write":
    new = [{"id": "x%d" % (len(items) + i), "text": e["text"], "type": "raw"} for i, e in enumerate(req["events"]) if e["source_event_id"]]
    store.write_text(json.dumps(items + new))
    print(json.dumps({"items": new}))
else:
    print(json.dumps({"items": list(reversed(items)), "candidates": [i["id"] for i in items]}))
'''


def test_external_command_adapter_is_namespaced(tmp_path: Path) -> None:
    script = tmp_path / "store.py"
    script.write_text(STORE_SCRIPT)
    register_external("ext-cmd-test", command=[sys.executable, str(script), str(tmp_path)])
    try:
        a = make_memory("ext-cmd-test", Namespace("rs", "ext-cmd-test", 1, "seq"))
        stored = a.write(S1 + S2)
        assert [i.text for i in stored][0].startswith("Exports use")
        ctx = a.read("q", 2000)
        assert ctx.items[0].text.startswith("Billing webhook")  # the external order is kept
        assert a.read("q", 10).tokens_admitted <= 10
        other = make_memory("ext-cmd-test", Namespace("rs", "ext-cmd-test", 2, "seq"))
        assert other.read("q", 2000).items == ()
    finally:
        MEMORY_SYSTEMS.pop("ext-cmd-test")


def test_external_http_adapter(tmp_path: Path) -> None:
    stores: dict[str, list] = {}
    seen: list[dict] = []

    def respond(req: dict) -> dict:
        seen.append(req)
        items = stores.setdefault(req["namespace"], [])
        if req["op"] == "write":
            items += [{"id": e["event_id"], "text": e["text"]} for e in req["events"]]
            return {"items": []}
        return {"items": items[-2:]}

    with json_memory_server(respond) as port:
        register_external("ext-http-test", url=f"http://127.0.0.1:{port}/memory")
        try:
            mem = make_memory("ext-http-test", Namespace("rs", "ext-http-test", 1, "seq"))
            mem.write(S1)
            assert [i.text for i in mem.read("q", 2000).items][-1].startswith("Payments webhook")
            assert all("harness-only" not in json.dumps(r) for r in seen)  # only agent-visible events
            assert make_memory("ext-http-test", Namespace("rs", "B5", 1, "seq")).read("q", 2000).items == ()
        finally:
            MEMORY_SYSTEMS.pop("ext-http-test")


def test_memory_literal_agent_fills_slots_in_presentation_order(tmp_path: Path) -> None:
    """scripted:memory-literal fills a slot only from its context — the instruction, then the
    memories in the order the memory system presents them — and otherwise writes the default."""
    from membench.agents.base import AgentTask
    from membench.agents.scripted import MemoryLiteralAgent
    from membench.memory_systems.base import MemoryContext, MemoryItem
    from membench.formats.pack_format import Slot, Solution

    class Emitter:
        session_index = 3

        def __init__(self):
            self.kinds = []

        def emit(self, kind, payload, visibility="agent"):
            self.kinds.append((kind, payload))

    solution = Solution({"m.py": "A = '{{SLOT:a}}'\nB = '{{SLOT:b}}'\n"},
                        {"a": Slot("a", "DF-new2", r"(DF-[a-z0-9]+)", "DF-ISO"),
                         "b": Slot("b", "KID-pay", r"(KID-[a-z]+)", "KID-default")})
    for order, expected in (((2, 1), "DF-new2"), ((1, 2), "DF-old1")):
        items = {1: MemoryItem("m1", "t", "code DF-old1"), 2: MemoryItem("m2", "t", "now DF-new2")}
        ctx = MemoryContext(tuple(items[i] for i in order), (), 2000)
        ws = tmp_path / f"ws{order[0]}"
        ws.mkdir()
        emitter = Emitter()
        outcome = MemoryLiteralAgent().act(AgentTask("Add m.py.", ws, ctx, solution), emitter)
        text = (ws / "m.py").read_text()
        assert f"A = '{expected}'" in text and "B = 'KID-default'" in text
        assert outcome.cited_ids == [f"m{order[0]}"]
        assert ("MemoryCitation", {"memory_ids": [f"m{order[0]}"]}) in emitter.kinds


def test_adapters_from_the_environment_are_registered_by_an_explicit_call(tmp_path):
    from membench.memory_systems.registry import register_adapters_from_env

    script = tmp_path / "mem.py"
    script.write_text("import json, sys\njson.load(sys.stdin)\nprint(json.dumps({'items': [], 'candidates': []}))\n")
    env = {"MEMBENCH_MEMORY_ADAPTERS": json.dumps({"env-ext-test": {"command": [sys.executable, str(script)]},
                                                   "B5": {"command": ["never-used"]}})}
    assert "env-ext-test" not in MEMORY_SYSTEMS  # nothing is registered at import time
    try:
        assert register_adapters_from_env(env) == ["env-ext-test"]  # a built-in name keeps its system
        memory = make_memory("env-ext-test", Namespace("rs", "env-ext-test", 1, "seq"))
        assert memory.read("q", 100).items == ()
        assert MEMORY_SYSTEMS["B5"].__name__ == "VerbatimEventMemory"
    finally:
        MEMORY_SYSTEMS.pop("env-ext-test", None)


def test_a_malformed_adapter_variable_is_a_usage_error_naming_it(cli):
    proc = cli("report", "no-such-run-set", env={"MEMBENCH_MEMORY_ADAPTERS": "{not json"})
    assert proc.returncode == 2
    assert "MEMBENCH_MEMORY_ADAPTERS" in proc.stderr and "Traceback" not in proc.stderr
