"""`membench transfer STUDY`: run EngramBench's transfer protocol (docs/transfer.md).

The learning phase runs first (one learning unit per seed: learning tasks in order, each distilled
by the scripted distiller or the sandboxed agent's own session, banks frozen), then the transfer
units (project × condition × seed) against the frozen banks; `--phase` runs one of the two.
Embedded (default) it ends with the report (report.json with a `transfer` section, report.md,
report.html) and the log root, as `membench run` does; on Kafka it publishes and `membench sink` /
`membench report` follow. The phases run in `membench/pipeline/transfer_run.py`; this module is the command.
"""

from __future__ import annotations

from pathlib import Path

import click

from membench.commands.cli_helpers import (dsn_options, parse_list, parse_seeds, require_kafka, require_scoring,
                                           validate_run_set_id)
from membench.commands.model_options import model_options
from membench.errors import UsageError
from membench.pipeline.model_gateway import ModelSettings, check_model_settings, refuse_self_replay, start_gateway
from membench.pipeline.settings import Settings
from membench.sandbox.registry import BACKENDS
from membench.formats.fields import did_you_mean

BUILT_IN = Path(__file__).resolve().parent.parent.parent / "fixtures"


def resolve_study(spec: str) -> Path:
    """A built-in study name (a directory of fixtures/ with a study.json) or a study directory."""
    built_in = BUILT_IN / spec
    if "/" not in spec and (built_in / "study.json").is_file():
        return built_in
    return Path(spec)


def default_transfer_run_set(study, agent: str, conditions: list[str], seeds: list[int], user: str = "scripted",
                             replay: bool = False) -> str:
    """As `membench run`'s default id; a model user, or a replay, makes a run set of its own (the
    scripted user's ids stay as they were)."""
    from membench.runner.grid import default_run_set

    key = agent + ("" if user == "scripted" else f"+user={user}") + ("+replay" if replay else "")
    run_set = default_run_set(study.name, study.digest, key, conditions, seeds)
    if key == agent:
        return run_set
    # default_run_set names the run set after the key's last `:` part; keep the agent's name in it
    short = default_run_set(study.name, study.digest, agent, conditions, seeds).rsplit("-", 1)[0]
    return f"{short}-{run_set.rsplit('-', 1)[1]}"


class _UserNeedsGateway:
    """The agent as check_model_settings sees it when the simulated user is a model: the gateway is used."""

    needs_gateway = True

    def __init__(self, agent):
        self.name = agent.name


@click.command()
@click.argument("study")
@click.option("--agent", default="scripted:memory-literal", show_default=True)
@click.option("--conditions", default="no_memory,learned_bank,native_bank,ablated_bank", show_default=True,
              help="comma-separated transfer conditions")
@click.option("--seeds", default="1", show_default=True, help="comma-separated integer seeds")
@click.option("--phase", type=click.Choice(["all", "learning", "transfer"]), default="all", show_default=True,
              help="run both phases, or only one (transfer needs a completed learning phase)")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64), help="transfer units run concurrently")
@click.option("--run-set", "run_set", default=None, help="run set id (default: derived from study, agent, grid)")
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--read-budget", default=2000, show_default=True, type=click.IntRange(0), help="memory read budget (tokens)")
@click.option("--user", "user", default="scripted", show_default=True, metavar="scripted|model:MODEL",
              help="the simulated user: the deterministic scripted one, or a model through the model gateway "
                   "(--model-base-url with the key in MEMBENCH_MODEL_API_KEY, or --model-replay RUN_SET)")
