"""The per-case transfer table. TransferFold derives one TransferCase per scheduled case
(status, applicability, the prerequisite cases that blocked it), none for an excluded run. Its
warehouse table `transfer_cases` is checked against real chDB in tests/warehouse/test_tables_doc.py."""

from __future__ import annotations

from tests.processors.test_transfer_fold import CASES, derived, events_of


def test_one_row_per_scheduled_case_with_outcome_and_blocker():
    statuses = {"A-01": "passed", "A-02": "passed", "B-01": "failed", "B-02": "blocked", "B-03": "not_applicable"}
    rows = {r["case_id"]: r for r in derived(events_of(statuses), "TransferCase")}
    assert list(rows) == [c["case_id"] for c in CASES]  # manifest order, every scheduled case
    assert rows["B-02"]["status"] == "blocked" and rows["B-02"]["blocked_by"] == ["B-01"]
    assert rows["B-04"]["status"] == "unreached" and rows["B-04"]["applicable"]  # never reported
    assert not rows["B-03"]["applicable"] and rows["B-03"]["prerequisites"] == ["V1"]
    assert rows["A-01"]["blocked_by"] == [] and rows["A-01"]["weight"] == 1.0 and rows["A-01"]["dimension"] == "A"
    assert {r["project"] for r in rows.values()} == {"proj"} and [r["position"] for r in rows.values()] == list(range(6))
    # the table agrees with the run's CCPF: applicable passed / applicable
    (result,) = derived(events_of(statuses), "TransferResult")
    applicable = [r for r in rows.values() if r["applicable"]]
    assert (sum(r["status"] == "passed" for r in applicable), len(applicable)) == (result["passed"], result["applicable"])


def test_an_excluded_run_has_no_case_rows():
    assert derived(events_of({}, ended="excluded", error="skill_bank_modified"), "TransferCase") == []



def test_the_report_says_which_hard_caps_cannot_fire():
    from membench.reports.transfer import transfer_markdown
    from tests.reports.test_html import make_report, typed

    row = {"project": "escrow", "condition": "learned_bank", "runs": 1, "excluded": 0, "exclusion_reasons": {},
           "ccpf_micro": 0.5, "weighted_score_mean": 50.0, "all_cases_pass_runs": 0, "caps_fired": [],
           "cap_reasons": [], "dimensions": [], "passed": 1, "applicable": 2, "ccpf_macro": 0.5,
           "raw_score_mean": 50.0}
    section = {"baseline": None, "projects": [dict(row, caps_without_cases=["BOOT"])], "conditions": [], "banks": []}
    text = transfer_markdown(typed(make_report(transfer=section)))
    assert "hard cap BOOT cannot fire without a case mapping" in text
    # control: a project whose caps are all mapped says nothing of the kind
    assert "cannot fire" not in transfer_markdown(typed(make_report(transfer=dict(section, projects=[row]))))


def test_one_hard_cap_row_per_cap_of_the_plan_excluded_runs_too():
    caps = [{"cap_id": "CONSERVE", "cap": 35.0, "invariant": "money is conserved", "cases": ["B-01"]},
            {"cap_id": "BOOT", "cap": 25.0, "invariant": "", "cases": []}]
    statuses = dict.fromkeys(("A-01", "A-02", "B-02", "B-04"), "passed") | {"B-01": "failed", "B-03": "passed"}
    rows = {r["cap_id"]: r for r in derived(events_of(statuses, caps=caps), "TransferHardCap")}
    assert rows["CONSERVE"]["fired"] and rows["CONSERVE"]["cases"] == ["B-01"] and rows["CONSERVE"]["cap"] == 35.0
    assert not rows["BOOT"]["fired"] and rows["BOOT"]["cases"] == []  # no case: it cannot fire
    excluded = derived(events_of({}, caps=caps, ended="excluded", error="skill_bank_modified"), "TransferHardCap")
    assert [(r["cap_id"], r["fired"]) for r in excluded] == [("CONSERVE", False), ("BOOT", False)]


def test_a_frozen_bank_derives_one_skill_bank_row():
    frozen = {"bank": "learned", "digest": "d" * 64, "files": [{"path": "a.md", "sha256": "1" * 64}],
              "ablated_skill": None, "distiller": "scripted"}
    (bank,) = derived(events_of({}, extra=[("SkillBankFrozen", frozen)]), "SkillBank")
    assert (bank["bank"], bank["digest"], bank["files"], bank["distiller"]) == ("learned", "d" * 64, 1, "scripted")
    assert derived(events_of({}), "SkillBank") == []
