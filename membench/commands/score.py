"""`membench score PACK --predictions FILE.jsonl`: score patches produced elsewhere, exactly as an
agent's output is scored (same runner, events, processors, warehouse), and write report.json.

The file is membench's own predictions format or SWE-bench's (`instance_id`, `model_name_or_path`,
`model_patch`; membench/runner/predictions.py, docs/exports/swebench.md): a SWE-bench record is scored
under its `condition` field, else `--condition`, else the pack's baseline, with seed 1 unless it
names one, and its `model_name_or_path` labels the agent unless `--agent-name` is given.

A condition is a memory system membench can run or a condition the pack declares (an imported
pack's source conditions, e.g. the A/B bench's `no_memory`, `remem`, `curated_file`): the memory of
scored predictions ran elsewhere, so a declared name that is no memory system here is a label, and
membench reads no memory under it (`score_conditions`)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import click

from membench.commands.cli_helpers import (ReportOptions, baseline_options, dsn_options, exit_if_gates_failed,
                                           run_embedded, strict_option, validate_run_set_id)
from membench.errors import UsageError
from membench.pipeline.settings import Settings
from membench.sandbox.registry import BACKENDS
from membench.formats.fields import did_you_mean


@click.command()
@click.argument("pack")
@click.option("--predictions", "predictions_path", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="JSON Lines: unit, condition, seed, patch, ... or SWE-bench's instance_id, model_name_or_path, "
              "model_patch")
@click.option("--agent-name", default=None, help="label of the agent that produced the patches "
              "(recorded as predictions:<name>; default: a SWE-bench file's model_name_or_path, else the file's stem)")
@click.option("--condition", "condition", default=None, help="the condition of SWE-bench records that name none "
              "(default: the pack's baseline, B0 or no_memory); native records always name theirs")
@click.option("--run-set", "run_set", default=None, help="run set id (default: derived from pack and file)")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="units scored concurrently")
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--read-budget", default=2000, show_default=True, type=click.IntRange(0), help="memory read budget (tokens)")
@click.option("--sign-key", "sign_key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Ed25519 private key (PEM): sign the run set's log root, as `membench run --sign-key` does")
@strict_option
@baseline_options
@dsn_options
def score(pack: str, predictions_path: Path, agent_name: str | None, condition: str | None, run_set: str | None,
          workers: int, sandbox_name: str, read_budget: int, sign_key: Path | None, strict: bool, baseline: str | None,
          study_path: Path | None, settings: Settings) -> None:
    """Score the given patches of PACK's tasks (a pack name or directory) under their conditions.

    Exit status as `membench run`'s: 3 with --strict when a validity gate failed (after everything is
    written); the failed gates are printed under the table either way."""
    from membench.packs.pack_resolver import open_pack, resolve_pack_dir
    from membench.runner.predictions import PredictionError, load_predictions
    from membench.formats.pack_format import PackError, load_pack

    validate_run_set_id(run_set)
    from membench.pipeline.report_inputs import check_baseline, load_study

    study = load_study(study_path)
    from membench.pipeline.run_request import load_signer

    signer = load_signer(sign_key)  # a bad key is a usage error before anything is written
    if settings.bus.startswith("kafka://"):
        raise UsageError("--bus: scoring predictions runs on the embedded bus only (file://)")
    try:  # everything is validated before anything is written (the finalized-pack cache included)
        skeleton = load_pack(resolve_pack_dir(pack))
        known = score_conditions(skeleton)
        if condition is not None and condition not in known:
            raise UsageError(f"--condition: unknown condition '{condition}'{did_you_mean(condition, known)} "
                             f"(known: {', '.join(known)})")
        checked = load_predictions(predictions_path, skeleton, known, condition)  # same units
        if condition is not None and not any(p.model for p in checked):
            raise UsageError("--condition: applies to SWE-bench records only, and "
                             f"{predictions_path} holds native records (each names its condition)")
        loaded = open_pack(pack, settings.home)
        predictions = load_predictions(predictions_path, loaded, known, condition)
    except (PackError, PredictionError) as exc:
        raise UsageError(str(exc)) from None
    check_baseline(sorted({p.condition for p in predictions}), baseline, study)  # before anything is scored
    from membench.commands.memory import require_conformant
    from membench.memory_systems.registry import MEMORY_SYSTEMS

    require_conformant(settings.home, sorted({p.condition for p in predictions} & set(MEMORY_SYSTEMS)), None,
                       "--predictions")
    digest = hashlib.sha256(predictions_path.read_bytes()).hexdigest()
    if condition is not None:  # the option changes which units the same file scores
        digest = hashlib.sha256(f"{digest}:condition={condition}".encode()).hexdigest()
    transcripts = "".join(p.transcript_sha256 for p in predictions)
    if transcripts:  # a changed transcript is a different input (ids without transcripts are unchanged)
        digest = hashlib.sha256((digest + transcripts).encode()).hexdigest()
    model = next((p.model for p in predictions if p.model), None)  # a SWE-bench file's model_name_or_path
    label = re.sub(r"[^A-Za-z0-9_.-]+", "-", agent_name or model or predictions_path.stem)
    label = re.sub(r"\.{2,}", ".", label).strip("-.") or "predictions"
    key = hashlib.sha256((loaded.digest + digest).encode()).hexdigest()[:8]
    # a plain name by construction: pack names are plain, the label is [A-Za-z0-9_.-] without '..'
    run_set = run_set or validate_run_set_id(f"{loaded.name[:64]}-predictions-{label.lower()[:40]}-{key}",
                                             "the derived run-set id")
    report = _score_embedded(loaded, predictions, f"predictions:{label}", run_set, workers, sandbox_name, read_budget,
                             settings, signer, ReportOptions(baseline, study, pack))
    exit_if_gates_failed(report, strict)


def score_conditions(pack) -> list[str]:
    """The conditions a prediction may name: membench's memory systems (external adapters included),
    and the conditions the pack declares — for an imported pack its source benchmark's names, such as
    the A/B bench's `remem`. The memory of scored predictions ran elsewhere, so a declared name that
    is no memory system here is a label (`RunConfig.label_conditions`): membench records the memories
    the pack declares it held (`source_memories`, membench/memory_systems/declared.py), so its memory
    contract applies, and reads none for a label the pack declares nothing for. The model-driven policies (B3-llm, …) are left out:
    `score` starts no memory model for them."""
    from membench.memory_systems.registry import MEMORY_SYSTEMS, is_model_driven

    return sorted({c for c in MEMORY_SYSTEMS if not is_model_driven(c)} | set(pack.conditions))


def _score_embedded(pack, predictions, agent_name, run_set, workers, sandbox_name, read_budget, settings,
                    signer=None, report_options=None):
    from membench.runner.predictions import PredictionAgent, group_units
    from membench.runner.grid import RunConfig, RunUnit, code_digest

    units = {RunUnit(pack.name, unit, condition, seed): by_session
             for (unit, condition, seed), by_session in sorted(group_units(predictions).items())}
    from membench.memory_systems.registry import MEMORY_SYSTEMS

    labels = frozenset(pack.conditions) - set(MEMORY_SYSTEMS)
    config = RunConfig(run_set, agent_name, read_budget=read_budget, code_digest=code_digest(), label_conditions=labels)
    return run_embedded(pack, list(units), config, sandbox_name, settings, workers,
                        agent_for=lambda unit: PredictionAgent(agent_name, units[unit]), verb="score", signer=signer,
                        report_options=report_options)
