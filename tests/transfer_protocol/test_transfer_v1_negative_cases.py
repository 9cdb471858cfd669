"""transfer-v1's negative cases (a check that expects a raise) are gated on a positive case of the
same function, so a submission that only turns each stub's NotImplementedError into ValueError
scores no better than the untouched starting workspace (the null submission). The control runs
the same submission against the cases with their old prerequisite (FINAL alone): there raising
everywhere wins the negative cases without the behaviour they guard.

Through the real evaluator (the submission in a production sandbox, the case runner in another).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from membench.transfer_protocol.evaluator import freeze_submission, run_evaluator, submission_tree
from membench.sandbox.workspace import write_tree
from membench.formats.transfer_format import Evaluator, Project, load_study

STUDY = Path(__file__).parents[2] / "fixtures" / "transfer-v1"


def _negative_ids(evaluator: Evaluator) -> set[str]:
    checks = json.loads(evaluator.checks_path.read_text(encoding="utf-8"))["cases"]
    return {cid for cid, check in checks.items() if "raises" in check}


def test_every_negative_case_is_gated_on_a_positive_case_of_its_function():
    for project in load_study(STUDY).projects:
        evaluator = project.evaluator
        checks = json.loads(evaluator.checks_path.read_text(encoding="utf-8"))["cases"]
        negatives = _negative_ids(evaluator)
        assert negatives, project.project_id
        for case in evaluator.cases:
            if case.case_id in negatives:
                gates = [p for p in case.prerequisites if p in checks]
                assert gates, f"{project.project_id} {case.case_id} has no positive prerequisite"
                for gate in gates:
                    assert "expect" in checks[gate] and checks[gate]["call"] == checks[case.case_id]["call"]


def _raising_everywhere(project: Project, dest: Path) -> Path:
    """The starting workspace with every stub's NotImplementedError turned into ValueError."""
    tree = submission_tree(project.workspace)
    raising = {rel: data.replace(b"raise NotImplementedError", b"raise ValueError") for rel, data in tree.items()}
    assert raising != tree
    write_tree(raising, dest)
    return dest


def _ccpf(sandbox, workspace: Path, frozen: Path, evaluator: Evaluator) -> float:
    freeze_submission(workspace, frozen)
    results = run_evaluator(sandbox, frozen, evaluator, 60)
    applicable = [r for r in results if r.status != "not_applicable"]
    return sum(r.status == "passed" for r in applicable) / len(applicable)


@pytest.mark.integration
@pytest.mark.parametrize("project_id", ["settle", "jobqueue"])
def test_raising_everywhere_scores_no_more_than_the_null_submission(bwrap_sandbox, tmp_path, project_id):
    project = load_study(STUDY).project(project_id)
    evaluator = project.evaluator
    raising = _raising_everywhere(project, tmp_path / "raising")
    null = _ccpf(bwrap_sandbox, project.workspace, tmp_path / "null-frozen", evaluator)
    raised = _ccpf(bwrap_sandbox, raising, tmp_path / "raising-frozen", evaluator)
    assert raised <= null, (raised, null)

    # control: the negative cases with FINAL as their only prerequisite reward raising
    negatives = _negative_ids(evaluator)
    ungated = dataclasses.replace(evaluator, cases=tuple(
        dataclasses.replace(c, prerequisites=("FINAL",)) if c.case_id in negatives else c for c in evaluator.cases))
    assert _ccpf(bwrap_sandbox, raising, tmp_path / "ungated-frozen", ungated) > null
