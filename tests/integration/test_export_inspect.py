"""`membench export inspect` on a real run set (smoke, B0 and B5, two seeds, bubblewrap oracles), read
back with inspect_ai's own reader and dataframes and compared with the warehouse."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import run_cli

pytest.importorskip("inspect_ai")

from inspect_ai.analysis import evals_df, samples_df  # noqa: E402
from inspect_ai.event import ToolEvent  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def exported(tmp_path_factory, smoke_run_set):
    """The session's shared smoke run set (read-only), exported into a directory of this module."""
    out = tmp_path_factory.mktemp("inspect") / "inspect-logs"
    proc = run_cli("export", "inspect", smoke_run_set.run_set, str(out), home=smoke_run_set.home, check=True)
    return smoke_run_set.home, out, proc, smoke_run_set.run_set


def _sql(home, query: str) -> list[list[str]]:
    proc = run_cli("sql", query, home=home, check=True)
    return [line.split("\t") for line in proc.stdout.splitlines() if line]


def _samples(out):
    logs = [read_eval_log(str(path)) for path in sorted(out.glob("*.eval"))]
    return logs, [s for log in logs for s in log.samples]


def test_one_log_per_condition_and_a_sample_per_unit(exported):
    home, out, proc, run_set = exported
    logs, samples = _samples(out)
    assert sorted(log.eval.task for log in logs) == ["smoke-B0", "smoke-B5"]
    assert len(proc.stdout.splitlines()) == 2
    units = _sql(home, f"SELECT DISTINCT unit_id FROM run_results WHERE run_set = '{run_set}' ORDER BY unit_id")
    assert sorted(s.metadata["unit_id"] for s in samples) == [u[0] for u in units]
    assert len(samples) == 12
    for s in samples:  # seeds 1, 2 are epochs 1, 2
        assert s.epoch == s.metadata["seed"] and s.id == s.metadata["task"]
        assert s.output.model == "scripted:memory-literal"


def test_scores_are_the_warehouse_verdicts(exported):
    home, out, _, run_set = exported
    _, samples = _samples(out)
    verdicts = {unit: passed == "true" for unit, passed in _sql(
        home, f"SELECT unit_id, passed FROM session_results WHERE run_set = '{run_set}' AND scored "
              "LIMIT 1 BY run_id")}
    assert {s.metadata["unit_id"]: s.scores["oracle"].value == "C" for s in samples} == verdicts
    assert sum(verdicts.values()) == 6  # memory-literal passes under B5 only
    for s in samples:
        if s.scores["oracle"].value == "I":
            assert s.scores["oracle"].explanation  # the failure reason


def test_messages_hold_instructions_and_every_tool_call(exported):
    home, out, _, run_set = exported
    _, samples = _samples(out)
    instructions: dict[str, list[str]] = {}
    for unit, text in _sql(home, "SELECT unit_id, JSONExtractString(payload, 'instruction', 'text') FROM "
                                 f"trajectory_events WHERE run_set = '{run_set}' AND kind = 'SessionStarted' "
                                 "ORDER BY unit_id, seq LIMIT 1 BY event_id"):
        instructions.setdefault(unit, []).append(text.replace("\\'", "'"))
    tool_calls = Counter(unit for (unit,) in _sql(
        home, f"SELECT unit_id FROM trajectory_events WHERE run_set = '{run_set}' AND kind = 'ToolCall' "
              "LIMIT 1 BY event_id"))
    for s in samples:
        unit = s.metadata["unit_id"]
        user_texts = [m.text for m in s.messages if m.role == "user"]
        assert all(text in user_texts for text in instructions[unit]) and len(instructions[unit]) == 3
        calls = [c for m in s.messages if m.role == "assistant" for c in (m.tool_calls or [])]
        assert len(calls) == tool_calls[unit] == len([e for e in s.events if isinstance(e, ToolEvent)])
        assert len([m for m in s.messages if m.role == "tool"]) == tool_calls[unit]
        if s.metadata["condition"] == "B5":
            assert s.metadata["memory_injected_ids"] and s.metadata["memory_cited_ids"]
            assert s.metadata["hygiene_observations"]


def test_inspect_dataframes_read_the_directory(exported):
    _, out, _, _ = exported
    samples = samples_df(str(out))
    assert len(samples) == 12
    assert Counter(samples["score_oracle"]) == {"C": 6, "I": 6}
    evals = evals_df(str(out))
    assert dict(zip(evals["task_arg_condition"], evals["score_oracle_accuracy"])) == {"B0": 0.0, "B5": 1.0}


def test_export_again_overwrites_the_same_files(exported):
    home, out, _, run_set = exported
    before = sorted(p.name for p in out.glob("*.eval"))
    run_cli("export", "inspect", run_set, str(out), home=home, check=True)
    assert sorted(p.name for p in out.glob("*.eval")) == before


def test_usage_errors(exported, tmp_path):
    home, out, _, run_set = exported
    unknown = run_cli("export", "inspect", "no-such-run-set", str(out), home=home)
    assert unknown.returncode == 2 and "no-such-run-set" in unknown.stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    proc = run_cli("export", "inspect", run_set, str(a_file), home=home)
    assert proc.returncode == 2 and "OUT_DIR" in proc.stderr
