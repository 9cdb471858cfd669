"""SWE-bench prediction records (instance_id, model_name_or_path, model_patch) read by
`load_predictions`: the documented mapping to unit, condition, seed and agent, and refusals that
name file, line and field."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from membench.packs.importers.remem import import_remem
from membench.runner.predictions import PredictionError, load_predictions, pack_baseline
from membench.formats.pack_format import load_pack
from tests.packs.test_remem_import import LATER

KNOWN = ["B0", "B5", "no_memory", "curated_file"]
FIX = "--- a/api/client.py\n+++ b/api/client.py\n@@ -1,2 +1,2 @@\n def endpoint():\n-    return '/v1/items'\n" \
      "+    return '/v2/items'\n"
SWE = {"instance_id": "stale-api", "model_name_or_path": "org/model-7b", "model_patch": FIX}


@pytest.fixture
def pack(tmp_path):
    source = tmp_path / "tasks.json"
    source.write_text(json.dumps(LATER))
    return load_pack(import_remem(source, tmp_path / "pack"))


def lines(tmp_path, *objs):
    path = tmp_path / "preds.jsonl"
    path.write_text("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs) + "\n")
    return path


def test_a_swebench_record_maps_to_unit_baseline_condition_seed_1_and_the_agent(tmp_path, pack):
    (pred,) = load_predictions(lines(tmp_path, {**SWE, "full_output": "ignored"}), pack, KNOWN)
    assert (pred.unit, pred.condition, pred.seed, pred.session) == ("stale-api", "no_memory", 1, 3)
    assert (pred.patch, pred.model, pred.status) == (FIX, "org/model-7b", "completed")


def test_condition_from_the_record_else_the_option_else_the_baseline(tmp_path, pack):
    assert pack_baseline(pack) == "no_memory"  # an imported pack's baseline; a native pack's is B0
    assert pack_baseline(replace(pack, conditions=())) == "B0"
    assert pack_baseline(replace(pack, conditions=("B5", "B0"))) == "B0"
    path = lines(tmp_path, SWE, {**SWE, "condition": "B5"}, {**SWE, "condition": "B5", "seed": 2})
    got = [(p.condition, p.seed) for p in load_predictions(path, pack, KNOWN, default_condition="curated_file")]
    assert got == [("curated_file", 1), ("B5", 1), ("B5", 2)]


def test_a_null_or_empty_model_patch_is_an_empty_patch(tmp_path, pack):
    path = lines(tmp_path, {**SWE, "model_patch": None}, {**SWE, "model_patch": "", "seed": 2})
    assert [p.patch for p in load_predictions(path, pack, KNOWN)] == ["", ""]


def _escaped(text: str) -> str:
    return re.escape(text)


@pytest.mark.parametrize("bad,message", [
    ({**SWE, "instance_id": "nope"}, "preds.jsonl:1: field 'instance_id' names unknown task 'nope'"),
    ({k: v for k, v in SWE.items() if k != "model_patch"}, "preds.jsonl:1: missing required field 'model_patch'"),
    ({k: v for k, v in SWE.items() if k != "model_name_or_path"},
     "preds.jsonl:1: missing required field 'model_name_or_path'"),
    ({**SWE, "model_name_or_path": " "}, "preds.jsonl:1: field 'model_name_or_path' must not be empty"),
    ({**SWE, "model_patch": 3}, "preds.jsonl:1: field 'model_patch' must be str"),
    ({**SWE, "instance_id": 7}, "preds.jsonl:1: field 'instance_id' must be str"),
    ({**SWE, "seed": "1"}, "preds.jsonl:1: field 'seed' must be int"),
    ({**SWE, "condition": "B9"}, "preds.jsonl:1: field 'condition' names unknown condition 'B9'"),
    ({**SWE, "model_patch": "--- a/../x.py\n+++ b/../x.py\n@@ -0,0 +1 @@\n+x\n"},
     "preds.jsonl:1: field 'model_patch': diff line 1: path 'a/../x.py' leaves its directory"),
    ({**SWE, "unit": "stale-api"}, "preds.jsonl:1: fields 'unit' and 'instance_id' are both given"),
])
def test_malformed_swebench_records_name_file_line_and_field(tmp_path, pack, bad, message):
    with pytest.raises(PredictionError, match=_escaped(message)):
        load_predictions(lines(tmp_path, bad), pack, KNOWN)


def test_the_baseline_or_option_must_be_a_known_condition(tmp_path, pack):
    with pytest.raises(PredictionError, match=_escaped("preds.jsonl:1: --condition names unknown condition 'B7'")):
        load_predictions(lines(tmp_path, SWE), pack, KNOWN, default_condition="B7")
    with pytest.raises(PredictionError, match="the pack's baseline condition names unknown condition 'no_memory'"):
        load_predictions(lines(tmp_path, SWE), pack, ["B0"])


def test_one_format_and_one_model_per_file(tmp_path, pack):
    native = {"unit": "stale-api", "condition": "B5", "seed": 1, "patch": ""}
    with pytest.raises(PredictionError, match=_escaped("preds.jsonl:2: a native (unit, condition, seed, patch) "
                                                       "record, but line 1 is a SWE-bench")):
        load_predictions(lines(tmp_path, SWE, native), pack, KNOWN)
    with pytest.raises(PredictionError, match=_escaped("preds.jsonl:2: field 'model_name_or_path' is 'other', but "
                                                       "line 1 names 'org/model-7b'")):
        load_predictions(lines(tmp_path, SWE, {**SWE, "model_name_or_path": "other", "seed": 2}), pack, KNOWN)


def test_a_second_record_for_the_same_instance_condition_and_seed_is_refused(tmp_path, pack):
    with pytest.raises(PredictionError, match=_escaped("preds.jsonl:2: a second prediction for unit 'stale-api', "
                                                       "condition 'no_memory', seed 1")):
        load_predictions(lines(tmp_path, SWE, SWE), pack, KNOWN)


def test_native_records_are_unchanged(tmp_path, pack):
    (pred,) = load_predictions(lines(tmp_path, {"unit": "stale-api", "condition": "B5", "seed": 4, "patch": FIX}),
                               pack, KNOWN, default_condition="B0")
    assert (pred.unit, pred.condition, pred.seed, pred.model) == ("stale-api", "B5", 4, "")
