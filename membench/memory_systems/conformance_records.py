"""The conformance records `membench memory check` writes (`$MEMBENCH_HOME/conformance/<digest>.json`
and each condition's repair-budget ledger under `conformance/attempts/`), read back: whether a
condition may be measured as it would run now (`admission_record`). A run refuses a condition
without a passing record for its configuration (`require_conformant`), and the report's
conformance funnel names each condition's record; what a record is pinned to: `admission.py`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class ConditionNotAdmitted(ValueError):
    """A condition that may not be measured: no passing conformance record of its configuration."""


def record_path(home: Path, digest: str) -> Path:
    return home / "conformance" / f"{digest}.json"


def attempts_path(home: Path, condition: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in condition)
    return home / "conformance" / "attempts" / f"{safe}.json"


def load_record(home: Path, digest: str) -> dict[str, Any] | None:
    try:
        return json.loads(record_path(home, digest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_attempts(home: Path, condition: str) -> list[dict[str, Any]]:
    """CONDITION's repair-budget ledger (its `memory check` attempts, oldest first); empty without one."""
    try:
        attempts = json.loads(attempts_path(home, condition).read_text(encoding="utf-8")).get("attempts")
    except (OSError, ValueError, AttributeError):
        return []
    return [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []


def records_of(home: Path, condition: str) -> list[dict[str, Any]]:
    """CONDITION's records, newest check first (its attempts ledger's order), then any other record of
    it (a ledger lost or older than the record)."""
    found: dict[str, dict[str, Any]] = {}
    try:
        ledger = json.loads(attempts_path(home, condition).read_text(encoding="utf-8"))
        digests = [a["digest"] for a in reversed(ledger.get("attempts") or [])]
    except (OSError, ValueError, KeyError, TypeError):
        digests = []
    for digest in digests:
        record = load_record(home, digest)
        if record is not None and record.get("condition") == condition:
            found.setdefault(digest, record)
    for path in sorted((home / "conformance").glob("*.json")):
        if path.stem not in found:
            record = load_record(home, path.stem)
            if record is not None and record.get("condition") == condition:
                found[path.stem] = record
    return list(found.values())


def _check_command(condition: str, memory_model: str | None, base_urls: dict[str, str] | None) -> str:
    url = (base_urls or {}).get("openai") or (base_urls or {}).get("*")
    return (f"`membench memory check {condition}" + (f" --memory-model {memory_model}" if memory_model else "")
            + (f" --model-base-url {url}" if memory_model and url else "") + "`")


def admission_record(home: Path, condition: str, memory_model: str | None, base_urls: dict[str, str] | None = None,
                     any_upstream: bool = False) -> tuple[str, str, dict[str, Any] | None]:
    """(status, why, record) for CONDITION as it would run now; status "conformant" | "built_in" |
    "missing" (no record of it; `memory check` would make one) | "budget_spent" (no record of it, and
    its repair budget is spent without a pass, so `memory check` refuses it: the record is the
    attempt that spent it) | "failed" (its record failed a gate) | "changed" (no record of it, but
    its last passing record is of another configuration: an edited module, another version, model
    or upstream, or a record made before admissions were pinned — `why` names each difference).
    ANY_UPSTREAM: the run calls no upstream (a replay, or the report of a run already admitted): a
    record of the same configuration against any upstream serves."""
    from membench.memory_systems.admission import changes, repair_budget_spender
    from membench.memory_systems.conformance import REPAIR_BUDGET, SUITE_VERSION
    from membench.memory_systems.registry import (configuration, configuration_digest, is_model_driven,
                                                   needs_conformance)

    if not needs_conformance(condition):
        return "built_in", "a built-in condition: conformant by membench's own tests", None
    current = configuration(condition, memory_model, base_urls)
    digest = configuration_digest(current)
    model = memory_model if is_model_driven(condition) else None
    again = f"re-run {_check_command(condition, model, base_urls)}"
    record = load_record(home, digest)
    if record is None and any_upstream:
        matching = [r for r in records_of(home, condition)
                    if {**(r.get("configuration") or {}), "upstream": None} == {**current, "upstream": None}]
        record = next((r for r in matching if r.get("verdict") == "pass"), matching[0] if matching else None)
    spender = (repair_budget_spender(load_attempts(home, condition), digest, REPAIR_BUDGET)
               if record is None or record.get("suite_version") != SUITE_VERSION else None)
    if spender is not None:  # a check would be refused: advising one would mislead
        spent = load_record(home, spender["digest"]) or {"digest": spender["digest"], "verdict": spender.get("verdict"),
                                                         "failed": spender.get("failed")}
        return "budget_spent", (f"its repair budget is spent: {REPAIR_BUDGET} recorded `memory check` attempts with "
                                "other configurations, none conformant, the last "
                                f"conformance/{spender['digest']}.json (failed: "
                                f"{', '.join(spender.get('failed') or ['?'])}); no further configuration of it is "
                                "checked, so it stays unavailable"), spent
    if record is not None and record.get("suite_version") != SUITE_VERSION:
        return "missing", f"its record (digest {digest[:12]}) is of suite version {record.get('suite_version')}; " \
                          f"{again}", record
    if record is not None and record.get("verdict") != "pass":
        return "failed", f"it failed the conformance gate(s) {', '.join(record.get('failed') or ['?'])} " \
                         f"(record conformance/{record.get('digest', digest)}.json)", record
    if record is not None:
        return "conformant", f"conformance/{record.get('digest', digest)}.json", record
    # an admission that no longer holds names what changed; a condition never admitted is missing
    last = next((r for r in records_of(home, condition) if r.get("verdict") == "pass"), None)
    if last is None:
        return "missing", (f"no conformance record for its configuration (digest {digest[:12]}); run "
                           f"{_check_command(condition, model, base_urls)}"), None
    word = {"plugin": "plug-in", "external": "adapter", "library": "library"}.get(current["kind"], "condition")
    recorded = last.get("configuration") or {}
    if any_upstream:  # not a difference: the run calls no upstream
        current = {**current, "upstream": recorded.get("upstream")}
    differences = changes(recorded, current) or ["its configuration changed"]
    return "changed", (f"{word} {condition}: " + "; ".join(differences)
                       + f" since its record conformance/{last.get('digest', '?')}.json; {again}"), last


def conformance_status(home: Path, condition: str, memory_model: str | None, base_urls: dict[str, str] | None = None,
                       any_upstream: bool = False) -> tuple[str, str]:
    """(status, why) of `admission_record`."""
    status, why, _ = admission_record(home, condition, memory_model, base_urls, any_upstream)
    return status, why


def require_conformant(home: Path, conditions: list[str], memory_model: str | None, option: str,
                       base_urls: dict[str, str] | None = None, any_upstream: bool = False) -> None:
    """`ConditionNotAdmitted` naming the first condition that may not be measured and why."""
    for condition in conditions:
        status, why = conformance_status(home, condition, memory_model, base_urls, any_upstream)
        if status not in ("conformant", "built_in"):
            raise ConditionNotAdmitted(f"{option}: condition '{condition}' is not admitted for evaluation: {why}")
