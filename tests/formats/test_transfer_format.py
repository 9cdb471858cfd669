"""The transfer study format: the built-in study loads and is what its authoring tool writes; a
malformed study is refused with the file and the field named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.formats.transfer_format import TransferFormatError, load_study

STUDY = Path(__file__).parents[2] / "fixtures" / "transfer-v1"


def test_built_in_study_has_the_promised_shape():
    study = load_study(STUDY)
    assert study.name == "transfer-v1" and len(study.learning) >= 6 and len(study.projects) == 2
    for project in study.projects:
        ev = project.evaluator
        assert len(ev.cases) >= 40 and {d.dimension for d in ev.dimensions} == set("ABCDE")
        assert {c.dimension for c in ev.cases} == set("ABCDE") and ev.hard_caps
        assert project.scenario.plan and (project.workspace / "README.md").is_file()
    assert study.conditions == ("no_memory", "learned_bank", "native_bank", "ablated_bank")


def test_built_in_study_is_what_the_authoring_tool_writes(tmp_path):
    from tools.author_transfer_v1 import author

    author(tmp_path / "out")
    written = {p.relative_to(tmp_path / "out").as_posix(): p.read_bytes()
               for p in (tmp_path / "out").rglob("*") if p.is_file()}
    shipped = {p.relative_to(STUDY).as_posix(): p.read_bytes() for p in STUDY.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert written == shipped


def _broken(tmp_path: Path, rel: str, edit) -> Path:
    root = tmp_path / "study"
    shutil.copytree(STUDY, root)
    path = root / rel
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return root


@pytest.mark.parametrize("rel, edit, fragment", [
    ("study.json", lambda d: d.update(format="other/1"), "study.json: field 'format'"),
    ("study.json", lambda d: d["learning"][2].pop("oracle"), "study.json: field 'learning[2].oracle' is missing"),
    ("study.json", lambda d: d["projects"][0].update(workspace="../x"), "field 'projects[0].workspace'"),
    ("study.json", lambda d: d.update(ablate_skill="nope"), "field 'ablate_skill'"),
    ("study.json", lambda d: d.update(conditions=["B0"]), "field 'conditions[0]'"),
    ("hidden/projects/settle/manifest.v2.json", lambda d: d["hardCaps"][0].update(cases=["Q-9"]),
     "manifest.v2.json: field 'hardCaps[0].cases[0]'"),
    ("hidden/projects/settle/manifest.v2.json", lambda d: d["cases"][5].update(id="A-01"),
     "manifest.v2.json: field 'cases[5].id'"),
    ("hidden/projects/settle/manifest.v2.json", lambda d: d["dimensions"].update(a={"weight": 1}),
     "manifest.v2.json: field 'dimensions.a'"),
    ("hidden/projects/jobqueue/cases.json", lambda d: d["cases"].pop("B-02"), "cases.json: 1 of the 41 cases of manifest.v2.json has no executable check: B-02."),
    ("projects/settle/scenario.json", lambda d: d.pop("plan"), "scenario.json: field 'plan' is missing"),
    ("projects/settle/scenario.json", lambda d: d["answers"].append({"match": "(", "reply": "x"}),
     "scenario.json: field 'answers[1].match'"),
])
def test_malformed_study_names_file_and_field(tmp_path, rel, edit, fragment):
    with pytest.raises(TransferFormatError) as info:
        load_study(_broken(tmp_path, rel, edit))
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_the_shared_engrambench_manifests_fit_the_evaluator_form(tmp_path):
    """The published manifests (checkpoints FINAL, PERF, V1) load as evaluators given a check per case."""
    from membench.formats.transfer_format import load_evaluator
    from tests.conftest import SHARED, require_shared

    engram = require_shared(SHARED / "external" / "engrambench")
    for path in sorted(engram.glob("*.manifest.v2.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        checks = tmp_path / f"{path.stem}.cases.json"
        checks.write_text(json.dumps({"module": "m", "cases": {c["id"]: {"call": "f", "expect": 1} for c in raw["cases"]}}))
        ev = load_evaluator(path, checks)
        assert len(ev.cases) == 44 and sum(1 for c in ev.cases if "V1" in c.prerequisites) == 3
        assert {d.dimension for d in ev.dimensions} == set("ABCDE") and ev.hard_caps
