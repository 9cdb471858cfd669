"""A duplicated event in a log file is a finding. A log file is written by one process
(the embedded bus), so unlike a Kafka topic (redelivery, a stalled runner's late attempt) it never
legitimately holds a fenced event; replay names a duplicate (same run, seq and content) as such, by
one process and by `--jobs`. Controls: the same log without the duplicate verifies clean, and the
same events read as a non-file source are only fenced (what the file rule adds)."""

from __future__ import annotations

import dataclasses

import pytest

from membench.audit.checks import SourceDirs
from membench.audit.file_source import events_from_file
from membench.audit.parallel_replay import replay_file_jobs
from membench.audit.replayer import replay
from tests.audit.test_replay_jobs import SCHEMA, _interleaved, _write
from tests.processors.test_verdicts import build_run


def _runs():
    return [build_run(("pass", "fail"), run_id=f"run-{i:02d}") for i in range(4)]


def _findings(path, jobs):
    if jobs == 1:
        found: list = []
        result = replay(events_from_file(path, found), found, None, SourceDirs(file_dir=path.parent).blobs,
                        file_log=True)
    else:
        result = replay_file_jobs(path, jobs, [], None, SourceDirs(file_dir=path.parent))
    try:
        return [str(f) for f in result.findings], result
    finally:
        result.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_log_without_a_duplicate_verifies_clean(tmp_path, jobs):
    path = tmp_path / "events.avro"
    _write(path, _interleaved(_runs()))
    findings, result = _findings(path, jobs)
    assert findings == [] and result.runs == 4


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_event_duplicated_inside_its_run_is_named(tmp_path, jobs):
    runs = _runs()
    runs[1].insert(4, runs[1][3])  # seq 3 written twice in a row, byte for byte
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    findings, result = _findings(path, jobs)
    assert findings == [f"run run-01 seq 3: duplicated event: the log holds this {runs[1][3].kind} "
                        "(same run, seq and content) twice"]
    assert result.run_sets["rs"].fenced == [("run-01", 3, runs[1][3].kind)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_end_duplicated_after_the_end_is_named(tmp_path, jobs):
    runs = _runs()
    end = next(e for e in runs[2] if e.kind == "RunEnded")
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs) + [end])  # appended after every run ended: fenced by the heads on disk
    findings, _ = _findings(path, jobs)
    assert findings == [f"run run-02 seq {end.seq}: duplicated event: the log holds this RunEnded "
                        "(same run, seq and content) twice"]


def test_other_fenced_events_of_a_log_file_are_findings_too(tmp_path):
    """Not a duplicate, still impossible in a log file: a second event at a held seq with other
    content (its hash recomputed, so it seals its own bytes), and an old event re-appended after the
    run's end."""
    runs = _runs()
    other = dataclasses.replace(runs[0][2], event_id="00000000-0000-4000-8000-000000000000")
    from membench.schemas.chain import seal
    other, _ = seal(SCHEMA, other)
    runs[0].insert(3, other)
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs) + [runs[3][1]])
    findings, _ = _findings(path, 1)
    assert any(f.startswith("run run-00 seq 2: fenced") and "other content" in f for f in findings), findings
    assert any(f.startswith("run run-03 seq 1: fenced") and "after its run's RunEnded" in f for f in findings), findings
    assert not any("duplicated event" in f for f in findings)


def test_an_edited_copy_with_the_stored_hash_is_not_called_a_duplicate(tmp_path):
    """Same run, seq and hash field but other bytes: the hash does not seal them, so it is no
    duplicate (still a finding)."""
    runs = _runs()
    copy = runs[1][3]
    edited = dataclasses.replace(copy, event_id="00000000-0000-4000-8000-00000000beef")  # hash left as is
    runs[1].insert(4, edited)
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    findings, _ = _findings(path, 1)
    assert len(findings) == 1 and "other content" in findings[0] and "run run-01 seq 3" in findings[0]


def test_control_the_same_duplicate_from_a_non_file_source_is_only_fenced(tmp_path):
    """What the file rule adds: read as a topic would be (a redelivery is legitimate there), the
    duplicate is fenced and no finding: the pre-fix behaviour."""
    runs = _runs()
    runs[1].insert(4, runs[1][3])
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    found: list = []
    result = replay(events_from_file(path, found), found)
    try:
        assert found == [] and result.run_sets["rs"].fenced == [("run-01", 3, runs[1][3].kind)]
    finally:
        result.close()


def test_the_cli_exits_1_naming_the_duplicate(tmp_path):
    import json
    import subprocess
    import sys

    from tests.audit.test_replay_jobs import _env

    runs = _runs()
    runs[1].insert(4, runs[1][3])
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    for jobs in ("1", "2"):
        proc = subprocess.run([sys.executable, "-m", "membench", "replay", str(path), "--json", "--jobs", jobs],
                              capture_output=True, text=True, env=_env(tmp_path))
        assert proc.returncode == 1, proc.stderr
        assert [(f["run_id"], f["seq"]) for f in json.loads(proc.stdout)["findings"]] == [("run-01", 3)]


def test_a_duplicate_after_a_gap_in_its_run_is_still_named(tmp_path):
    """The held hashes are keyed by seq, not position: after a dropped event the chain's later
    events keep their seqs, and a repeat of one of them is still a proven duplicate."""
    runs = _runs()
    del runs[2][2]  # seq 2 dropped: a chain break
    runs[2].insert(5, runs[2][4])  # seq 5 (now at index 4) written twice
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    findings, _ = _findings(path, 1)
    assert "run run-02 seq 3: expected seq 2, found seq 3 (missing or reordered events)" in findings
    assert f"run run-02 seq 5: duplicated event: the log holds this {runs[2][4].kind} (same run, seq and content) " \
           "twice" in findings, findings
