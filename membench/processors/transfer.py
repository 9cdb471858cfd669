"""Transfer results (docs/transfer.md): a pure fold over one transfer run's events.

At `RunEnded` of a run that carried an `EvaluatorPlan` it derives one `TransferResult` and one
`TransferDimension` per manifest dimension:

- CCPF = passed / applicable, where applicable counts every scheduled case except
  `not_applicable` (V1-checkpoint) ones: failed, errored, unreached and blocked cases stay in the
  denominator (membench/analytics/ccpf.py's definition; a case the plan lists without an EvaluatorCase
  counts as unreached);
- a dimension's score = Σ weight of its passed cases / Σ weight of its applicable cases;
- raw score = max_score · Σ_d W_d · score_d / Σ_d W_d over dimensions with applicable cases;
- a hard cap fires when any of its cases did not pass; the weighted score is the raw score
  limited by the lowest fired cap; each fired cap's reason names its failing cases;
- all_cases_pass: every applicable case passed;
- resources: agent and simulated-user turns apart, patch invocations, compactions, lines added,
  tokens, and time by phase: user time = plan_handoff + delivery_review + test_feedback,
  evaluation time = delivery (the public check) + freezing + testing, agent time = implementing.
  A phase lasts from its `TransferPhase` event to the next one (event timestamps: no clock here).

It also derives one `TransferCase` per case the plan scheduled (derived v4, table `transfer_cases`):
the case's dimension, weight and prerequisites from the plan, its status from its `EvaluatorCase`
(`unreached` without one), whether it is applicable (every status but `not_applicable`), and for a
`blocked` case the prerequisite cases that did not pass (`blocked_by`).

An excluded run (`skill_bank_modified`, missing isolation) yields a TransferResult with
`excluded` true and the reason, and no dimensions or cases.

Every run with a plan, excluded or not, also derives one `TransferHardCap` per hard cap of its
plan (derived v5): its cases, cap and invariant, and whether it fired (never for an excluded run);
a cap without cases cannot fire, and the report says so. A learning run derives one `SkillBank`
per `SkillBankFrozen` event (derived v5): the bank, its digest, its file count and distiller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from membench.schemas.derived import DerivedEvent, UnitKey, make_derived
from membench.schemas.events import Event

if TYPE_CHECKING:
    from membench.schemas.payloads import EvaluatorCase, EvaluatorPlan, RunEnded

USER_PHASES = frozenset({"plan_handoff", "delivery_review", "test_feedback"})
EVALUATION_PHASES = frozenset({"delivery", "freezing", "testing"})
AGENT_PHASES = frozenset({"implementing"})


@dataclass
class TransferFold:
    key: UnitKey | None = None
    bank_digest: str | None = None
    plan: EvaluatorPlan | None = None
    cases: dict[str, EvaluatorCase] = field(default_factory=dict)
    public_check_passed: bool = False
    submission_digest: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("agent_turns", "user_turns", "patch_invocations", "compactions", "lines_added", "input_tokens",
         "cached_tokens", "output_tokens", "reasoning_tokens"), 0))
    phase: str | None = None
    phase_ts: int = 0
    times: dict[str, int] = field(default_factory=lambda: {"agent": 0, "user": 0, "evaluation": 0})

    def apply(self, event: Event) -> list[DerivedEvent]:
        kind, p = event.kind, event.payload
        if kind == "RunStarted":
            self.key = UnitKey(event.run_set, event.run_id, event.unit_id, p["suite"], p["task"], p["condition"],
                               p["seed"], p["agent"])
            self.bank_digest = p.get("skill_bank_digest")
            return []
        if self.key is None:
            raise ValueError(f"run {event.run_id} seq {event.seq}: {kind} before RunStarted")
        # the payloads are their kinds' records (decoded events are plain dicts)
        if kind == "EvaluatorPlan":
            self.plan = p  # type: ignore[assignment]
        elif kind == "EvaluatorCase":
            self.cases[p["case_id"]] = p  # type: ignore[assignment]
        elif kind == "PublicCheck":
            self.public_check_passed = bool(p["passed"])
        elif kind == "SkillBankFrozen":
            return [make_derived(self.key, "SkillBank", event.seq, {
                "bank": p["bank"], "digest": p["digest"], "files": len(p["files"]),
                "ablated_skill": p.get("ablated_skill"), "distiller": p.get("distiller")}, "skill_bank", p["bank"])]
        elif kind == "SubmissionFrozen":
            self.submission_digest = p["digest"]
        elif kind == "TransferPhase":
            self._close_phase(event.ts)
            self.phase, self.phase_ts = p["phase"], event.ts
        elif kind == "Turn":
            role = p["role"]
            self.counts["agent_turns"] += role == "agent"
            self.counts["user_turns"] += role == "simulated_user"
            counts = self.counts
            counts["input_tokens"] += p.get("input_tokens", 0)
            counts["cached_tokens"] += p.get("cached_tokens", 0)
            counts["output_tokens"] += p.get("output_tokens", 0)
            counts["reasoning_tokens"] += p.get("reasoning_tokens", 0)
        elif kind == "ToolCall":
            self.counts["patch_invocations"] += bool(p.get("is_patch", False))
        elif kind == "ContextCompaction":
            self.counts["compactions"] += 1
        elif kind == "PatchProduced":
            self.counts["lines_added"] += p["added_lines"]
        elif kind == "RunEnded":
            self._close_phase(event.ts)
            if self.plan is None:
                return []
            return self._derive(event, p)  # type: ignore[arg-type]  # a RunEnded payload
        return []

    def _close_phase(self, ts: int) -> None:
        if self.phase is None:
            return
        ms = max(0, ts - self.phase_ts) // 1000
        if self.phase in AGENT_PHASES:
            self.times["agent"] += ms
        elif self.phase in USER_PHASES:
            self.times["user"] += ms
        elif self.phase in EVALUATION_PHASES:
            self.times["evaluation"] += ms
        self.phase = None

    def _derive(self, event: Event, ended: RunEnded) -> list[DerivedEvent]:
        assert self.key is not None and self.plan is not None
        excluded = ended["status"] != "completed"
        base = {"excluded": excluded, "exclusion_reason": ended.get("error_type") if excluded else None,
                "skill_bank_digest": self.bank_digest, "public_check_passed": self.public_check_passed,
                "submission_digest": self.submission_digest, **self.counts,
                "agent_time_ms": self.times["agent"], "user_time_ms": self.times["user"],
                "evaluation_time_ms": self.times["evaluation"]}
        if excluded:
            return [make_derived(self.key, "TransferResult", event.seq, {
                **base, "cases": len(self.plan["cases"]), "applicable": 0, "passed": 0, "failed": 0, "errored": 0,
                "blocked": 0, "ccpf": None, "raw_score": 0.0, "weighted_score": 0.0, "caps_fired": [],
                "cap_reasons": [], "all_cases_pass": False}, "result"), *self._hard_caps(event, None)]
        status: dict[str, str] = {}
        for c in self.plan["cases"]:
            got = self.cases.get(c["case_id"])
            status[c["case_id"]] = got["status"] if got is not None else "unreached"
        applicable = [c for c in self.plan["cases"] if status[c["case_id"]] != "not_applicable"]
        passed = [c for c in applicable if status[c["case_id"]] == "passed"]
        out: list[DerivedEvent] = []
        weighted_sum, weight_total = 0.0, 0.0
        for d in self.plan["dimensions"]:
            mine = [c for c in applicable if c["dimension"] == d["dimension"]]
            case_weight = sum(c["weight"] for c in mine)
            passed_weight = sum(c["weight"] for c in mine if status[c["case_id"]] == "passed")
            score = passed_weight / case_weight if case_weight else None
            if score is not None:
                weighted_sum += d["weight"] * score
                weight_total += d["weight"]
            out.append(make_derived(self.key, "TransferDimension", event.seq, {
                "dimension": d["dimension"], "title": d["title"], "weight": d["weight"], "cases": len(mine),
                "passed": sum(1 for c in mine if status[c["case_id"]] == "passed"), "case_weight": case_weight,
                "passed_weight": passed_weight, "score": score}, "dimension", d["dimension"]))
        raw = self.plan["max_score"] * weighted_sum / weight_total if weight_total else 0.0
        fired, reasons, capped = [], [], raw
        for cap in self.plan["hard_caps"]:
            failing = [cid for cid in cap["cases"] if status.get(cid) != "passed"]
            if failing:
                fired.append(cap["cap_id"])
                reasons.append(f"{cap['cap_id']} (cap {cap['cap']:g}): case {', '.join(failing)} did not pass"
                               + (f" — {cap['invariant']}" if cap["invariant"] else ""))
                capped = min(capped, cap["cap"])
        for position, c in enumerate(self.plan["cases"]):
            got = self.cases.get(c["case_id"])
            prereqs = list(c["prerequisites"])
            out.append(make_derived(self.key, "TransferCase", event.seq, {
                "project": self.key.task, "case_id": c["case_id"], "dimension": c["dimension"],
                "weight": float(c["weight"]), "prerequisites": prereqs, "status": status[c["case_id"]],
                "applicable": status[c["case_id"]] != "not_applicable",
                "blocked_by": [q for q in prereqs if q in status and status[q] != "passed"]
                if status[c["case_id"]] == "blocked" else [],
                "position": position, "duration_ms": int(got["duration_ms"] or 0) if got is not None else 0,
                "evidence_sha256": str(got["evidence_sha256"] or "") if got is not None else ""}, "case", c["case_id"]))
        out.extend(self._hard_caps(event, status))
        count = lambda s: sum(1 for c in applicable if status[c["case_id"]] == s)  # noqa: E731
        out.insert(0, make_derived(self.key, "TransferResult", event.seq, {
            **base, "cases": len(self.plan["cases"]), "applicable": len(applicable), "passed": len(passed),
            "failed": count("failed"), "errored": count("error") + count("unreached"), "blocked": count("blocked"),
            "ccpf": len(passed) / len(applicable) if applicable else None, "raw_score": raw,
            "weighted_score": capped, "caps_fired": fired, "cap_reasons": reasons,
            "all_cases_pass": bool(applicable) and len(passed) == len(applicable)}, "result"))
        return out

    def _hard_caps(self, event: Event, status: dict[str, str] | None) -> list[DerivedEvent]:
        """One row per hard cap of the plan; STATUS (case -> status) is None for an excluded run: no cap fires."""
        assert self.key is not None and self.plan is not None
        return [make_derived(self.key, "TransferHardCap", event.seq, {
            "cap_id": cap["cap_id"], "cap": float(cap["cap"]), "cases": list(cap["cases"]),
            "invariant": cap["invariant"] or "",
            "fired": status is not None and any(status.get(cid) != "passed" for cid in cap["cases"])},
            "hard_cap", cap["cap_id"]) for cap in self.plan["hard_caps"]]
