"""`membench score` input checks and patch application; `membench import remem` refusals (exit 2)."""

from __future__ import annotations

import json

import pytest

from membench.packs.importers.remem import import_remem
from membench.runner.predictions import PredictionError, apply_patch, load_predictions
from membench.formats.pack_format import load_pack
from tests.packs.test_remem_import import LATER


@pytest.fixture
def pack(tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    return load_pack(import_remem(source, tmp_path / "pack"))


def lines(tmp_path, *objs) -> object:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n")
    return path


GOOD = {"unit": "stale-api", "condition": "B5", "seed": 1, "patch": "", "future_field": 1}


def test_valid_lines_load_with_defaults(tmp_path, pack):
    (pred,) = load_predictions(lines(tmp_path, GOOD), pack, ["B5"])
    assert (pred.session, pred.status, pred.cited_memory_ids, pred.usage["input_tokens"]) == (3, "completed", (), 0)


@pytest.mark.parametrize("bad,message", [
    ({**GOOD, "unit": "nope"}, "p.jsonl:1: field 'unit' names unknown task 'nope'"),
    ({k: v for k, v in GOOD.items() if k != "patch"}, "p.jsonl:1: missing required field 'patch'"),
    ({**GOOD, "condition": "B9"}, "p.jsonl:1: field 'condition' names unknown condition 'B9'"),
    ({**GOOD, "seed": "1"}, "p.jsonl:1: field 'seed' must be int"),
    ({**GOOD, "session": 1}, "p.jsonl:1: field 'session' must name a task session"),
    ({**GOOD, "usage": {"input_tokens": -1}}, "p.jsonl:1: field 'usage.input_tokens'"),
    ("{not json", "p.jsonl:1: not valid JSON"),
])
def test_bad_lines_are_refused_naming_line_and_field(tmp_path, pack, bad, message):
    with pytest.raises(PredictionError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_predictions(lines(tmp_path, bad), pack, ["B5"])


def test_duplicate_unit_is_refused(tmp_path, pack):
    with pytest.raises(PredictionError, match="p.jsonl:2: a second prediction"):
        load_predictions(lines(tmp_path, GOOD, GOOD), pack, ["B5"])


def test_apply_patch_inside_the_workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("x = 1\n")
    code, _ = apply_patch("--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n", ws)
    assert code == 0 and (ws / "pkg" / "a.py").read_text() == "x = 2\n"
    code, output = apply_patch("--- a/../evil.py\n+++ b/../evil.py\n@@ -0,0 +1 @@\n+boom\n", ws)
    assert code != 0 and not (tmp_path / "evil.py").exists() and "git apply" in output


def test_import_refuses_a_pack_missing_a_required_field(cli_inproc, tmp_path):
    data = json.loads(json.dumps(LATER))
    del data["tasks"][0]["prompt"]
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(data))
    proc = cli_inproc("import", "remem", str(source), str(tmp_path / "out"))
    assert proc.returncode == 2
    assert "task 'stale-api': missing required field 'prompt'" in proc.stderr


def test_score_refuses_bad_predictions_before_running(cli, cli_inproc, tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    cli("import", "remem", str(source), str(tmp_path / "pack"), check=True)
    proc = cli_inproc("score", str(tmp_path / "pack"), "--predictions", str(lines(tmp_path, {**GOOD, "unit": "nope"})))
    assert proc.returncode == 2 and "field 'unit' names unknown task 'nope'" in proc.stderr
    assert not (tmp_path / "membench-home" / "warehouse").exists()


def imported(cli, tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    cli("import", "remem", str(source), str(tmp_path / "pack"), "--name", "ab-pack", check=True)
    return tmp_path / "pack"


def test_run_refuses_refsol_on_a_pack_without_reference_solutions(cli, cli_inproc, tmp_path):
    # the A/B benchmark publishes no solutions: refsol would change nothing and score 0 silently
    proc = cli_inproc("run", str(imported(cli, tmp_path)), "--agent", "scripted:refsol", "--conditions", "no_memory",
               "--seeds", "1")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "scripted:refsol" in line and "pack 'ab-pack'" in line and "no reference solution" in line
    assert "'stale-api'" in line
    assert not (tmp_path / "membench-home" / "warehouse").exists()


def test_run_refuses_a_source_condition_that_names_no_memory_system(cli, cli_inproc, tmp_path):
    proc = cli_inproc("run", str(imported(cli, tmp_path)), "--conditions", "no_memory,remem", "--seeds", "1")
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "--conditions: 'remem'" in line and "pack 'ab-pack'" in line and "membench score" in line
    assert not (tmp_path / "membench-home" / "warehouse").exists()


def test_score_takes_the_source_benchmarks_conditions_as_labels(pack):
    from membench.commands.score import score_conditions

    known = score_conditions(pack)
    assert {"no_memory", "remem", "curated_file", "B0", "B5"} <= set(known)
    preds = [{**GOOD, "condition": c} for c in ("no_memory", "remem", "curated_file")]
    loaded = load_predictions(lines(pack.root.parent, *preds), pack, known)
    assert [p.condition for p in loaded] == ["no_memory", "remem", "curated_file"]
    with pytest.raises(PredictionError, match="unknown condition 'B9'"):
        load_predictions(lines(pack.root.parent, {**GOOD, "condition": "B9"}), pack, known)
