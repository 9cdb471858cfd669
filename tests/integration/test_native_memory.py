"""NATIVE end to end: the agent's own memory files carried between a unit's sessions, by `membench
run` with the real runner, sandbox and scoring.

The scripted agents first (no model), then the real Codex and Claude Code CLIs in bubblewrap. No
model API can be reached from these machines: the CLIs' upstream is a scripted model server
(`membench.bench.scripted_model_server.ScriptedUpstream`) that answers in each API's wire format, its
answers authored from the smoke pack's solution templates and filled only from what reached the
agent. In the memory-update turn after S1 it writes the decision it was told to the CLI's own
memory file; in S3 it finds the currency code only if the CLI itself loaded that file."""

from __future__ import annotations

import re

import pytest

from membench.bench.scripted_model_server import ScriptedUpstream, script_from_pack
from membench.agents.scripted import NullAgent, RefsolAgent
from membench.packs.pack_resolver import open_pack
from tests.conftest import assert_run_sets_verify
from tests.integration.test_model_agents import KEY, currency_pack, events, require_cli  # noqa: F401 (fixture)
from tests.runner.unit_runs import WorkAgent, run_smoke_unit

pytestmark = pytest.mark.integration

SECRET = re.compile(r"default currency code is ([A-Z]{8})")


def by_condition(evs) -> dict[str, list]:
    """A one-seed, one-sequence run set's events, per condition (the unit id's third part)."""
    return {unit_id.split("/")[2]: [e for e in evs if e.unit_id == unit_id] for unit_id in {e.unit_id for e in evs}}


def scored(evs) -> str:
    return [e.payload["outcome"] for e in evs if e.kind == "OracleVerdict"][-1]


def test_scripted_memory_literal_passes_with_its_own_memory_file_where_b0_fails(cli, home, bwrap_sandbox):
    cli("run", "smoke", "--conditions", "B0,NATIVE", "--agent", "scripted:memory-literal", "--seeds", "1",
        "--run-set", "native-smoke", check=True)
    assert_run_sets_verify(home, "native-smoke")
    rows = cli("sql", "SELECT condition, count(), sum(scored_passed) FROM run_results WHERE run_set = 'native-smoke' "
                      "GROUP BY condition ORDER BY condition", check=True).stdout.split()
    assert rows == ["B0", "3", "0", "NATIVE", "3", "3"]  # every trap: passed with native memory, failed without
    evs = events(home, "native-smoke")
    native = [e for e in evs if "/NATIVE/" in e.unit_id]
    writes = [e for e in native if e.kind == "MemoryWrite"]
    assert {e.payload["memory_id"] for e in writes} == {"native:MEMORY.md"}
    delivered = {e.event_id for e in native if e.kind == "Turn" and e.payload.get("source_event_id")}
    assert all(set(e.payload["provenance_event_ids"]) <= delivered for e in writes)  # learned from what followed
    assert not any(e.kind in ("MemoryRead", "MemoryWrite") for e in evs if "/B0/" in e.unit_id)
    contracts = cli("sql", "SELECT DISTINCT memory_contract_status FROM memory_contracts WHERE run_set = "
                           "'native-smoke' AND condition = 'NATIVE' AND session_index = 3", check=True).stdout.split()
    assert contracts == ["passed"]  # the memory contract judges the agent's own file like any memory


@pytest.mark.parametrize("agent,passes", [(RefsolAgent(), "pass"), (NullAgent(), "empty_production_diff")],
                         ids=["refsol", "null"])
def test_refsol_and_null_remember_nothing(tmp_path, bwrap_sandbox, agent, passes):
    pack = open_pack("smoke", tmp_path / "home")
    evs, summary, _ = run_smoke_unit(pack, bwrap_sandbox, agent, tmp_path, condition="NATIVE")
    assert scored(evs) == passes
    assert not [e for e in evs if e.kind == "MemoryWrite"]
    assert [e.payload["admitted_ids"] for e in evs if e.kind == "MemoryRead"] == [[], [], []]


@pytest.mark.parametrize("condition,defended", [("NATIVE", True), ("B0", True), ("B0", False)],
                         ids=["native-keeps", "b0-drops", "b0-undefended-control"])
