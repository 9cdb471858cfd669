"""Validate's new static gates (decisive literals, slot patterns), messages that never print
a secret value, and a reference failure that names the failing oracle tests. Static gates and the
collector only: no sandbox run (the live gates' plumbing is tests/packs/test_validate_gates.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from membench.packs.finalize import finalize_pack
from membench.packs.validate import _Collector, static_gates
from membench.sandbox.workspace import snapshot
from membench.schemas.events import Event
from membench.formats.pack_format import load_pack

FIXTURES = Path(__file__).parents[2] / "fixtures"


def _final(tmp_path: Path, edit=None, solution_edit=None):
    """A finalized smoke pack (values revealed), edited after finalizing, and its provenance."""
    values: dict[str, dict[str, str]] = {}
    final = tmp_path / "final"
    finalize_pack(FIXTURES / "smoke", final, reveal=values)
    if edit is not None:
        manifest = json.loads((final / "manifest.json").read_text())
        edit(manifest, values)
        (final / "manifest.json").write_text(json.dumps(manifest))
    if solution_edit is not None:
        path = final / "hidden" / "smoke-currency" / "s3.solution.json"
        data = json.loads(path.read_text())
        solution_edit(data)
        path.write_text(json.dumps(data))
    pack = load_pack(final, check_hidden=False)
    provenance = json.loads((final / "provenance.json").read_text())
    return pack, provenance, values


def _gates(pack, provenance, seq_id="smoke-currency"):
    seq = pack.sequence(seq_id)
    return static_gates(pack, seq, provenance, snapshot(pack.repos[seq.repo])).gates


def test_a_public_leak_names_the_literal_and_secret_never_the_value(tmp_path):
    def leak(manifest, values):
        seq = manifest["sequences"][1]
        seq["sessions"][2]["instruction"] += " The default currency is " + values["smoke-currency"]["currency"] + "."
    pack, provenance, values = _final(tmp_path, leak)
    value = values["smoke-currency"]["currency"]
    gate = _gates(pack, provenance)["no_public_leak"]
    # the gate did catch the leak (the value is in the instruction) ...
    assert not gate["passed"] and value in pack.sequence("smoke-currency").sessions[2].instruction
    # ... and names where and which, never the value itself
    assert gate["detail"] == "session 3 instruction reveals decisive_literals[0] (trap secrets: currency)"
    assert value not in json.dumps(gate)


def test_every_static_gate_passes_on_the_shipped_pack(tmp_path):
    pack, provenance, _ = _final(tmp_path)
    for seq in pack.sequences:
        gates = _gates(pack, provenance, seq.seq_id)
        assert all(g["passed"] for g in gates.values()), gates
        assert {"decisive_literals", "slot_patterns"} <= set(gates)


def test_a_decisive_literal_naming_nothing_fails_its_gate(tmp_path):
    pack, provenance, _ = _final(tmp_path, lambda m, v: m["sequences"][1].update(decisive_literals=["EURO"]))
    gate = _gates(pack, provenance)["decisive_literals"]
    assert not gate["passed"] and "field 'decisive_literals[0]' occurs nowhere in hidden/smoke-currency/" in gate["detail"]


def test_a_slot_pattern_that_never_finds_its_answer_fails_its_gate(tmp_path):
    pack, provenance, values = _final(tmp_path, solution_edit=lambda d: d["slots"]["currency"].update(
        pattern="default currency is ([A-Z]{8})"))  # the event says "currency code is"
    gate = _gates(pack, provenance)["slot_patterns"]
    assert not gate["passed"] and gate["detail"].startswith("session 3: slot 'currency': its pattern never captures")
    assert values["smoke-currency"]["currency"] not in gate["detail"]


def _verdict(session: int, outcome: str, cases: list[tuple[str, str]]) -> Event:
    return Event("e", "rs", "r", "u", session, session, 0, "harness", "OracleVerdict", "harness", "", {
        "oracle_id": "o", "outcome": outcome, "cases": [{"case_id": c, "outcome": o} for c, o in cases]})


def test_reference_failure_names_the_failing_tests():
    collector = _Collector()
    collector.events = [_verdict(1, "pass", [("test_a", "pass")]),
                        _verdict(3, "fail", [("test_total", "pass"), ("test_default_currency", "fail"),
                                             ("test_other", "error")])]
    assert collector.failing_cases(3) == " (failing: test_default_currency fail, test_other error)"
    assert collector.failing_cases(1) == "" and collector.failing_cases(2) == ""
