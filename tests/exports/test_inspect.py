"""The Inspect AI mapping on constructed runs: written with inspect_ai's writer, read back with its
reader and its dataframes (`samples_df`, `evals_df`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.analysis import evals_df, samples_df  # noqa: E402
from inspect_ai.event import ErrorEvent, ModelEvent, ScoreEvent, ToolEvent  # noqa: E402
from inspect_ai.log import list_eval_logs, read_eval_log  # noqa: E402

from tests.warehouse.row_fixtures import typed_row  # noqa: E402
from membench.exports.inspect_log import RawEvent, RunSetData, build_logs, log_file_name, seed_epochs, write_logs  # noqa: E402

RUN_SET = "rs-test"
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds


def _bt(text: str, truncated: bool = False) -> dict[str, Any]:
    return {"text": text, "sha256": "0" * 64, "length": len(text) + (100 if truncated else 0), "truncated": truncated}


class _Run:
    """Builds one run's events, session rows and derived rows the way the warehouse holds them."""

    def __init__(self, task: str, condition: str, seed: int, model: str | None = None, status: str = "completed",
                 excluded: str | None = None):
        self.task, self.condition, self.seed = task, condition, seed
        self.unit_id = f"suite1/{task}/{condition}/{seed}"
        self.run_id = f"run-{task}-{condition}-{seed}"
        self.events: list[RawEvent] = []
        self.sessions: list[dict[str, Any]] = []
        self.failures: list[dict[str, Any]] = []
        self.contracts: list[dict[str, Any]] = []
        self.hygiene: list[dict[str, Any]] = []
        self.status, self.excluded = status, excluded
        self.emit("RunStarted", -1, {"suite": "suite1", "task": task, "condition": condition, "seed": seed,
                                     "agent": "scripted:test", "agent_kind": "scripted", "model": model,
                                     "attempt": 1, "construct": "C1", "family": "decision"}, "harness")

    def emit(self, kind: str, session: int, payload: dict[str, Any], visibility: str = "agent") -> None:
        seq = len(self.events)
        self.events.append(RawEvent(self.run_id, seq, T0 + seq * 1000, session, kind, visibility,
                                    f"{self.run_id}-e{seq}", payload))

    def key(self) -> dict[str, Any]:
        return {"run_set": RUN_SET, "run_id": self.run_id, "unit_id": self.unit_id, "suite": "suite1",
                "task": self.task, "condition": self.condition, "seed": self.seed, "agent": "scripted:test"}

    def session(self, index: int, scored: bool, outcome: str | None, tools: int = 1, memory: list[str] = (),
                cite: bool = False, failure: str | None = None) -> None:
        self.emit("SessionStarted", index, {"session_index": index, "instruction": _bt(f"instruction {index}"),
                                            "start_state": "continuation", "workspace_digest": "d", "scored": scored,
                                            "oracle_id": f"oracle{index}"})
        self.emit("Turn", index, {"role": "user", "text": _bt(f"instruction {index}"), "source_kind": "instruction",
                                  "source_event_id": None, "input_tokens": 0, "cached_tokens": 0,
                                  "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})
        self.emit("MemoryRead", index, {"query": _bt("q"), "candidates": list(memory), "admitted_ids": list(memory),
                                        "tokens_admitted": 5 * len(memory), "token_budget": 100,
                                        "context": _bt(" ".join(f"[{m}] remembered" for m in memory))})
        self.emit("Turn", index, {"role": "agent", "text": _bt("I will edit the file."), "source_kind": None,
                                  "source_event_id": None, "input_tokens": 10, "cached_tokens": 0,
                                  "output_tokens": 5, "reasoning_tokens": 0, "latency_ms": 3})
        for n in range(tools):
            call_id = f"call-{index}-{n}"
            self.emit("ToolCall", index, {"call_id": call_id, "name": "shell", "arguments_digest": "a" * 64,
                                          "is_patch": False})
            self.emit("ToolResult", index, {"call_id": call_id, "name": "shell", "exit_code": n % 2,
                                            "duration_ms": 20, "output_size": 3, "is_patch": False,
                                            "output": _bt(f"out{n}")})
        self.emit("ModelCall", index, {"call_id": f"m{index}", "provider": "openai", "api": "chat", "model": "gpt-x",
                                       "mode": "live", "status": "ok", "http_status": 200, "request_digest": "r",
                                       "match_digest": "m", "response_digest": "s", "recorded": False,
                                       "streamed": False, "chunks": 0, "input_tokens": 7, "cached_tokens": 0,
                                       "output_tokens": 3, "reasoning_tokens": 0, "latency_ms": 40,
                                       "first_byte_ms": 10, "cost_usd": 0.001, "price": None, "error": None})
        if cite:
            self.emit("MemoryCitation", index, {"memory_ids": list(memory)})
        if outcome is not None:
            self.emit("OracleVerdict", index, {"oracle_id": f"oracle{index}", "outcome": outcome, "cases": [],
                                               "exit_status": 0, "inconclusive": False, "duration_ms": 5,
                                               "isolation": "process"}, "harness")
        self.emit("SessionEnded", index, {"session_index": index, "status": "completed"})
        excluded = outcome == "isolation_unavailable"
        self.sessions.append({**self.key(), "session_index": index, "scored": scored, "passed": outcome == "pass",
                              "outcome": outcome or "no_verdict", "oracle_id": f"oracle{index}",
                              "excluded": excluded, "exclusion_reason": outcome if excluded else None,
                              "tool_calls": tools, "memory_reads": 1, "duration_ms": 9})
        self.failures.append({**self.key(), "session_index": index, "scored": scored, "resolved": outcome == "pass",
                              "excluded": excluded, "failure_reason": failure, "rule": "r1" if failure else None,
                              "memory_failure": False, "oracle_outcome": outcome or "no_verdict"})
        self.contracts.append({**self.key(), "session_index": index, "scored": scored,
                               "memory_contract_status": "passed" if memory else "not_applicable",
                               "injected_memory_ids": list(memory), "cited_memory_ids": list(memory) if cite else [],
                               "relevant_memory_ids": [], "stale_memory_ids": [], "citation_precision": None,
                               "citation_recall": None, "memory_helped": bool(cite), "memory_hurt": False})
        self.hygiene.append({**self.key(), "session_index": index, "scored": scored, "construct": "C1",
                             "family": "decision", "metric": "irrelevant_import", "label_id": None,
                             "numerator": 0, "denominator": 1})

    def end(self) -> None:
        self.emit("RunEnded", -1, {"status": self.status,
                                   "error_type": self.excluded if self.status != "completed" else None}, "harness")

    def row(self) -> dict[str, Any]:
        scored = next((s for s in self.sessions if s["scored"]), None)
        excluded = self.excluded or (scored["exclusion_reason"] if scored else None)
        return {**self.key(), "status": self.status, "error_type": self.excluded, "sessions": len(self.sessions),
                "scored_passed": bool(scored and scored["passed"]) and not excluded, "excluded": bool(excluded),
                "exclusion_reason": excluded, "source_seq": len(self.events) - 1, "input_tokens": 30,
                "cached_tokens": 0, "output_tokens": 15, "reasoning_tokens": 0}


def _data(runs: list[_Run]) -> RunSetData:
    return RunSetData(run_set=RUN_SET, runs=[typed_row("run_results", **r.row()) for r in runs],
                      sessions=[typed_row("session_results", **s) for r in runs for s in r.sessions], failures=[f for r in runs for f in r.failures],
                      contracts=[c for r in runs for c in r.contracts], hygiene=[h for r in runs for h in r.hygiene],
                      events={r.run_id: r.events for r in runs})


def _grid() -> list[_Run]:
    runs = []
    for condition in ("B0", "B5"):
        for seed in (7, 3):
            for task in ("t-alpha", "t-beta"):
                run = _Run(task, condition, seed, model="gpt-x" if task == "t-alpha" else None)
                memory = [f"{condition}:{task}-e1"] if condition == "B5" else []
                run.session(1, False, "pass")
                passed = condition == "B5" or seed == 3
                run.session(2, True, "pass" if passed else "fail", tools=2, memory=memory, cite=bool(memory),
                            failure=None if passed else "memory_not_used")
                run.end()
                runs.append(run)
    excluded = _Run("t-gamma", "B5", 7, status="excluded", excluded="isolation_unavailable")
    excluded.session(1, True, "isolation_unavailable", tools=0)
    excluded.end()
    runs.append(excluded)
    return runs


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[_Run], Path, list[Path]]:
    runs = _grid()
    out = tmp_path_factory.mktemp("inspect")
    return runs, out, write_logs(build_logs(_data(runs)), out)


def test_seeds_map_to_epochs_in_ascending_order():
    assert seed_epochs([typed_row("run_results", seed=s) for s in (7, 3, 11, 3)]) == {3: 1, 7: 2, 11: 3}


def test_one_log_per_suite_and_condition_named_as_inspect_names_logs(written):
    _, out, paths = written
    assert len(paths) == 2
    infos = list_eval_logs(str(out))
    assert sorted(i.task for i in infos) == ["suite1-B0", "suite1-B5"]
    for path in paths:
        log = read_eval_log(str(path))
        assert path.name == log_file_name(log)
        assert log.status == "success"
        assert log.eval.config.epochs == 2
        assert log.eval.metadata["epochs"] == {"1": 3, "2": 7}
        assert log.eval.task_args["suite"] == "suite1"


def test_samples_scores_and_errors_match_the_runs(written):
    runs, out, _ = written
    by_key = {(r.condition, r.task, r.seed): r for r in runs}
    df = samples_df(str(out))
    assert len(df) == len(runs)
    for _, row in df.iterrows():
        run = by_key[(row["metadata_condition"], row["id"], int(row["metadata_seed"]))]
        assert row["epoch"] == {3: 1, 7: 2}[run.seed]
        assert row["metadata_unit_id"] == run.unit_id and row["metadata_run_id"] == run.run_id
        scored = next(s for s in run.sessions if s["scored"])
        if run.excluded:
            assert "isolation_unavailable" in row["error"]
            assert pd.isna(row["score_oracle"])
        else:
            assert row["score_oracle"] == ("C" if scored["passed"] else "I")
            assert not row["error"]


def test_sample_content(written):
    runs, _, paths = written
    log = read_eval_log(str(next(p for p in paths if "B5" in p.name)))
    assert log.results.total_samples == 5 and log.results.completed_samples == 4
    assert log.results.scores[0].metrics["accuracy"].value == 1.0
    assert log.results.metadata["excluded"] == {"isolation_unavailable": 1}
    sample = next(s for s in log.samples if s.id == "t-alpha" and s.epoch == 2)
    run = next(r for r in runs if r.run_id == sample.metadata["run_id"])
    # messages: both instructions, the memory context, agent turns, tool calls and their results
    texts = [m.text for m in sample.messages]
    assert "instruction 1" in texts and "instruction 2" in texts
    assert any("[B5:t-alpha-e1]" in t for t in texts)
    calls = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
    tool_calls = [e for e in run.events if e.kind == "ToolCall"]
    assert [c.id for c in calls] == [e.payload["call_id"] for e in tool_calls]
    tool_messages = [m for m in sample.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == [c.id for c in calls]
    assert [m.tool_call_id for m in tool_messages if m.error is not None] == ["call-2-1"]  # exit code 1
    assert sample.input == "instruction 2" and sample.target == "oracle2"
    # transcript events
    assert len([e for e in sample.events if isinstance(e, ToolEvent)]) == len(tool_calls)
    assert len([e for e in sample.events if isinstance(e, ModelEvent)]) == 2
    assert [e.score.value for e in sample.events if isinstance(e, ScoreEvent)] == ["C"]
    # metadata: memory ids, hygiene, model from RunStarted
    assert sample.metadata["memory_injected_ids"] == ["B5:t-alpha-e1"]
    assert sample.metadata["memory_cited_ids"] == ["B5:t-alpha-e1"]
    assert len(sample.metadata["hygiene_observations"]) == 2
    assert sample.output.model == "gpt-x"
    beta = next(s for s in log.samples if s.id == "t-beta")
    assert beta.output.model == "scripted:test"  # no model: the agent's name
    errored = next(s for s in log.samples if s.id == "t-gamma")
    assert errored.scores is None and "isolation_unavailable" in errored.error.message
    assert any(isinstance(e, ErrorEvent) for e in errored.events)


def test_failure_reason_is_the_explanation(written):
    _, _, paths = written
    log = read_eval_log(str(next(p for p in paths if "B0" in p.name)))
    failed = [s for s in log.samples if s.scores["oracle"].value == "I"]
    assert failed and all(s.scores["oracle"].explanation == "memory_not_used (rule: r1)" for s in failed)
    assert log.results.scores[0].metrics["accuracy"].value == 0.5


def test_evals_df_reads_the_directory(written):
    _, out, _ = written
    df = evals_df(str(out))
    assert sorted(df["task_name"]) == ["suite1-B0", "suite1-B5"]
    assert sorted(df["score_oracle_accuracy"]) == [0.5, 1.0]


def test_truncated_text_is_marked(tmp_path: Path):
    run = _Run("t-long", "B0", 1)
    run.session(1, True, "pass", tools=0)
    run.events[2] = RawEvent(run.run_id, 2, T0 + 2000, 1, "Turn", "agent", "long",
                             {"role": "user", "text": _bt("cut here", truncated=True), "source_kind": "instruction"})
    run.end()
    log = build_logs(_data([run]))[0]
    message = next(m for m in log.samples[0].messages if m.id == "long")
    assert message.metadata["truncated"] is True


def test_a_log_whose_units_all_errored_has_no_metric(tmp_path: Path):
    run = _Run("t-x", "B2", 1, status="error", excluded="task_exception:RuntimeError")
    run.session(1, True, None, tools=0)
    run.end()
    [path] = write_logs(build_logs(_data([run])), tmp_path)
    log = read_eval_log(str(path))
    assert log.results.completed_samples == 0 and log.results.scores[0].metrics == {}
    assert "task_exception:RuntimeError" in log.samples[0].error.message
    assert len(samples_df(str(tmp_path))) == 1 and len(evals_df(str(tmp_path))) == 1