def test_only_native_carries_a_memory_file_and_it_is_never_the_patch(tmp_path, bwrap_sandbox, monkeypatch,
                                                                     condition, defended):
    if not defended:  # the runner's drop bypassed: the file rides the continuation tree into S2
        monkeypatch.setattr("membench.runner.grid.drop_memory_files", lambda agent, workspace, pack: [])
    seen: dict[int, str | None] = {}

    def work(task, session):
        if task.native is not None and task.native.feedback:
            return  # the memory-update turn: this agent records nothing there
        memory = task.workspace / "CLAUDE.md"
        seen[session] = memory.read_text() if memory.exists() else None
        if session == 1:
            memory.write_text("remember: the client id is 5a1f\n")
        (task.workspace / "ledger" / f"s{session}.py").write_text("X = 1\n")

    evs, _, _ = run_smoke_unit(open_pack("smoke", tmp_path / "home"), bwrap_sandbox,
                               WorkAgent(work, "claude-code:work"), tmp_path, condition=condition)
    carried = condition == "NATIVE" or not defended
    assert seen == {1: None, 2: "remember: the client id is 5a1f\n" if carried else None, 3: seen[2]}
    patched = [f for e in evs if e.kind == "PatchProduced" for f in e.payload["files"]]
    assert ("CLAUDE.md" in patched) is not defended  # a memory file is never the patch
    dropped = [e for e in evs if e.kind == "Turn" and e.payload["source_kind"] == "native_memory_dropped"]
    assert len(dropped) == (1 if condition == "B0" and defended else 0)
    assert [e.payload["memory_id"] for e in evs if e.kind == "MemoryWrite"] == (
        ["native:CLAUDE.md"] if condition == "NATIVE" else [])


@pytest.mark.parametrize("agent,cli_name,memory_file,memory_id", [
    ("codex", "codex", "AGENTS.md", "native:AGENTS.md"),
    ("claude-code", "claude", "/tmp/home/.claude/projects/-workspace/memory/MEMORY.md",
     "native:~/.claude/projects/-workspace/memory/MEMORY.md"),
])
def test_a_real_cli_keeps_a_fact_in_its_own_memory_file_and_finds_it_later(cli, home, bwrap_sandbox, currency_pack,
                                                                          agent, cli_name, memory_file, memory_id):
    """Driven by a scripted upstream (no model API here): the CLI, sandbox, gateway and loader are real."""
    require_cli(cli_name)
    script = script_from_pack(currency_pack)
    script["sessions"].insert(0, {  # the memory-update turn: record the decision it was told
        "when": "This is what followed it", "files": {memory_file: "# Project memory\n\n{{SLOT:fact}}\n"},
        "slots": {"fact": {"pattern": r"- (Decision with the finance team:[^\n]*)", "default": "nothing"}},
        "say": "Recorded."})
    with ScriptedUpstream(script) as upstream:
        cli("run", str(currency_pack), "--agent", agent, "--conditions", "B0,NATIVE", "--seeds", "1",
            "--run-set", "native-cli", "--workers", "1", "--model-base-url", upstream.base_url, "--model-record",
            env={"MEMBENCH_MODEL_API_KEY": KEY, "MEMBENCH_AGENT_WALL_S": "300"}, check=True)
    assert_run_sets_verify(home, "native-cli")
    units = by_condition(events(home, "native-cli"))
    native, b0 = units["NATIVE"], units["B0"]
    assert scored(native) == "pass" and scored(b0) == "fail"

    (write,) = [e for e in native if e.kind == "MemoryWrite"]
    assert write.session_index == 1 and write.payload["memory_id"] == memory_id
    secret = SECRET.search(write.payload["content"]["text"]).group(1)
    (delivered,) = [e for e in native if e.kind == "Turn" and e.payload.get("source_event_id")]
    assert write.payload["provenance_event_ids"] == [delivered.event_id]
    s3_read = next(e for e in native if e.kind == "MemoryRead" and e.session_index == 3)
    assert s3_read.payload["admitted_ids"] == [memory_id] and secret in s3_read.payload["context"]["text"]

    def requests(evs, session):
        return [(home / "runs" / "native-cli" / "blobs" / e.payload["request_digest"]).read_text()
                for e in evs if e.kind == "ModelCall" and e.session_index == session]
    # the CLI loaded its memory file itself (membench put nothing in the prompt) ...
    assert all(secret in r for r in requests(native, 3))
    assert not any("Memory from earlier sessions" in r for r in requests(native, 3))
    # ... and no other namespace ever saw it: B0 never, nor NATIVE's own first session
    assert not any(secret in r for s in (1, 2, 3) for r in requests(b0, s))
    assert not any(secret in r for r in requests(native[:native.index(delivered)], 1))
    assert not any(e.kind in ("MemoryRead", "MemoryWrite") for e in b0)
