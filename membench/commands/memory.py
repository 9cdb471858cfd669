"""`membench memory check CONDITION`: the frozen conformance suite (membench/memory_systems/conformance.py)
against a configured memory system, recorded under its configuration's digest in
`$MEMBENCH_HOME/conformance/<digest>.json`, beside the admission funnel's `validations/`. `run` and
`score` refuse a library, external or plug-in condition without a passing record for the
configuration they would run, code and upstream included (`require_conformant`; what a record is
pinned to: membench/memory_systems/admission.py); docs/memory-systems.md.

Exit status: 0 conformant, 1 a gate failed (or the repair budget is spent), 2 usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from membench.errors import UsageError
from membench.pipeline.settings import load_settings
# the records are read below the CLI (a run's admission, the report's conformance funnel); `check` writes them
from membench.memory_systems.conformance_records import (admission_record, attempts_path,  # noqa: F401
                                                          conformance_status, load_attempts, load_record,
                                                          record_path, records_of)
from membench.formats.fields import did_you_mean


def require_conformant(home: Path, conditions: list[str], memory_model: str | None, option: str,
                       base_urls: dict[str, str] | None = None, any_upstream: bool = False) -> None:
    """A usage error naming the first condition that may not be measured and why."""
    from membench.memory_systems.conformance_records import ConditionNotAdmitted, require_conformant as require

    try:
        require(home, conditions, memory_model, option, base_urls, any_upstream)
    except ConditionNotAdmitted as exc:
        raise UsageError(str(exc)) from None


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
    from membench.pipeline.model_gateway import parse_base_urls
    from membench.memory_systems.admission import describe, repair_budget_spender
    from membench.memory_systems.conformance import REPAIR_BUDGET, check as run_check, evidence_lines
    from membench.memory_systems.registry import (MEMORY_SYSTEMS, configuration, configuration_digest,
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
