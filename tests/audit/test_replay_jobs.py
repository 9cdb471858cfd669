"""`membench replay --jobs N`: the runs of a log file split over worker processes give
the same result as one process — findings, heads, log roots, counts, warehouse comparison — on an
intact log and on a tampered one; and transfer runs' skill-bank digests are re-checked.
Real log files written by the embedded pipeline and a real chDB warehouse."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from membench.audit.checks import SourceDirs
from membench.audit.file_source import events_from_file
from membench.audit.parallel_replay import replay_file_jobs
from membench.audit.replayer import replay
from membench.bus.file import FileBus
from membench.bus.emitter import RunEmitter
from membench.memory_systems.skill_bank import MANIFEST, write_manifest
from membench.schemas.codec import encode_datum
from membench.schemas.registry import default_registry
from tests.audit.test_log_root import rechain
from tests.processors.test_verdicts import build_run

SCHEMA = default_registry().latest("event")


def _interleaved(runs):
    """Events of many runs in the order concurrent units write them: round robin."""
    out, index = [], 0
    while any(index < len(r) for r in runs):
        out.extend(r[index] for r in runs if index < len(r))
        index += 1
    return out


def _write(path, events):
    """The events as they are (an edited one keeps its stale hash)."""
    bus = FileBus(path)
    for event in events:
        bus.publish(event, encode_datum(SCHEMA, event.to_record()))
    bus.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Twelve runs of two run sets through the embedded pipeline (log + chDB), interleaved."""
    from membench.pipeline.embedded import EmbeddedPipeline
    from membench.warehouse.client import connect

    root = tmp_path_factory.mktemp("replay-jobs")
    runs = [build_run(("pass", "fail") if i % 2 else ("fail", "pass", "pass"), run_id=f"run-{i:02d}")
            for i in range(12)]
    runs = [rechain(r, run_set="rs-b") if i % 3 == 0 else r for i, r in enumerate(runs)]
    warehouse = connect(f"chdb://{root / 'wh'}")
    pipeline = EmbeddedPipeline(root / "events.avro", warehouse)
    for event in _interleaved(runs):
        pipeline.publish(event, encode_datum(SCHEMA, event.to_record()))
    pipeline.close()
    yield {"root": root, "runs": runs, "warehouse": warehouse}
    warehouse.close()


def _as_json(result):
    return {"events": result.events, "runs": result.runs, "derived": result.derived, "compared": result.compared,
            "diffs_checked": result.diffs_checked, "log_root": result.log_root,
            "run_sets": [s.to_json() for s in result.run_sets.values()],
            "findings": [str(f) for f in result.findings]}


def _both(path, warehouse=None, jobs=2):
    one: list = []
    single = replay(events_from_file(path, one), one, warehouse, SourceDirs(file_dir=path.parent).blobs,
                    SourceDirs(file_dir=path.parent).banks)
    many = replay_file_jobs(path, jobs, [], warehouse, SourceDirs(file_dir=path.parent))
    return _as_json(single), _as_json(many)


def test_jobs_1_and_2_agree_on_an_intact_log_verified_against_the_warehouse(recorded):
    single, many = _both(recorded["root"] / "events.avro", recorded["warehouse"])
    assert single == many
    assert single["findings"] == [] and single["runs"] == 12 and single["compared"] == single["derived"] > 0
    assert [s["run_set"] for s in single["run_sets"]] == ["rs-b", "rs"]  # the order the log meets them in


def test_jobs_1_and_3_agree_on_a_tampered_log(recorded, tmp_path):
    runs = [list(r) for r in recorded["runs"]]
    verdict = next(i for i, e in enumerate(runs[1]) if e.kind == "OracleVerdict")
    edited = runs[1][verdict]
    flipped = "fail" if edited.payload["outcome"] == "pass" else "pass"
    runs[1][verdict] = dataclasses.replace(edited, payload={**edited.payload, "outcome": flipped})  # hash left as is
    del runs[4][3]  # a dropped event
    runs[7] = runs[7][:-1]  # a run cut before its RunEnded
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))
    single, many = _both(path, recorded["warehouse"], jobs=3)
    assert single == many
    text = "\n".join(single["findings"])
    assert "run run-01 seq %d: hash does not match" % verdict in text
    assert "run run-04 seq 4: expected seq 3, found seq 4" in text
    assert "run run-07" in text and "no RunEnded" in text
    assert "SessionVerdict differs from the warehouse" in text
    assert single["log_root"] is None  # two run sets


def test_the_cli_prints_the_same_json_for_any_jobs(recorded, tmp_path):
    runs = [list(r) for r in recorded["runs"]]
    del runs[2][5]
    path = tmp_path / "events.avro"
    _write(path, _interleaved(runs))

    def cli(jobs):
        proc = subprocess.run([sys.executable, "-m", "membench", "replay", str(path), "--json", "--jobs", str(jobs)],
                              capture_output=True, text=True, env=_env(tmp_path))
        assert proc.returncode == 1, proc.stderr
        return json.loads(proc.stdout)

    assert cli(1) == cli(2)
    assert cli(1)["findings"][0]["run_id"] == "run-02"


