"""Every payload read of the processors names a declared field of its record, with the schema's
default (docs/design.md §3, "Typed payloads"; the check is `tests/processors/payload_reads.py`), so
a misspelt key fails here instead of reading 0."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.processors.payload_reads import check_source

REPO = Path(__file__).resolve().parents[2]
# the modules whose payload reads are checked: the processors (the folds' hot path) and the helper they share
CHECKED = sorted((REPO / "membench" / "processors").glob("*.py")) + [REPO / "membench" / "schemas" / "events.py"]


def _check(path: Path):
    return check_source(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(REPO)))
def test_payload_reads_name_declared_fields(path):
    report = _check(path)
    assert report.problems == []


def test_the_check_sees_the_folds_reads():
    """Not vacuous: the folds' reads are found (a refactor that hides them from the check shows here)."""
    reads = {p.name: _check(p).reads for p in CHECKED}
    assert reads["verdicts.py"] >= 15 and reads["evidence.py"] >= 35 and reads["transfer.py"] >= 55, reads
    assert reads["events.py"] == 1  # agent_model_call


def test_a_misspelt_key_in_a_fold_fails():
    source = (REPO / "membench" / "processors" / "verdicts.py").read_text(encoding="utf-8")
    assert '"cached_tokens"' in source
    report = check_source(source.replace('"cached_tokens"', '"cache_tokens"', 1), "verdicts.py")
    assert [p.split(": ", 1)[1] for p in report.problems] == [
        "ModelCall has no field 'cache_tokens'", "Turn has no field 'cache_tokens'"]


def _problems(code: str) -> list[str]:
    return [p.split(": ", 1)[1] for p in check_source(textwrap.dedent(code)).problems]


def test_narrowing_by_kind():
    assert _problems("""
        def f(event):
            kind, p = event.kind, event.payload
            if kind == "Turn":
                return p.get("input_tokens", 0) + p["role"]
            elif kind == "ModelCall" and p["status"] == "ok":
                return p["stauts"]
    """) == ["ModelCall has no field 'stauts'"]


def test_or_and_in_narrow_to_fields_of_every_kind():
    assert _problems("""
        def f(event):
            p = event.payload
            if event.kind == "Turn" or event.kind == "ModelCall":
                return p.get("input_tokens", 0), p.get("purpose", "agent")
            if event.kind in ("Turn", "ToolCall"):
                return p["role"]
    """) == ["Turn has no field 'purpose'", "ToolCall has no field 'role'"]


def test_a_read_of_unknown_kind_fails():
    assert _problems("""
        def f(event):
            p = event.payload
            return p["status"]
    """) == ["a payload read whose event kind is not known here (test the kind, or annotate the payload with its "
             "type from membench.schemas.payloads)"]


def test_defaults_and_required_fields():
    assert _problems("""
        def f(event):
            kind, p = event.kind, event.payload
            if kind == "Turn":
                return (p["input_tokens"], p.get("input_tokens", 1), p.get("input_tokens"), p.get("role"),
                        p.get("source_event_id"))
            if kind == "RunEnded":
                return p.get("error_type"), p.get("error_type", None), p.get("status", "")
    """) == [
        "Turn.input_tokens has a default (0): an in-process payload may omit it, read it with .get('input_tokens', 0)",
        "Turn.input_tokens: default 1 is not the schema's 0",
        "Turn.input_tokens defaults to 0: .get('input_tokens', 0)",
        "Turn.role is required (always present): index it",
        "RunEnded.status is required (always present): index it",
    ]


def test_non_literal_keys_methods_and_unknown_kinds_fail():
    assert _problems("""
        def f(event, key):
            p = event.payload
            if event.kind == "Turn":
                return p[key], p.items()
            if event.kind == "Trun":
                return 0
    """) == ["a payload key that is not a string literal", "payload method .items(): read fields by name",
             "no event kind 'Trun' in membench.schemas.payloads"]


def test_annotations_fields_and_nested_records():
    assert _problems("""
        from dataclasses import dataclass, field
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from membench.schemas.payloads import EvaluatorCase, EvaluatorPlan, RunEnded, RunEnd

        def g(ended: RunEnded, event):
            p: RunEnded = event.payload
            return ended["status"], p["statuss"]

        @dataclass
        class Fold:
            plan: EvaluatorPlan | None = None
            cases: dict[str, EvaluatorCase] = field(default_factory=dict)

            def derive(self):
                applicable = [c for c in self.plan["cases"] if c["weight"] > 0]
                for c in applicable:
                    got = self.cases.get(c["case_id"])
                    yield got["duration_ms"], got["duration"], c["prerequisite"]
                for cap in self.plan["hard_caps"]:
                    yield cap["cap"], cap["caps"]
                count = lambda s: sum(1 for c in applicable if c["statuss"] == s)
    """) == [
        "membench.schemas.payloads has no record RunEnd",
        "RunEnded has no field 'statuss'",
        "EvaluatorCase has no field 'duration'",
        "EvaluatorPlanCase has no field 'prerequisite'",
        "EvaluatorHardCap has no field 'caps'",
        "EvaluatorPlanCase has no field 'statuss'",
    ]
