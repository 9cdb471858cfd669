"""Replay verifies each event's hash with the schema it was WRITTEN with: a log written
under the previous event schema must still verify after a newer one becomes the latest, and an
edited byte must still break it. Logs are built by hand (real OCF files, real chDB)."""

from __future__ import annotations

import dataclasses

import fastavro
import pytest

from membench.audit.file_source import events_from_file
from membench.audit.replayer import replay
from membench.audit.warehouse_source import events_from_warehouse
from membench.bus.ocf import OcfAppender
from membench.schemas.chain import ChainVerifier, seal
from membench.schemas.events import GENESIS_HASH, Event, bounded_text
from membench.schemas.registry import default_registry
from membench.schemas.writers import writer_schema

REGISTRY = default_registry()
LATEST = REGISTRY.latest("event")
PREVIOUS = REGISTRY.versions("event")[1]  # event v2: v3 changed how PatchProduced and OracleVerdict encode

PATCH_V2 = {"files": ["app.py"], "added_lines": 3, "removed_lines": 1, "production_paths": ["app.py"],
            "test_paths": [], "stripped_paths": [], "diff_sha256": "ab" * 32}


def _payloads() -> list[tuple[str, int, dict]]:
    return [
        ("RunStarted", -1, {"suite": "s", "task": "t", "condition": "B0", "seed": 1, "agent": "scripted:null",
                            "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                            "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1,
                            "construct": "C1", "family": "fam"}),
        ("SessionStarted", 1, {"session_index": 1, "instruction": bounded_text("fix it"), "start_state": "clean",
                               "workspace_digest": "w", "scored": True, "oracle_id": "o1"}),
        ("Turn", 1, {"role": "agent", "text": bounded_text("editing app.py"), "source_event_id": None,
                     "source_kind": None, "input_tokens": 5, "cached_tokens": 0, "output_tokens": 7,
                     "reasoning_tokens": 0, "latency_ms": 1}),
        ("PatchProduced", 1, PATCH_V2),
        ("OracleVerdict", 1, {"oracle_id": "o1", "outcome": "pass", "cases": [], "exit_status": 0,
                              "inconclusive": False, "duration_ms": 4}),
        ("SessionEnded", 1, {"session_index": 1, "status": "completed"}),
        ("RunEnded", -1, {"status": "completed", "error_type": None}),
    ]


def sealed_run(schema, run_id: str = "run-old") -> list[tuple[Event, bytes]]:
    """One run's events sealed with `schema`, payloads shaped as that schema's writer wrote them."""
    out, prev = [], GENESIS_HASH
    for seq, (kind, session, payload) in enumerate(_payloads()):
        event = Event(f"ev-{run_id}-{seq}", "rs-old", run_id, "s/t/B0/1", session, seq,
                      1_700_000_000_000_000 + seq, "membench-runner/0.0", kind,
                      "harness" if kind in ("RunStarted", "OracleVerdict", "RunEnded") else "agent", prev, payload)
        event, datum = seal(schema, event)
        out.append((event, datum))
        prev = event.hash
    return out


def write_log(path, schema, sealed) -> None:
    appender = OcfAppender(path, schema)
    for _, datum in sealed:
        appender.append(datum)
    appender.close()


def test_the_previous_schema_is_older_than_the_latest():
    assert PREVIOUS.version == 2 < LATEST.version and PREVIOUS.fingerprint != LATEST.fingerprint


def test_a_log_written_with_the_previous_schema_verifies_after_a_schema_change(tmp_path):
    log = tmp_path / "events.avro"
    write_log(log, PREVIOUS, sealed_run(PREVIOUS))
    findings = []
    result = replay(events_from_file(log, findings), findings)
    assert result.ok, [str(f) for f in result.findings]
    assert result.events == len(_payloads()) and result.runs == 1
    # the header names the writer; with the newest schema the PatchProduced datum would differ
    with open(log, "rb") as handle:
        assert writer_schema(fastavro.reader(handle).writer_schema).fingerprint == PREVIOUS.fingerprint
    newest_only = ChainVerifier(LATEST)
    broken = [newest_only.check(event) for event, *_ in events_from_file(log, [])]
    # v3 re-encodes PatchProduced and OracleVerdict; v5 RunStarted (resolution_policy) and Turn (source_scope)
    assert [b.seq for b in broken if b] == [0, 2, 3, 4], \
        "the newest schema re-encodes RunStarted, Turn, PatchProduced and OracleVerdict"


def test_an_edited_byte_of_a_previous_schema_log_still_fails(tmp_path):
    log = tmp_path / "events.avro"
    write_log(log, PREVIOUS, sealed_run(PREVIOUS))
    data = bytearray(log.read_bytes())
    at = data.find(b"editing app.py")
    data[at] ^= 0x20  # 'e' -> 'E': still valid UTF-8, so it decodes and must fail the chain
    log.write_bytes(bytes(data))
    findings = []
    result = replay(events_from_file(log, findings), findings)
    assert [(f.run_id, f.seq) for f in result.findings][:1] == [("run-old", 2)]
    assert "edited" in result.findings[0].reason and f"v{PREVIOUS.version}" in result.findings[0].reason


def test_one_verifier_checks_events_of_several_writer_schemas():
    old, new = sealed_run(PREVIOUS, "run-a"), sealed_run(LATEST, "run-b")
    verifier = ChainVerifier()
    checks = [verifier.check(e, PREVIOUS) for e, _ in old] + [verifier.check(e, LATEST) for e, _ in new]
    assert checks == [None] * len(checks)
    # the wrong writer schema for an event is a break, named by run and seq
    again = ChainVerifier()
    wrong = [again.check(e, LATEST) for e, _ in old]
    assert [(b.run_id, b.seq) for b in wrong if b] == [("run-a", 0), ("run-a", 2), ("run-a", 3), ("run-a", 4)]


def test_without_any_writer_schema_the_verifier_refuses():
    event, _ = sealed_run(LATEST)[0]
    with pytest.raises(ValueError, match="writer schema"):
        ChainVerifier().check(event)


@pytest.mark.integration
def test_warehouse_rows_verify_with_the_schema_their_fingerprint_names(tmp_path):
    from membench.processors import derive_all
    from membench.warehouse.client import connect
    from membench.warehouse.sink import RunBatchSink

    sealed = sealed_run(PREVIOUS)
    warehouse = connect(f"chdb://{tmp_path / 'wh'}")
    try:
        sink = RunBatchSink(warehouse, PREVIOUS.fingerprint_hex)
        derived = derive_all([e for e, _ in sealed])
        for event, datum in sealed:
            sink.add(event, datum, [d for d in derived if d.source_seq == event.seq])
        sink.flush()
        findings = []
        result = replay(events_from_warehouse(warehouse, "rs-old", findings), findings, warehouse)
        assert result.ok, [str(f) for f in result.findings]
        assert result.events == len(sealed) and result.compared == len(derived)
        # an edited datum in the raw table is found, by run and seq
        edited = dataclasses.replace(sealed[2][0], event_id="ev-edited", run_id="run-edited", prev_hash=GENESIS_HASH,
                                     seq=0)
        _, good = seal(PREVIOUS, edited)
        bad = good.replace(b"editing", b"Editing")
        sink.add(edited, bad, [])
        sink.flush()
        findings = []
        result = replay(events_from_warehouse(warehouse, "rs-old", findings), findings)
        hashes = [(f.run_id, f.seq) for f in result.findings if "does not match the event's contents" in f.reason]
        assert hashes == [("run-edited", 0)]
    finally:
        warehouse.close()