def test_jobs_need_a_log_file_source(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "membench", "replay", "warehouse:rs", "--jobs", "2"],
                          capture_output=True, text=True, env=_env(tmp_path))
    assert proc.returncode == 2 and "--jobs" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def _env(tmp_path):
    import os

    return {**os.environ, "MEMBENCH_HOME": str(tmp_path / "home")}


# ----------------------------------------------------------------------------- skill-bank digests


def _transfer_runs(bank_digest, used_digest, freeze=True):
    """A learning run that froze bank `learned` with `bank_digest`, and a transfer run of the same
    seed under `learned_bank` whose RunStarted says it used `used_digest`."""
    emitted = []
    start = {"suite": "study", "agent": "scripted:x", "agent_kind": "scripted", "model": None, "budgets": {},
             "code_digest": "c", "pack_digest": "p", "fixture_digest": "f", "attempt": 1, "construct": None,
             "family": "transfer", "seed": 1}
    learning = RunEmitter("rs", "learn-1", "study/learning/learning/1", lambda e, d: emitted.append(e))
    learning.emit("RunStarted", {**start, "task": "learning", "condition": "learning", "skill_bank_digest": None},
                  visibility="harness")
    if freeze:
        learning.emit("SkillBankFrozen", {"bank": "learned", "digest": bank_digest,
                                          "files": [{"path": "a/SKILL.md", "sha256": "0" * 64}],
                                          "ablated_skill": None}, visibility="harness")
    learning.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")
    transfer = RunEmitter("rs", "xfer-1", "study/p1/learned_bank/1", lambda e, d: emitted.append(e))
    transfer.emit("RunStarted", {**start, "task": "p1", "condition": "learned_bank", "skill_bank_digest": used_digest},
                  visibility="harness")
    transfer.emit("RunEnded", {"status": "completed", "error_type": None}, visibility="harness")
    return emitted


def _bank(tmp_path):
    bank = tmp_path / "banks" / "s1" / "learned"
    (bank / "a").mkdir(parents=True)
    (bank / "a" / "SKILL.md").write_text("retry with backoff\n", encoding="utf-8")
    return bank, write_manifest(bank)


def _bank_findings(tmp_path, events, jobs=1):
    path = tmp_path / "events.avro"
    if path.exists():
        path.unlink()
    _write(path, events)
    dirs = SourceDirs(file_dir=tmp_path)
    if jobs == 1:
        findings: list = []
        result = replay(events_from_file(path, findings), findings, None, dirs.blobs, dirs.banks)
    else:
        result = replay_file_jobs(path, jobs, [], None, dirs)
    return [(f.run_id, f.seq, f.reason) for f in result.findings]


def test_a_transfer_run_must_use_the_digest_its_seeds_learning_run_froze(tmp_path):
    bank, digest = _bank(tmp_path)
    assert _bank_findings(tmp_path, _transfer_runs(digest, digest)) == []
    other = "9" * 64
    for jobs in (1, 2):
        found = _bank_findings(tmp_path, _transfer_runs(digest, other), jobs)
        assert [(r, s) for r, s, _ in found] == [("xfer-1", 0)], found
        assert other in found[0][2] and "learned" in found[0][2]


def test_a_bank_directory_must_still_hash_to_the_frozen_digest(tmp_path):
    bank, digest = _bank(tmp_path)
    (bank / MANIFEST).chmod(0o644)
    (bank / MANIFEST).write_text((bank / MANIFEST).read_text() + "\n", encoding="utf-8")  # the manifest edited
    found = _bank_findings(tmp_path, _transfer_runs(digest, digest))
    assert [(r, s) for r, s, _ in found] == [("learn-1", 1)] and "MANIFEST.sha256 hashes to" in found[0][2]


def test_a_bank_file_changed_under_its_manifest_is_a_finding(tmp_path):
    bank, digest = _bank(tmp_path)
    skill = bank / "a" / "SKILL.md"
    skill.chmod(0o644)
    skill.write_text("never retry\n", encoding="utf-8")
    found = _bank_findings(tmp_path, _transfer_runs(digest, digest))
    assert [(r, s) for r, s, _ in found] == [("learn-1", 1)] and "no longer matches its manifest" in found[0][2]


def test_a_transfer_digest_without_any_frozen_bank_is_a_finding(tmp_path):
    found = _bank_findings(tmp_path, _transfer_runs("1" * 64, "1" * 64, freeze=False))
    assert [(r, s) for r, s, _ in found] == [("xfer-1", 0)] and "holds no SkillBankFrozen" in found[0][2]


def test_a_bank_condition_run_without_a_digest_is_no_finding(tmp_path):
    """The runner excludes such a run itself (no bank frozen for its seed: skill_bank_modified)."""
    assert _bank_findings(tmp_path, _transfer_runs("1" * 64, None, freeze=False)) == []