@model_options
@dsn_options
def transfer(study: str, agent: str, conditions: str, seeds: str, phase: str, workers: int, run_set: str | None,
             sandbox_name: str, read_budget: int, user: str, model: ModelSettings, settings: Settings) -> None:
    """Run the transfer study STUDY (a built-in name such as transfer-v1, or a study directory)."""
    from membench.agents.model_agents import LoopLimits
    from membench.agents.registry import make_agent
    from membench.runner.grid import RunConfig, code_digest
    from membench.transfer_protocol.model_user import model_of
    from membench.formats.transfer_format import CONDITIONS, TransferFormatError, load_study

    validate_run_set_id(run_set)
    condition_list = parse_list(conditions, "--conditions")
    for c in condition_list:
        if c not in CONDITIONS:
            raise UsageError(f"--conditions: unknown transfer condition '{c}'{did_you_mean(c, CONDITIONS)} "
                             f"(known: {', '.join(CONDITIONS)})")
    seed_list = parse_seeds(seeds)
    loop = LoopLimits(model.max_steps, model.max_tokens)
    try:
        made = make_agent(agent, loop, with_gateway=model.used)
    except ValueError as exc:
        raise UsageError(f"--agent: {exc}") from None
    try:
        user_model = model_of(user)
    except ValueError as exc:
        raise UsageError(f"--user: {exc}") from None
    if user_model is not None and not (model.base_urls or model.replay):
        raise UsageError(f"--user {user}: a model user needs --model-base-url URL (with the key in "
                         "MEMBENCH_MODEL_API_KEY) or --model-replay RUN_SET")
    if model.used and user_model is None and not getattr(made, "needs_gateway", False):
        raise UsageError(f"--agent {made.name} and the scripted user call no model: --model-* options apply to "
                         "--user model:MODEL and to model agents")
    check_model_settings(model, _UserNeedsGateway(made) if user_model is not None else made)
    try:  # everything is validated before anything is written
        loaded = load_study(resolve_study(study))
    except TransferFormatError as exc:
        raise UsageError(str(exc)) from None
    for project in loaded.projects:  # e.g. a published hard cap with no case mapping: it can never fire
        for warning in project.evaluator.warnings:
            click.echo(f"warning: {warning}", err=True)
    run_set = run_set or default_transfer_run_set(loaded, agent, condition_list, seed_list, user,
                                                  replay=bool(model.replay))
    refuse_self_replay(model, run_set)
    from membench.gateway.preflight import targets_for

    recording = None
    if model.replay and settings.bus.startswith("kafka://"):  # the recorded run set is on the topics
        from membench.pipeline.distributed.runner_models import ModelsRefused, recording_from_kafka
        from membench.gateway.recording import RecordingError

        require_kafka(settings.bus)
        try:
            recording = recording_from_kafka(settings, model.replay)
        except (ModelsRefused, RecordingError) as exc:
            raise UsageError(str(exc)) from None
    gateway = start_gateway(model, settings.runs_dir, run_set, targets_for(made, user_model=user_model),
                            workers=workers, recording=recording, say=lambda text: click.echo(text, err=True))
    config = RunConfig(run_set, made.name, read_budget=read_budget, code_digest=code_digest(),
                       blob_dir=settings.runs_dir / run_set / "blobs", gateway=gateway, loop=loop, user=user)

    def new_agent():  # one agent object per unit
        return make_agent(agent, loop, with_gateway=model.used)

    from membench.pipeline.grid_run import RunRefused
    from membench.pipeline.transfer_run import run_transfer_embedded, run_transfer_kafka

    from membench.runner.scoring_preflight import study_probe_cases

    from membench.commands.terminal_display import TerminalDisplay

    if settings.bus.startswith("kafka://"):
        require_kafka(settings.bus)
        require_scoring(None, sandbox_name, study_probe_cases(loaded))
        run_transfer_kafka(loaded, condition_list, seed_list, phase, new_agent, workers, config, sandbox_name, settings,
                           display=TerminalDisplay())
        click.echo(run_set)  # stdout: what a script runs `membench report` on
        return
    try:
        from membench.pipeline.run_environment import prepare_scoring

        prepare_scoring(None, sandbox_name, settings.runs_dir, run_set, study_probe_cases(loaded))
        run_transfer_embedded(loaded, condition_list, seed_list, phase, new_agent, workers, config, sandbox_name,
                              settings, display=TerminalDisplay())
    except RunRefused as exc:
        raise UsageError(str(exc)) from None
