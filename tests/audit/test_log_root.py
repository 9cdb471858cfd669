"""The log root (docs/design.md §9), its signature and its file; abandoned attempts closed in their
own chain; and the scored-diff checks of replay (PatchProduced's inline diffs and blob digests).
Hand-built events and logs; the CLI end to end is in tests/integration/test_audit.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from membench.audit.log_root_record import (
    LogRootError,
    RunHead,
    WarehouseState,
    check_warehouse,
    describes,
    load_public_key,
    load_signing_key,
    read_record,
    sign,
    verify_signature,
    write_record,
)
from membench.audit.checks import BlobStore, diff_findings
from membench.audit.file_source import events_from_file
from membench.audit.replayer import replay
from membench.audit.root_check import check_log_root
from membench.bus.attempts import close_abandoned, closing_event, scan_log
from membench.bus.file import FileBus
from membench.schemas.chain import seal
from membench.schemas.events import GENESIS_HASH
from membench.schemas.log_root import log_root, root_lines, signed_message
from membench.schemas.registry import default_registry
from tests.processors.test_verdicts import build_run

SCHEMA = default_registry().latest("event")
A, B = "1" * 64, "2" * 64

# ------------------------------------------------------------------------------------ the definition


def test_root_is_sha256_over_sorted_run_lines():
    expected = hashlib.sha256(b"run-a " + A.encode() + b"\nrun-b " + B.encode() + b"\n").hexdigest()
    assert log_root({"run-b": B, "run-a": A}) == expected
    assert root_lines({"run-b": B, "run-a": A}) == f"run-a {A}\nrun-b {B}\n".encode()
    assert len(expected) == 64 and expected == expected.lower()


def test_root_changes_with_any_head_and_any_run():
    base = log_root({"run-a": A, "run-b": B})
    assert log_root({"run-a": A, "run-b": "3" * 64}) != base
    assert log_root({"run-a": A}) != base
    assert log_root({"run-a": A, "run-b": B, "run-c": A}) != base
    assert log_root({}) == hashlib.sha256(b"").hexdigest()


@pytest.mark.parametrize("heads, needle", [({"run a": A}, "whitespace"), ({"r": "ABC"}, "64 lowercase hex"),
                                           ({"r": ("ab" * 32).upper()}, "64 lowercase hex")])
def test_malformed_heads_are_refused(heads, needle):
    with pytest.raises(ValueError, match=needle):
        log_root(heads)


def rechain(events, **changes):
    """The events with `changes` applied, sealed again into one intact chain."""
    out, prev = [], GENESIS_HASH
    for event in events:
        event, _ = seal(SCHEMA, dataclasses.replace(event, seq=len(out), prev_hash=prev, **changes))
        out.append(event)
        prev = event.hash
    return out


def _sealed(events):
    return [(e, seal(SCHEMA, e)[1]) for e in events]


def _write_log(path, events):
    bus = FileBus(path)
    for event, datum in _sealed(events):
        bus.publish(event, datum)
    bus.close()


def _replay(path):
    findings = []
    return replay(events_from_file(path, findings), findings)


def test_replay_root_is_stable_and_equals_the_root_over_the_stored_heads(tmp_path):
    log = tmp_path / "events.avro"
    runs = [build_run(run_id="run-a"), build_run(("fail",), run_id="run-b")]
    _write_log(log, [e for run in runs for e in run])
    first, second = _replay(log), _replay(log)
    assert first.ok and first.log_root == second.log_root
    assert first.log_root == log_root({run[-1].run_id: run[-1].hash for run in runs})
    assert [s.runs for s in first.run_sets.values()] == [2]


def test_an_edit_that_leaves_the_stored_hashes_alone_still_changes_the_root(tmp_path):
    run = build_run(run_id="run-a")
    log = tmp_path / "intact.avro"
    _write_log(log, run)
    intact = _replay(log).log_root
    # edit one byte of a Turn's text inside the file: every stored hash field is as it was
    data = bytearray(log.read_bytes())
    at = data.find(b"[m1] x")
    assert at > 0 and data.find(b"[m1] x", at + 1) > 0  # the memory context, past the file header
    data[at + 5] ^= 0x01  # 'x' -> 'y'; still valid UTF-8
    edited = tmp_path / "edited.avro"
    edited.write_bytes(bytes(data))
    result = _replay(edited)
    assert not result.ok and result.log_root != intact
    # dropping the last event changes it too
    short = tmp_path / "short.avro"
    _write_log(short, run[:-1])
    assert _replay(short).log_root != intact


def test_a_file_with_two_run_sets_is_reported_per_run_set(tmp_path):
    log = tmp_path / "events.avro"
    other = rechain(build_run(run_id="run-x"), run_set="rs-2")
    _write_log(log, build_run(run_id="run-a") + other)
    result = _replay(log)
    assert sorted(result.run_sets) == ["rs", "rs-2"]
    assert result.log_root is None  # no single root for a file holding two run sets
    assert result.run_sets["rs-2"].log_root == log_root({"run-x": other[-1].hash})


# --------------------------------------------------------------------------------------- signing


@pytest.fixture
def keys(tmp_path):
    key = Ed25519PrivateKey.generate()
    private = tmp_path / "key.pem"
    public = tmp_path / "pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_signature_verifies_over_the_same_run_set_and_root_only(keys):
    private, public = keys
    signature = sign(load_signing_key(private), "rs", A)
    pub = load_public_key(public)
    assert signature.message == signed_message("rs", A).decode() == f"membench log_root v1 rs {A}"
    assert verify_signature(signature, pub, "rs", A, "f") is None
    assert "does not verify" in verify_signature(signature, pub, "rs", B, "f")
    assert "does not verify" in verify_signature(signature, pub, "rs-other", A, "f")
    other = Ed25519PrivateKey.generate().public_key()
    assert "does not verify" in verify_signature(signature, other, "rs", A, "f")
    assert "not signed" in verify_signature(None, pub, "rs", A, "f")


def test_keys_of_another_kind_or_no_key_are_refused_naming_the_file(tmp_path):
    ec_key = tmp_path / "ec.pem"
    ec_key.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(LogRootError, match=r"ec\.pem: .*not an Ed25519 private key"):
        load_signing_key(ec_key)
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(LogRootError, match="junk.pem: not an unencrypted PEM private key"):
        load_signing_key(junk)
    with pytest.raises(LogRootError, match="junk.pem: not a PEM public key"):
        load_public_key(junk)


def test_bad_sign_key_or_pubkey_is_a_usage_error_and_writes_nothing(cli_inproc, home, tmp_path):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a key")
    proc = cli_inproc("run", "smoke", "--sign-key", str(junk))
    assert proc.returncode == 2 and "--sign-key" in proc.stderr and "junk.pem" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not home.exists()
    log = tmp_path / "events.avro"
    _write_log(log, build_run())
    proc = cli_inproc("replay", str(log), "--pubkey", str(junk))
    assert proc.returncode == 2 and "--pubkey" in proc.stderr


# ------------------------------------------------------------------------------- log_root.json


def _state(rows: dict[str, dict[str, str]], heads: dict[str, str]) -> WarehouseState:
    runs = {r: RunHead(r, "u/" + r, "completed", 9, heads[r], rows[r]) for r in heads}
    return WarehouseState("rs", runs, log_root(heads))


def test_record_round_trips_and_a_malformed_one_names_the_field(tmp_path, keys):
    state = _state({"run-a": {"run_results": "ab"}}, {"run-a": A})
    record = state.record(sign(load_signing_key(keys[0]), "rs", state.root), "http://auditor:s3cret@ch:8123")
    path = tmp_path / "log_root.json"
    write_record(path, record)
    assert read_record(path) == record
    assert "s3cret" not in path.read_text() and record.warehouse == "http://ch:8123"
    assert describes(record, "http://other:pw@ch:8123") and not describes(record, "chdb:///elsewhere")
    document = json.loads(path.read_text())
    assert list(document)[:5] == ["version", "run_set", "warehouse", "definition", "log_root"]
    document["runs"][0]["last_seq"] = "nine"
    path.write_text(json.dumps(document))
    with pytest.raises(LogRootError, match=r"log_root.json: field 'runs\[0\].last_seq'"):
        read_record(path)


def test_check_names_the_run_and_table_that_changed(tmp_path):
    recorded = _state({"run-a": {"run_results": "1", "failures": "2"}, "run-b": {"run_results": "3"}},
                      {"run-a": A, "run-b": B}).record()
    same = _state({"run-a": {"run_results": "1", "failures": "2"}, "run-b": {"run_results": "3"}},
                  {"run-a": A, "run-b": B})
    assert check_warehouse(same, recorded) == []
    edited = _state({"run-a": {"run_results": "X", "failures": "2"}, "run-b": {"run_results": "3"}},
                    {"run-a": A, "run-b": B})
    assert check_warehouse(edited, recorded) == [
        "run run-a: its rows in run_results differ from those recorded at the end of the run set"]
    deleted = _state({"run-a": {"run_results": "1"}}, {"run-a": A})
    problems = check_warehouse(deleted, recorded)
    assert "run run-b: recorded in log_root.json but absent from the warehouse" in problems
    assert "run run-a: its rows in failures differ from those recorded at the end of the run set" in problems
    added = _state({"run-a": {"run_results": "1", "failures": "2"}, "run-b": {"run_results": "3"},
                    "run-c": {"run_results": "4"}}, {"run-a": A, "run-b": B, "run-c": A})
    assert "not in log_root.json" in check_warehouse(added, recorded)[0]
    assert check_warehouse(added, recorded, new_runs_allowed=True) == []  # a run set resuming


def test_check_log_root_compares_recomputed_root_and_signature(tmp_path, keys):
    log = tmp_path / "events.avro"
    run = build_run(run_id="run-a")
    _write_log(log, run)
    result = _replay(log)
    path = tmp_path / "log_root.json"
    private, public = keys
    signature = sign(load_signing_key(private), "rs", result.log_root)
    write_record(path, _state({"run-a": {}}, {"run-a": run[-1].hash}).record(signature))
    check = check_log_root(result, path, load_public_key(public))
    assert result.ok and check.signature == "verified" and check.recorded == check.recomputed
    # a forged head and a run the log does not hold: both named (ours are read back from disk)
    forged = _state({"run-a": {}, "run-z": {}}, {"run-a": A, "run-z": B}).record(signature)
    write_record(path, forged)
    check = check_log_root(result, path, load_public_key(public))
    differs = [f for f in result.findings if "differs from the root recomputed from the log" in f.reason]
    assert len(differs) == 1 and differs[0].run_id == "run-a" and "(2 runs differ)" in differs[0].reason
    assert check.signature == "verified"  # signed over what the log gives, not what the file says


# --------------------------------------------------------------------------- abandoned attempts


def test_closing_event_continues_the_runs_own_chain(tmp_path):
    log = tmp_path / "events.avro"
    cut = build_run(run_id="run-cut")[:7]
    _write_log(log, build_run(run_id="run-done") + cut)
    scan = scan_log(log, "rs")
    assert [h.run_id for h in scan.open_runs()] == ["run-cut"]
    bus = FileBus(log)
    closed = close_abandoned(log, "rs", bus.publish)
    bus.close()
    (event,) = closed
    assert (event.run_id, event.seq, event.prev_hash, event.kind) == ("run-cut", 7, cut[-1].hash, "RunEnded")
    assert event.payload == {"status": "abandoned", "error_type": "abandoned_attempt"}
    result = _replay(log)
    assert result.ok, [str(f) for f in result.findings]
    assert result.run_sets["rs"].abandoned == [("run-cut", cut[0].unit_id, 7)]
    assert scan_log(log, "rs").open_runs() == []
    with pytest.raises(ValueError, match="already ended"):
        closing_event(scan_log(log, "rs").runs["run-done"])


def test_an_open_run_without_closing_is_a_replay_finding(tmp_path):
    log = tmp_path / "events.avro"
    _write_log(log, build_run(run_id="run-cut")[:7])
    result = _replay(log)
    assert [(f.run_id, f.seq) for f in result.findings] == [("run-cut", 6)]


# --------------------------------------------------------------------------------- scored diffs


def _patch(**diffs):
    payload = {"files": ["a.py"], "added_lines": 1, "removed_lines": 0, "production_paths": ["a.py"],
               "test_paths": [], "stripped_paths": [], "diff_sha256": A, "production_diff": None,
               "production_diff_sha256": None, "stripped_diff": None, "stripped_diff_sha256": None, **diffs}
    event = build_run()[0]
    return dataclasses.replace(event, kind="PatchProduced", seq=5, payload=payload)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


DIFF = "--- a/a.py\n+++ b/a.py\n@@ -0,0 +1 @@\n+x = 'é'\n"


def test_inline_diffs_must_hash_to_their_digests(tmp_path):
    store = BlobStore(tmp_path)
    assert diff_findings(_patch(production_diff=DIFF, production_diff_sha256=_sha(DIFF)), store) == []
    bad = diff_findings(_patch(production_diff=DIFF + " ", production_diff_sha256=_sha(DIFF)), store)
    assert [(f.seq, "production_diff_sha256" in f.reason) for f in bad] == [(5, True)]
    stripped = diff_findings(_patch(stripped_diff="y", stripped_diff_sha256=_sha("z")), store)
    assert len(stripped) == 1 and "PatchProduced.stripped_diff_sha256" in stripped[0].reason
    missing_digest = diff_findings(_patch(production_diff=DIFF), store)
    assert "production_diff_sha256 is null" in missing_digest[0].reason


def test_a_digest_without_inline_text_needs_a_matching_blob(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / _sha(DIFF)).write_text(DIFF, encoding="utf-8")
    ok = _patch(production_diff_sha256=_sha(DIFF), stripped_diff_sha256=_sha(DIFF))
    assert diff_findings(ok, BlobStore(blobs)) == []
    gone = diff_findings(_patch(production_diff_sha256=_sha("other")), BlobStore(blobs))
    assert f"blob {blobs / _sha('other')} is missing" in gone[0].reason and gone[0].seq == 5
    (blobs / _sha("other")).write_text("not the other diff")
    wrong = diff_findings(_patch(stripped_diff_sha256=_sha("other")), BlobStore(blobs))
    assert "PatchProduced.stripped_diff" in wrong[0].reason and "not its name" in wrong[0].reason
    escape = diff_findings(_patch(production_diff_sha256="../../etc/passwd"), BlobStore(blobs))
    assert "not 64 lowercase hex" in escape[0].reason
    unknown = diff_findings(_patch(production_diff_sha256=_sha(DIFF)), BlobStore(None))
    assert "no blob store" in unknown[0].reason


def test_events_without_diff_fields_are_not_findings(tmp_path):
    assert diff_findings(_patch(), BlobStore(None)) == []
    old = _patch()
    old = dataclasses.replace(old, payload={k: v for k, v in old.payload.items() if "_diff" not in k})
    assert diff_findings(old, BlobStore(None)) == []


def test_replay_checks_the_diffs_of_a_log_against_its_blob_store(tmp_path):
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / _sha(DIFF)).write_text(DIFF, encoding="utf-8")
    run = build_run(run_id="run-a")
    events = rechain(run[:5] + [_patch(production_diff_sha256=_sha(DIFF), stripped_diff="s",
                                       stripped_diff_sha256=_sha("s"))] + run[5:], run_id="run-a")
    log = tmp_path / "events.avro"
    _write_log(log, events)
    findings = []
    result = replay(events_from_file(log, findings), findings, blobs_for=lambda run_set: blobs)
    assert result.ok and result.diffs_checked == 1, [str(f) for f in result.findings]
    (blobs / _sha(DIFF)).write_text(DIFF + "tampered", encoding="utf-8")
    findings = []
    result = replay(events_from_file(log, findings), findings, blobs_for=lambda run_set: blobs)
    assert [(f.run_id, f.seq) for f in result.findings] == [("run-a", 5)]


def test_replay_names_the_last_good_event_before_an_undecodable_block(tmp_path):
    """Replay's log reader (membench.audit.logscan): a damaged block is a finding naming the byte offset
    and the run and seq of the last event before it."""
    from membench.audit.file_source import events_from_file
    from membench.bus.file import FileBus
    from membench.bus.emitter import RunEmitter

    path = tmp_path / "events.avro"
    bus = FileBus(path)
    emitter = RunEmitter("rs", "r1", "u", bus.publish)
    for i in range(2):
        emitter.emit("MemoryCitation", {"memory_ids": [f"m{i}"]})
    bus.close()
    with open(path, "ab") as handle:  # a block whose sync marker is wrong: not a torn tail, a damaged one
        handle.write(b"\x02\x10" + b"\x00" * 8 + b"\x00" * 16)
    findings: list = []
    events = list(events_from_file(path, findings))
    assert [(e.run_id, e.seq) for e, *_ in events] == [("r1", 0), ("r1", 1)]
    assert len(findings) == 1 and (findings[0].run_id, findings[0].seq) == ("r1", 1)
    assert "undecodable data near byte" in findings[0].reason and "after this event" in findings[0].reason
