"""`membench score --predictions` with agent CLI transcripts: the fields are checked, transcripts
are parsed before anything runs, their events take the place of the summary turn, and the CLI
refuses a malformed transcript with exit status 2 writing nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.agents.base import AgentTask
from membench.packs.importers.remem import import_remem
from membench.memory_systems.base import MemoryContext
from membench.runner.predictions import PredictionAgent, PredictionError, load_predictions
from membench.formats.pack_format import load_pack
from tests.conftest import REPO, SHARED, require_shared
from tests.packs.test_remem_import import LATER

CLAUDE = REPO / "tests" / "fixtures" / "transcripts" / "claude-slug.stream.jsonl"
BENCH = SHARED / "external" / "remem-coding-bench"
TASKS = {"context-visibility-policy": "remem-context-visibility-policy-1",
         "slug-normalizer-contract": "remem-slug-normalizer-contract-1",
         "ticket-key-memory-convention": "remem-ticket-key-memory-convention-1"}
GOOD = {"unit": "stale-api", "condition": "B5", "seed": 1, "patch": "",
        "transcript": "t/claude.jsonl", "transcript_format": "claude-stream-json"}


@pytest.fixture
def pack(tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    return load_pack(import_remem(source, tmp_path / "pack"))


@pytest.fixture
def folder(tmp_path) -> Path:
    """A predictions folder holding the claude fixture as t/claude.jsonl."""
    root = tmp_path / "preds"
    (root / "t").mkdir(parents=True)
    shutil.copy(CLAUDE, root / "t" / "claude.jsonl")
    return root


def write(folder: Path, *objs) -> Path:
    path = folder / "p.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def test_a_transcript_supplies_citations_status_and_events(folder, pack):
    (pred,) = load_predictions(write(folder, GOOD), pack, ["B5"])
    assert pred.transcript is not None and pred.transcript.tool_calls == 3
    assert pred.cited_memory_ids == ("1", "3") and pred.status == "completed" and pred.usage["input_tokens"] == 0
    assert len(pred.transcript_sha256) == 64
    explicit = {**GOOD, "cited_memory_ids": [], "status": "timeout"}
    (pred,) = load_predictions(write(folder, explicit), pack, ["B5"])
    assert (pred.cited_memory_ids, pred.status) == ((), "timeout")  # an explicit field wins


@pytest.mark.parametrize("change,message", [
    ({"transcript": "/etc/passwd"}, "p.jsonl:1: field 'transcript': path '/etc/passwd' is absolute"),
    ({"transcript": "../claude.jsonl"}, "p.jsonl:1: field 'transcript': path '../claude.jsonl' leaves its directory"),
    ({"transcript": "t/none.jsonl"}, "p.jsonl:1: field 'transcript': "),
    ({"transcript": 3}, "p.jsonl:1: field 'transcript' must be str"),
    ({"transcript_format": None}, "p.jsonl:1: missing required field 'transcript_format'"),
    ({"transcript_format": "aider"}, "p.jsonl:1: field 'transcript_format' must be one of codex-exec-json, "
                                     "claude-stream-json, got 'aider'"),
    ({"transcript": None}, "p.jsonl:1: field 'transcript_format' is given without 'transcript'"),
    ({"usage": {"input_tokens": 5}}, "p.jsonl:1: fields 'usage' and 'transcript' are both given"),
])
def test_bad_transcript_fields_are_refused(folder, pack, change, message):
    with pytest.raises(PredictionError) as info:
        load_predictions(write(folder, {**GOOD, **change}), pack, ["B5"])
    assert message in str(info.value)


def test_a_transcript_linked_out_of_the_folder_is_refused(folder, pack, tmp_path):
    shutil.copy(CLAUDE, tmp_path / "outside.jsonl")
    (folder / "t" / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(PredictionError, match="path 't/link.jsonl' leaves the predictions file's directory"):
        load_predictions(write(folder, {**GOOD, "transcript": "t/link.jsonl"}), pack, ["B5"])


def test_a_malformed_transcript_line_names_both_files_and_lines(folder, pack):
    lines = CLAUDE.read_text().splitlines()
    lines[4] = "{oops"
    (folder / "t" / "claude.jsonl").write_text("\n".join(lines) + "\n")
    path = write(folder, {**GOOD, "unit": "stale-api"})
    with pytest.raises(PredictionError) as info:
        load_predictions(path, pack, ["B5"])
    assert str(info.value) == (f"{path}:1: field 'transcript': {folder / 't' / 'claude.jsonl'}:5: "
                               "not valid JSON (Expecting property name enclosed in double quotes)")


class Recorder:
    session_index = 3

    def __init__(self):
        self.events = []

    def emit(self, kind, payload, visibility="agent"):
        self.events.append((kind, payload, visibility))

    emit_any = emit  # RunEmitter's untyped form, for a kind read from a transcript


def test_the_agent_records_the_transcript_in_place_of_the_summary_turn(folder, pack, tmp_path):
    (pred,) = load_predictions(write(folder, GOOD), pack, ["B5"])
    recorder = Recorder()
    agent = PredictionAgent("predictions:x", {3: pred})
    outcome = agent.act(AgentTask("do it", tmp_path, MemoryContext((), (), 100), solution=None), recorder)
    assert (outcome.status, outcome.cited_ids) == ("completed", ["1", "3"])
    expected = [e for e in pred.transcript.events if e.kind != "MemoryCitation"]
    assert [k for k, _, _ in recorder.events] == [e.kind for e in expected] + ["MemoryCitation"]
    assert recorder.events[-1][1] == {"memory_ids": ["1", "3"]}
    turns = [p for k, p, _ in recorder.events if k == "Turn"]
    assert sum(t["input_tokens"] for t in turns) == pred.transcript.input_tokens
    assert all(not t["text"]["text"].startswith("Prediction applied") for t in turns)
    call_ids = {p["call_id"] for k, p, _ in recorder.events if k in ("ToolCall", "ToolResult")}
    assert call_ids == {"t3-toolu_01R", "t3-toolu_02E", "t3-toolu_03B"}  # unique within the run


def test_score_refuses_a_malformed_transcript_with_exit_2_and_writes_nothing(cli, cli_inproc, home, tmp_path, folder):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    cli("import", "remem", str(source), str(tmp_path / "pack"), check=True)
    transcript = folder / "t" / "claude.jsonl"
    transcript.write_text(transcript.read_text() + "not json at all\n")
    path = write(folder, GOOD)
    proc = cli_inproc("score", str(tmp_path / "pack"), "--predictions", str(path))
    assert proc.returncode == 2, proc.stderr
    assert f"field 'transcript': {transcript}:13: not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
    assert not (home / "warehouse").exists() and not (home / "runs").exists()


@pytest.mark.integration
def test_score_records_codex_transcripts_end_to_end(cli, home, tmp_path, bwrap_sandbox):
    sample = require_shared(BENCH / "tasks-v1-5tasks.json")
    pack = tmp_path / "pack"
    cli("import", "remem", str(sample), str(pack), check=True)
    root = tmp_path / "preds"
    (root / "transcripts").mkdir(parents=True)
    predictions, expected = [], {}
    for task, stem in TASKS.items():
        source = require_shared(BENCH / "transcripts" / f"{stem}.codex.jsonl")
        shutil.copy(source, root / "transcripts" / source.name)  # beside the predictions file, in tmp only
        raw = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
        usage = [d["usage"] for d in raw if d["type"] == "turn.completed"]
        items = {d["item"]["id"]: d["item"]["type"] for d in raw if d["type"].startswith("item.")}
        calls = sum(1 for t in items.values() if t in ("command_execution", "file_change"))
        expected[task] = [calls + 1,  # + membench's own apply_patch of the final diff
                          sum(u["input_tokens"] for u in usage), sum(u["cached_input_tokens"] for u in usage),
                          sum(u["output_tokens"] for u in usage), sum(u.get("reasoning_output_tokens", 0) for u in usage)]
        predictions.append({"unit": task, "condition": "B5", "seed": 1,
                            "patch": (BENCH / "transcripts" / f"{stem}.final.diff").read_text(encoding="utf-8"),
                            "transcript": f"transcripts/{source.name}", "transcript_format": "codex-exec-json"})
    path = write(root, *predictions)
    cli("score", str(pack), "--predictions", str(path), "--run-set", "codex", check=True)

    rows = cli("sql", "SELECT task, tool_calls, input_tokens, cached_tokens, output_tokens, reasoning_tokens "
                      "FROM session_results WHERE run_set = 'codex' AND scored ORDER BY task", check=True).stdout
    got = {line.split("\t")[0]: [int(x) for x in line.split("\t")[1:]] for line in rows.strip().splitlines()}
    assert got == expected, (got, expected)
    cited = cli("sql", "SELECT DISTINCT JSONExtractRaw(payload, 'memory_ids') FROM trajectory_events "
                       "WHERE run_set = 'codex' AND kind = 'MemoryCitation'", check=True).stdout.split()
    assert cited == ['["1"]']
    passed = cli("sql", "SELECT count() FROM session_results WHERE run_set = 'codex' AND scored AND passed",
                 check=True).stdout.strip()
    assert passed == "3"
