"""The canary proof over the run set's events (an in-memory read model: the search's SQL is held to it
by tests/warehouse/test_read_model.py) and a real blob store: scored diffs larger than the
inline limit live only as blobs beside the log (membench/bus/blobs.py), and the proof searches them too.

Before the fix a secret inside such a diff was never looked at: a leak planted there passed."""

from __future__ import annotations


from membench.bus.blobs import get_blob
from membench.bus.emitter import RunEmitter
from membench.runner.grid import INLINE_DIFF_LIMIT, patch_fields
from membench.reports.canary import Secret, search_events
from membench.schemas.events import bounded_text
from tests.warehouse.read_model_fixtures import in_memory

SECRETS = [Secret("alpha", "trap-a", "QWERTYUIOPASDFGH"), Secret("beta", "trap-b", "ZXCVBNMLKJHGFDSA")]


def _run(trap: str, production_diff: str, blob_dir) -> list:
    emitted: list = []
    em = RunEmitter("rs", f"{trap}-B5-1", f"suite/{trap}/B5/1", lambda e, d: emitted.append(e))
    em.emit("RunStarted", {"suite": "suite", "task": trap, "condition": "B5", "seed": 1, "agent": "scripted:x",
                           "agent_kind": "scripted", "model": None, "budgets": {}, "code_digest": "c",
                           "pack_digest": "p", "fixture_digest": "f", "skill_bank_digest": None, "attempt": 1})
    em.session_index = 1
    em.emit("SessionStarted", {"session_index": 1, "instruction": bounded_text("do"), "start_state": "clean",
                               "workspace_digest": "w", "scored": True, "oracle_id": "o1"})
    em.emit("PatchProduced", {"files": ["a.py"], "added_lines": 1, "removed_lines": 0, "production_paths": ["a.py"],
                              "test_paths": [], "stripped_paths": [], "diff_sha256": "d",
                              **patch_fields("production_diff", production_diff, blob_dir),
                              **patch_fields("stripped_diff", "", blob_dir)})
    em.emit("OracleVerdict", {"oracle_id": "o1", "outcome": "pass", "cases": [], "exit_status": 0,
                              "inconclusive": False, "duration_ms": 1}, visibility="harness")
    em.emit("SessionEnded", {"session_index": 1, "status": "completed"})
    em.session_index = -1
    em.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")
    return emitted


def _large_diff(payload: str) -> str:
    filler = "+# padding line that makes the diff larger than the inline limit\n" * (INLINE_DIFF_LIMIT // 60 + 10)
    return f"--- a/a.py\n+++ b/a.py\n{filler}+VALUE = '{payload}'\n"




def test_a_leak_in_a_diff_stored_as_a_blob_is_found(tmp_path):
    blobs = tmp_path / "blobs"
    leaked = _large_diff(SECRETS[1].value)  # trap-b's secret in a diff of a trap-a run
    own = _large_diff(SECRETS[1].value + " own")  # trap-b's secret in its own run: expected, not a leak
    reads = in_memory([_run("trap-a", leaked, blobs), _run("trap-b", own, blobs)])
    assert len(list(blobs.iterdir())) == 2  # both diffs are blobs, neither is inline
    proof = search_events(reads, "rs", SECRETS, "pack", read_blob=lambda d: get_blob(blobs, d))
    assert proof.status == "fail" and proof.leaks == 1 and proof.own_trap_hits == 1
    (hit,) = proof.hits
    assert (hit.secret, hit.trap, hit.run_trap) == ("beta", "trap-b", "trap-a")
    assert hit.where.startswith("event trap-a-B5-1 seq ") and "PatchProduced production_diff blob" in hit.where
    assert proof.searched.blobs == 2 and proof.searched.blob_bytes > 2 * INLINE_DIFF_LIMIT
    assert proof.searched.blobs_missing == 0
    # without the blob store the leak is not seen, and the proof does not pass either
    blind = search_events(reads, "rs", SECRETS, "pack")
    assert blind.status == "not_run" and blind.leaks == 0 and blind.searched.blobs_missing == 2


def test_an_unreadable_blob_makes_the_proof_not_run_never_pass(tmp_path):
    blobs = tmp_path / "blobs"
    reads = in_memory([_run("trap-a", _large_diff("nothing secret"), blobs)])
    ok = search_events(reads, "rs", SECRETS, "pack", read_blob=lambda d: get_blob(blobs, d))
    assert ok.status == "pass" and ok.searched.blobs == 1 and ok.reason is None
    elsewhere = tmp_path / "elsewhere"  # a machine without the run set's blobs (e.g. a Kafka runner's)
    proof = search_events(reads, "rs", SECRETS, "pack", read_blob=lambda d: get_blob(elsewhere, d),
                          blob_place="in runs/rs/blobs of this MEMBENCH_HOME")
    assert proof.status == "not_run" and proof.searched.blobs == 0 and proof.searched.blobs_missing == 1
    assert proof.reason.startswith("1 scored diff stored as blobs could not be read in runs/rs/blobs of this "
                                   "MEMBENCH_HOME (first: event trap-a-B5-1 seq ")
    assert "\n" not in proof.reason
