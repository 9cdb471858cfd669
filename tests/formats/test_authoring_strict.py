"""Loaders that refuse an author's silent mistakes, each with a control showing the mistake
went through (or would) without the check, and EngramBench's published manifests read unmodified.

Cheap on purpose: pack and study copies in tmp_path, no sandbox, no run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.analytics.ccpf import V1_PREREQUISITES, CaseOutcome, EvaluatorManifest, ManifestCase, ccpf
from membench.packs.finalize import finalize_pack, scan_placeholders, slot_problem
from membench.packs.pack_resolver import finalized_copy, open_pack
from membench.formats.pack_format import PackError, load_pack
from membench.formats.transfer_format import CHECKPOINTS, V1_CHECKPOINTS, TransferFormatError, load_evaluator, load_study
from tests.conftest import SHARED, require_shared

FIXTURES = Path(__file__).parents[2] / "fixtures"
STUDY = FIXTURES / "transfer-v1"
ENGRAM = SHARED / "external" / "engrambench"


def _pack(tmp_path: Path, edit=None, solution_edit=None) -> Path:
    root = tmp_path / "smoke"
    shutil.copytree(FIXTURES / "smoke", root)
    if edit is not None:
        manifest = json.loads((root / "manifest.json").read_text())
        edit(manifest)
        (root / "manifest.json").write_text(json.dumps(manifest))
    if solution_edit is not None:
        path = root / "hidden" / "smoke-currency" / "s3.solution.json"
        data = json.loads(path.read_text())
        solution_edit(data)
        path.write_text(json.dumps(data))
    return root


# ---------------------------------------------------------------------------------------- packs

@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m.update(descripton="x"), "unknown key 'descripton'; did you mean 'description'?"),
    (lambda m: m["sequences"][1].update(decisive_literal=["x"]),
     "unknown key 'sequences[1].decisive_literal'; did you mean 'decisive_literals'?"),
    (lambda m: m["sequences"][0]["sessions"][2].update(oracle="s3"),
     "unknown key 'sequences[0].sessions[2].oracle'; did you mean 'oracle_id'?"),
    (lambda m: m["sequences"][0]["events"][0]["scope"].update(file=["a.py"]),
     "unknown key 'sequences[0].events[0].scope.file'; did you mean 'files'?"),
    (lambda m: m["sequences"][0]["oracle_labels"][0].update(typ="stale"),
     "unknown key 'oracle_labels[0].typ'; did you mean 'type'?"),
])
def test_unknown_manifest_keys_are_refused_with_path_and_nearest_key(tmp_path, edit, fragment):
    root = _pack(tmp_path, edit)
    with pytest.raises(PackError) as err:
        load_pack(root)
    assert fragment in str(err.value) and "manifest.json" in str(err.value)


def test_unknown_solution_key_is_refused(tmp_path):
    root = _pack(tmp_path, solution_edit=lambda d: d["slots"]["currency"].update(defualt="EUR"))
    with pytest.raises(PackError, match=r"s3\.solution\.json.*unknown key 'slots\.currency\.defualt'; did you mean "
                                        r"'default'\?"):
        load_pack(root)


def test_shipped_packs_still_load():
    for name in ("smoke", "hygiene-v1"):
        assert load_pack(FIXTURES / name).sequences


def test_a_misspelt_decisive_literal_is_refused(tmp_path):
    # control: the same pack with the literal as authored loads
    load_pack(_pack(tmp_path / "ok"))
    root = _pack(tmp_path, lambda m: m["sequences"][1].update(decisive_literals=["{{SECRET:curency:word}}"]))
    with pytest.raises(PackError) as err:
        load_pack(root)
    msg = str(err.value)
    assert "sequence smoke-currency: field 'decisive_literals[0]' occurs nowhere in hidden/smoke-currency/" \
           "s3_make_invoice.py" in msg and "curency" not in msg


def test_a_v2_literal_trap_must_declare_a_decisive_literal(tmp_path):
    def edit(m):
        m["format_version"] = 2
        for seq in m["sequences"]:
            seq["decisive_literals"] = [] if seq["seq_id"] == "smoke-currency" else seq["decisive_literals"]
    with pytest.raises(PackError, match="smoke-currency: field 'decisive_literals' is required for construct C1"):
        load_pack(_pack(tmp_path, edit))
    # control: format 1 packs (imported ones have no literals) are not held to it
    root = _pack(tmp_path / "v1", lambda m: m["sequences"][1].update(decisive_literals=[]))
    assert load_pack(root).sequence("smoke-currency").decisive_literals == ()


def test_a_slot_pattern_that_cannot_match_its_secret_class_is_refused(tmp_path):
    # hex digits where the class `word` draws 8 uppercase letters: memory-literal could never fill it
    root = _pack(tmp_path, solution_edit=lambda d: d["slots"]["currency"].update(
        pattern="default currency code is ([0-9a-f]{8})"))
    problems = scan_placeholders(root)["sequences"]["smoke-currency"]["problems"]
    assert problems and "slot 'currency': its pattern never captures its answer" in problems[0]
    with pytest.raises(PackError, match="slot 'currency'"):
        finalize_pack(root, tmp_path / "final")
    # control: the shipped pattern is fine, and the check is not vacuous for a pattern that works
    # on some draws only (all-digit hex is one of the shapes sampled)
    assert not scan_placeholders(FIXTURES / "smoke")["sequences"]["smoke-currency"]["problems"]
    assert slot_problem("s", "0123abcd", "id ([0-9]{8})", "", ["id 0123abcd"]) is not None
    assert slot_problem("s", "01234567", "id ([0-9]{8})", "", ["id 01234567"]) is None
    # a slot that needs no memory (empty or its default answer) is not held to it (C5, C9, C10)
    assert slot_problem("s", "", "nothing (x)", "", ["y"]) is None


def test_a_finalized_copy_is_refused_as_pack_with_the_fix(tmp_path):
    home = tmp_path / "home"
    copy = tmp_path / "copy"
    finalize_pack(FIXTURES / "smoke", copy)
    with pytest.raises(PackError) as err:
        open_pack(str(copy), home)
    assert "finalized copy of the skeleton 'smoke'" in str(err.value) and "Run the skeleton instead" in str(err.value)
    # control: the skeleton runs (and finalizes into MEMBENCH_HOME/packs), and that cached copy itself,
    # which reports find by digest, is accepted as PACK too
    assert open_pack(str(FIXTURES / "smoke"), home).digest == load_pack(finalized_copy(FIXTURES / "smoke", home)).digest
    assert open_pack(str(finalized_copy(FIXTURES / "smoke", home)), home).name == "smoke"


# -------------------------------------------------------------------------------------- studies

def _study(tmp_path: Path, rel: str | None = None, edit=None) -> Path:
    root = tmp_path / "study"
    shutil.copytree(STUDY, root)
    if rel is not None:
        path = root / rel
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return root


CASES = "hidden/projects/settle/cases.json"


@pytest.mark.parametrize("rel, edit, fragment", [
    ("study.json", lambda d: d["projects"][0].update(evaluater="x"),
     "study.json: unknown key 'projects[0].evaluater'; did you mean 'evaluator'?"),
    (CASES, lambda d: d["cases"]["A-01"].update(expected=1), "cases.json: unknown key 'cases.A-01.expected'"),
    (CASES, lambda d: d["cases"]["E-01"].update(expect=None),
     "cases.json: field 'cases.E-01' gives both 'expect' and 'raises'"),
    ("projects/settle/scenario.json", lambda d: d.update(acept="ok"), "scenario.json: unknown key 'acept'"),
    ("hidden/projects/settle/manifest.v2.json", lambda d: d["cases"][0].update(weigth=2),
     "manifest.v2.json: unknown key 'cases[0].weigth'; did you mean 'weight'?"),
])
def test_study_mistakes_are_refused(tmp_path, rel, edit, fragment):
    with pytest.raises(TransferFormatError) as err:
        load_study(_study(tmp_path, rel, edit))
    assert fragment in str(err.value)


def test_native_bank_must_match_its_manifest(tmp_path):
    root = _study(tmp_path)
    assert load_study(root).native_bank.is_dir()  # control: the shipped bank verifies
    skill = next((root / "native_bank").glob("*/SKILL.md"))
    skill.write_text(skill.read_text() + "\nedited after freezing\n")
    with pytest.raises(TransferFormatError, match=r"native_bank'.*does not match its SHA-256.*\(stale\); regenerate"):
        load_study(root)
    (root / "native_bank" / "MANIFEST.sha256").unlink()
    with pytest.raises(TransferFormatError, match=r"MANIFEST\.sha256 is missing; regenerate"):
        load_study(root)


def test_prerequisite_error_lists_every_checkpoint_and_earlier_case(tmp_path):
    root = _study(tmp_path, "hidden/projects/settle/manifest.v2.json",
                  lambda d: d["cases"][2].update(prerequisites=["BROWSER"]))
    with pytest.raises(TransferFormatError) as err:
        load_study(root)
    msg = str(err.value)
    assert "'BROWSER' is neither a checkpoint" in msg
    assert all(name in msg for name in ("CHROMIUM", "FINAL", "PERF", "PERF_V1", "V1", "V1_CHECKPOINT"))
    assert "earlier cases: A-01, A-02" in msg


def test_one_prerequisite_vocabulary():
    # analytics imports nothing of the project, so it keeps its own copy of the V1 names
    assert V1_PREREQUISITES == V1_CHECKPOINTS and not CHECKPOINTS & V1_CHECKPOINTS


def _checks(path: Path, manifest: dict, caps: dict | None = None) -> Path:
    body = {"module": "m", "cases": {c["id"]: {"call": "f", "expect": 1} for c in manifest["cases"]}}
    if caps is not None:
        body["hardCaps"] = caps
    path.write_text(json.dumps(body))
    return path


def test_published_manifests_load_unmodified_with_cap_warnings(tmp_path):
    require_shared(ENGRAM)
    published = sorted(ENGRAM.glob("*.manifest.v2.json"))
    assert len(published) >= 2
    for path in published:
        raw = json.loads(path.read_text())
        ev = load_evaluator(path, _checks(tmp_path / f"{path.stem}.cases.json", raw))
        assert len(ev.cases) == len(raw["cases"]) and all(d.title for d in ev.dimensions)
        # published caps name no cases: each is warned about, with how to author the mapping
        assert len(ev.warnings) == len(raw["hardCaps"]) >= 1 and all(not c.cases for c in ev.hard_caps)
        first = raw["hardCaps"][0]["id"]
        assert f"hard cap {first} cannot fire without a case mapping" in ev.warnings[0]
        assert f'"hardCaps": {{"{first}": [case id, ...]}}' in ev.warnings[0]
        # the mapping, authored in cases.json, arms the cap and silences its warning
        mapped = load_evaluator(path, _checks(tmp_path / "mapped.json", raw, {first: [raw["cases"][0]["id"]]}))
        assert mapped.hard_caps[0].cases == (raw["cases"][0]["id"],) and len(mapped.warnings) == len(ev.warnings) - 1
        with pytest.raises(TransferFormatError, match="field 'hardCaps.NOPE' is not a hard cap"):
            load_evaluator(path, _checks(tmp_path / "bad.json", raw, {"NOPE": []}))


def test_escrowguard_shaped_manifest_loads(tmp_path):
    # the published escrowguard manifest's shape (not its text): dimensions titled by `name`, browser
    # and performance-profile prerequisites, a V1 checkpoint
    manifest = {
        "schemaVersion": 2, "taskId": "escrow-like", "profile": "transfer-v2", "formalReady": False, "maxScore": 100,
        "acceptance": {"mode": "all_cases_pass"},
        "dimensions": {"A": {"name": "requirements-and-public-contract", "weight": 60},
                       "D": {"name": "ui-verification", "weight": 40}},
        "hardCaps": [{"id": "BOOT", "cap": 25, "publicInvariant": "It boots."}],
        "specGaps": [{"id": "GAP-01", "summary": "unpublished"}],
        "cases": [
            {"id": "A-01", "title": "boot", "dimension": "A", "weight": 2, "prerequisites": ["FINAL"]},
            {"id": "D-02", "title": "browser", "dimension": "D", "weight": 2, "prerequisites": ["FINAL", "CHROMIUM"]},
            {"id": "E-01", "title": "migration", "dimension": "A", "weight": 2,
             "prerequisites": ["V1_CHECKPOINT", "FINAL"]},
            {"id": "E-04", "title": "perf", "dimension": "A", "weight": 1, "prerequisites": ["FINAL", "PERF_V1"]},
        ],
    }
    path = tmp_path / "escrow-like.manifest.v2.json"
    path.write_text(json.dumps(manifest))
    ev = load_evaluator(path, _checks(tmp_path / "cases.json", manifest))
    assert [d.title for d in ev.dimensions] == ["requirements-and-public-contract", "ui-verification"]
    assert [c.prerequisites for c in ev.cases][1] == ("FINAL", "CHROMIUM") and ev.warnings


# ------------------------------------------------------------------------------------------ ccpf

def test_ccpf_accepts_every_status_the_evaluator_emits():
    manifest = EvaluatorManifest("t", tuple(ManifestCase(c, "A", 1.0, ("FINAL",)) for c in ("a", "b", "c", "d")))
    rows = [CaseOutcome("r", "t", "a", "passed"), CaseOutcome("r", "t", "b", "blocked"),
            CaseOutcome("r", "t", "c", "not_applicable"), CaseOutcome("r", "t", "d", "failed")]
    run = ccpf(rows, [manifest]).runs[0]
    # blocked stays in the denominator (a failure), not_applicable leaves it
    assert (run.passed, run.applicable, run.not_applicable_v1) == (1, 3, 1)
    assert run.statuses["blocked"] == 1 and "not_applicable" not in run.statuses
    assert ccpf(rows).runs[0].applicable == 3  # without a manifest too


# ------------------------------------------------------------------------------ usage errors (exit 2)

def test_the_cli_refuses_these_mistakes_as_usage_errors(cli_inproc, tmp_path):
    study = _study(tmp_path, "study.json", lambda d: d.update(ablate_skil="L1-fees"))
    proc = cli_inproc("transfer", str(study))
    assert proc.returncode == 2 and "unknown key 'ablate_skil'; did you mean 'ablate_skill'?" in proc.stderr
    copy = tmp_path / "copy"
    finalize_pack(FIXTURES / "smoke", copy)
    proc = cli_inproc("run", str(copy), "--conditions", "B0", "--seeds", "1")
    assert proc.returncode == 2 and "Run the skeleton instead" in proc.stderr
