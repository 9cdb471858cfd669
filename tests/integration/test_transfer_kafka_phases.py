"""`membench transfer --bus kafka://… --phase transfer` on the real broker, as runners on other machines
(separate MEMBENCH_HOMEs): the frozen digests come from the learning run's `SkillBankFrozen` events on
the trajectory topic, the banks from the runner's `runs/<run set>/banks/`. With the learning
machine's banks copied over, the bank conditions run against the recorded digests; a tampered copy
and a missing one exclude their units (`skill_bank_modified`, with the reason)."""

from __future__ import annotations

import shutil

import pytest

from membench.bus.kafka import read_run_events, read_unit_status
from membench.bus.topics import topics_from_dsn
from tests.conftest import run_cli
from tests.integration.kafka_helpers import SINGLE, namespace, require_broker

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _ended(topics, run_set, condition):
    """(RunStarted, RunEnded, harness system turns) of the condition's transfer units, from the topic."""
    status = read_unit_status(topics, run_set)
    runs = {v["run_id"] for k, v in status.items() if f"/{condition}/" in k and v["status"] == "completed"}
    assert len(runs) == 2  # settle and jobqueue
    events = read_run_events(topics, runs, {"RunStarted", "RunEnded", "Turn"})
    started = [e.payload for e in events if e.kind == "RunStarted"]
    ended = [e.payload for e in events if e.kind == "RunEnded"]
    said = [e.payload["text"]["text"] for e in events if e.kind == "Turn" and e.payload["role"] == "system"]
    return started, ended, said


def test_phase_transfer_on_kafka_reads_digests_from_the_topic_and_banks_from_the_runner(tmp_path, bwrap_sandbox):
    require_broker()
    ns = namespace()
    dsn = f"kafka://{SINGLE}/{ns}"
    topics = topics_from_dsn(dsn)
    run_set = f"xfer-{ns}"
    common = ("transfer", "transfer-v1", "--agent", "scripted:memory-literal", "--bus", dsn, "--run-set", run_set)
    learner = tmp_path / "learner"
    run_cli(*common, "--phase", "learning", home=learner, check=True)
    status = read_unit_status(topics, run_set)
    (learning,) = [v for k, v in status.items() if k.startswith("transfer-v1/learning/")]
    frozen = {e.payload["bank"]: e.payload for e in read_run_events(topics, {learning["run_id"]}, {"SkillBankFrozen"})}
    assert set(frozen) == {"learned", "ablated", "native"} and frozen["learned"]["distiller"] == "scripted"
    banks = learner / "runs" / run_set / "banks"

    # another machine with the learning machine's banks: runs against the recorded digests
    good = tmp_path / "good"
    shutil.copytree(banks, good / "runs" / run_set / "banks")
    run_cli(*common, "--phase", "transfer", "--conditions", "learned_bank", home=good, check=True)
    started, ended, _ = _ended(topics, run_set, "learned_bank")
    assert [s["skill_bank_digest"] for s in started] == [frozen["learned"]["digest"]] * 2
    assert [e["status"] for e in ended] == ["completed", "completed"]

    # a tampered copy excludes, naming the file
    tampered = tmp_path / "tampered"
    shutil.copytree(banks, tampered / "runs" / run_set / "banks")
    skill = next((tampered / "runs" / run_set / "banks" / "s1" / "native").glob("*/SKILL.md"))
    skill.chmod(0o644)
    skill.write_text("edited on the other machine\n")
    run_cli(*common, "--phase", "transfer", "--conditions", "native_bank", home=tampered, check=True)
    _, ended, said = _ended(topics, run_set, "native_bank")
    assert [e["error_type"] for e in ended] == ["skill_bank_modified"] * 2
    assert all(skill.parent.name in t for t in said)

    # no banks at all: excluded, saying where the banks must be
    bare = tmp_path / "bare"
    bare.mkdir()
    run_cli(*common, "--phase", "transfer", "--conditions", "ablated_bank", home=bare, check=True)
    _, ended, said = _ended(topics, run_set, "ablated_bank")
    assert [e["error_type"] for e in ended] == ["skill_bank_modified"] * 2
    assert all("no such bank directory" in t and "runs/<run set>/banks/" in t for t in said)
