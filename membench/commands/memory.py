"""`membench memory check CONDITION`: the frozen conformance suite (producers/memory_systems/conformance.py)
against a configured memory system, recorded under its configuration's digest in
`$MEMBENCH_HOME/conformance/<digest>.json`, beside the admission funnel's `validations/`. `run` and
`score` refuse a library, external or plug-in condition without a passing record for the
configuration they would run, code and upstream included (`require_conformant`; what a record is
pinned to: producers/memory_systems/admission.py); docs/memory-systems.md.

Exit status: 0 conformant, 1 a gate failed (or the repair budget is spent), 2 usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from membench.errors import UsageError
from pipeline.settings import load_settings
from schemas.fields import did_you_mean


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
    from producers.memory_systems.admission import changes, repair_budget_spender
    from producers.memory_systems.conformance import REPAIR_BUDGET, SUITE_VERSION
    from producers.memory_systems.registry import (configuration, configuration_digest, is_model_driven,
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
    """A usage error naming the first condition that may not be measured and why."""
    for condition in conditions:
        status, why = conformance_status(home, condition, memory_model, base_urls, any_upstream)
        if status not in ("conformant", "built_in"):
            raise UsageError(f"{option}: condition '{condition}' is not admitted for evaluation: {why}")


@click.group()
def memory() -> None:
    """Memory systems: the conformance gate before evaluation."""


@memory.command("check")
@click.argument("condition")
@click.option("--json", "as_json", is_flag=True, help="print the record as JSON")
@click.option("--memory-model", "memory_model", metavar="MODEL", default=None,
              help="the model a library condition calls (as `run --memory-model`)")
@click.option("--model-base-url", "base_urls", multiple=True, metavar="[PROVIDER=]URL",
              help="the upstream its model and embedding calls reach through the gateway (as for `run`)")
@click.option("--model-timeout", type=click.FloatRange(0.1), default=120.0, show_default=True)
def check(condition: str, as_json: bool, memory_model: str | None, base_urls: tuple[str, ...],
          model_timeout: float) -> None:
    """Run the frozen conformance suite against CONDITION in two fresh processes and record it."""
    from membench.commands.model_options import parse_base_urls
    from producers.memory_systems.admission import describe, repair_budget_spender
    from producers.memory_systems.conformance import REPAIR_BUDGET, check as run_check, evidence_lines
    from producers.memory_systems.registry import (MEMORY_SYSTEMS, configuration, configuration_digest,
                                                   is_model_driven, needs_conformance)

    if condition not in MEMORY_SYSTEMS:
        raise UsageError(f"CONDITION: unknown condition '{condition}'{did_you_mean(condition, MEMORY_SYSTEMS)} "
                         f"(known: {', '.join(sorted(MEMORY_SYSTEMS))})")
    if is_model_driven(condition) and not (memory_model and base_urls):
        raise UsageError(f"{condition} calls a model through the gateway: give --memory-model MODEL and "
                         "--model-base-url URL")
    if memory_model and not is_model_driven(condition):
        raise UsageError(f"--memory-model: {condition} calls no model")
    urls = parse_base_urls(base_urls)
    settings = load_settings()
    config = configuration(condition, memory_model, urls)  # pinned to the code as it is before the suite runs
    digest = configuration_digest(config)
    ledger_path = attempts_path(settings.home, condition)
    ledger: dict[str, Any] = {"condition": condition, "budget": REPAIR_BUDGET,
                              "attempts": load_attempts(settings.home, condition)}
    earlier = [a for a in ledger["attempts"] if a["digest"] != digest]
    spender = repair_budget_spender(ledger["attempts"], digest, REPAIR_BUDGET)
    if needs_conformance(condition) and spender is not None:
        raise click.ClickException(f"{condition}: the repair budget is spent ({REPAIR_BUDGET} recorded attempts "
                                   f"with other settings, none conformant, the last conformance/"
                                   f"{spender['digest']}.json); this configuration is not checked")
    result = run_check(condition, memory_model, urls, model_timeout)
    ledger["attempts"] = earlier + [{"digest": digest, "verdict": result["verdict"], "failed": result["failed"]}]
    record = {"condition": condition, "configuration": config, "digest": digest, **result,
              "control": not needs_conformance(condition),
              "repair_budget": {"budget": REPAIR_BUDGET, "used": len(ledger["attempts"]),
                                "attempts": ledger["attempts"]}}
    path = record_path(settings.home, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    ledger_path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    ledger_path.write_text(json.dumps(ledger, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(record, indent=2, sort_keys=True))
    else:
        click.echo(f"# Conformance — {condition} (configuration {digest[:12]}{', control' if record['control'] else ''})")
        click.echo(f"pinned to: {describe(config)}")
        for gate, found in result["gates"].items():
            click.echo(f"- {gate}: {found['verdict']}")
            if found["verdict"] != "pass":  # the evidence, as --json records it: what leaked, which probe, the values
                for line in evidence_lines(found["evidence"]):
                    click.echo(f"    {line}")
        click.echo(f"verdict: {result['verdict']}" + (f" (failed: {', '.join(result['failed'])})" if result["failed"]
                                                        else "") + f"; recorded: conformance/{digest}.json; repair "
                   f"budget {len(ledger['attempts'])}/{REPAIR_BUDGET}")
    sys.exit(0 if result["verdict"] == "pass" else 1)
