"""EngramBench's published v2 manifests load as published: every key they carry is read or on the
documented list of keys accepted and not read, a misspelt key is still refused with a "did you
mean", and a study whose cases.json lacks checks hears about all of them at once, with what the
mapping file is."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from membench.formats.transfer_format import (
    CASE_IGNORED_KEYS,
    MANIFEST_IGNORED_KEYS,
    TransferFormatError,
    load_evaluator,
    load_study,
)
from tests.conftest import SHARED, require_shared, run_cli

ENGRAM = SHARED / "external" / "engrambench"
REPO = Path(__file__).parents[2]
STUDY = REPO / "fixtures" / "transfer-v1"


def _checks(path: Path, manifest: dict) -> Path:
    path.write_text(json.dumps({"module": "m", "cases": {c["id"]: {"call": "f", "expect": 1}
                                                         for c in manifest["cases"]}}))
    return path


def _with_design_version(tmp_path: Path) -> tuple[Path, dict]:
    """The MeterSettle manifest with the keys other published manifests carry (CapacityLease's
    `designVersion`, PermitForge's `policyRevision` and per-case `blockedAssertions`, the learning
    evaluators' `evaluationScope`, `semanticRevisions` and per-case revision labels, CommerceCommand's
    `PERFORMANCE` prerequisite), everything else as published."""
    raw = json.loads(require_shared(ENGRAM / "metersettle.manifest.v2.json").read_text(encoding="utf-8"))
    raw = {"designVersion": "hidden-test-v2", "policyRevision": "metersettle-review-v1", **raw,
           "evaluationScope": "final-system", "semanticRevisions": [{"caseIds": ["A-01"], "summary": "s"}]}
    raw["cases"][6]["blockedAssertions"] = [{"id": "MS-A07-WIRE", "blockedBy": "SPEC-GAP-01",
                                             "policy": "fail-closed-diagnostic"}]
    raw["cases"][7].update(policyRevision="metersettle-review-v1", evaluationScope="final-system")
    perf = next(c for c in raw["cases"] if any(p.startswith("PERF") for p in c["prerequisites"]))
    perf["prerequisites"] = ["FINAL", "PERFORMANCE"]
    path = tmp_path / "designversion.manifest.v2.json"
    path.write_text(json.dumps(raw, indent=2))
    return path, raw


def test_both_published_manifests_and_one_with_design_version_load_unmodified(tmp_path):
    published = sorted(require_shared(ENGRAM).glob("*.manifest.v2.json"))
    assert len(published) == 2
    derived, _ = _with_design_version(tmp_path)
    for path in [*published, derived]:
        before = path.read_bytes()
        raw = json.loads(before)
        ev = load_evaluator(path, _checks(tmp_path / f"{path.stem}.cases.json", raw))
        assert [c.case_id for c in ev.cases] == [c["id"] for c in raw["cases"]]
        assert path.read_bytes() == before  # read, never rewritten
        # every key the file carries is read or listed as accepted and not read
        unread = {k for k in raw if k in MANIFEST_IGNORED_KEYS}
        assert set(ev.ignored_keys) >= unread
    ev = load_evaluator(derived, tmp_path / "designversion.manifest.v2.cases.json")
    assert {"designVersion", "policyRevision", "evaluationScope", "semanticRevisions", "cases[].blockedAssertions",
            "cases[].policyRevision", "cases[].evaluationScope"} <= set(ev.ignored_keys)
    assert any(c.prerequisites == ("FINAL", "PERFORMANCE") for c in ev.cases)


@pytest.mark.parametrize("edit, key, near", [
    (lambda d: d.update(designVersoin=d.pop("designVersion")), "designVersoin", "designVersion"),
    (lambda d: d["cases"][6].update(blockedAssertion=d["cases"][6].pop("blockedAssertions")),
     "cases[6].blockedAssertion", "blockedAssertions"),
])
def test_a_misspelt_key_is_still_refused_naming_file_and_key(tmp_path, edit, key, near):
    path, raw = _with_design_version(tmp_path)
    checks = _checks(tmp_path / "cases.json", raw)
    load_evaluator(path, checks)  # control: as written, it loads
    edit(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(TransferFormatError) as err:
        load_evaluator(path, checks)
    assert str(err.value) == f"{path}: unknown key '{key}'; did you mean '{near}'?"


def test_an_acceptance_mode_membench_does_not_implement_is_refused(tmp_path):
    path, raw = _with_design_version(tmp_path)
    raw["acceptance"] = {"mode": "weighted_threshold"}
    path.write_text(json.dumps(raw))
    with pytest.raises(TransferFormatError, match=r"field 'acceptance.mode' is 'weighted_threshold'"):
        load_evaluator(path, _checks(tmp_path / "cases.json", raw))


def test_every_key_accepted_and_not_read_is_documented():
    doc = (REPO / "docs" / "transfer.md").read_text(encoding="utf-8")
    for key in [*MANIFEST_IGNORED_KEYS, *CASE_IGNORED_KEYS]:
        assert f"`{key}`" in doc, key


def _study_on_published_manifests(tmp_path: Path) -> Path:
    """transfer-v1 with each project's evaluator replaced by a published manifest and no cases.json
    for one of them (the settle project keeps a cases.json of transfer-v1's ids: none match)."""
    root = tmp_path / "study"
    shutil.copytree(STUDY, root)
    derived, _ = _with_design_version(tmp_path)
    shutil.copyfile(derived, root / "hidden" / "projects" / "settle" / "manifest.v2.json")
    shutil.copyfile(require_shared(ENGRAM / "flagfoundry.manifest.v2.json"),
                    root / "hidden" / "projects" / "jobqueue" / "manifest.v2.json")
    (root / "hidden" / "projects" / "jobqueue" / "cases.json").unlink()
    checks = root / "hidden" / "projects" / "settle" / "cases.json"
    checks.write_text(json.dumps({"module": "settle", "cases": {}}))
    return root


def test_every_missing_check_of_a_study_is_reported_in_one_message(tmp_path):
    root = _study_on_published_manifests(tmp_path)
    with pytest.raises(TransferFormatError) as err:
        load_study(root)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{root / 'study.json'}: 88 manifest cases have no executable check")
    settle = root / "hidden" / "projects" / "settle" / "cases.json"
    jobqueue = root / "hidden" / "projects" / "jobqueue" / "cases.json"
    assert f"{settle}: 44 of the 44 cases of manifest.v2.json have no executable check: A-01, A-02," in msg
    assert f"{jobqueue}: does not exist, so 44 of the 44 cases" in msg
    assert len(re.findall(r"\b[A-E]-\d\d\b", msg)) >= 88  # every id, not the first one
    assert "carries each case's id, title, weight and prerequisites, not its check" in msg
    assert "cases.json is the mapping file" in msg


@pytest.mark.integration
def test_membench_transfer_refuses_the_study_once_with_every_missing_check(tmp_path, home):
    root = _study_on_published_manifests(tmp_path)
    result = run_cli("transfer", str(root), "--agent", "scripted:null", home=home, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "88 manifest cases have no executable check" in result.stderr
    assert "unknown key" not in result.stderr  # designVersion and the rest are accepted
    assert "Traceback" not in result.stderr
