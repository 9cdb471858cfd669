"""A grid run as a library call: `run_grid(RunRequest(...))` plans, checks and runs a grid on the
embedded pipeline and returns a `RunOutcome`, as `membench run` does, without drawing a terminal or
ending the process. `membench.api` re-exports it for Python callers.

The rules that make a run legal live here, one function each, and both the call and `membench run`
apply them (the command in its own order, with its CLI-only checks between): an illegal request
raises `RequestInvalid` (a `RunRefused`) before anything is written; the CLI shows it as a usage
error (exit status 2). A warehouse or log that does not check raises `AuditFailed`; a stop, a log
that does not verify, a grid stopped for its harness are fields of the outcome. Model agents
(`openai:MODEL`, `codex`, `claude-code`) and model-driven memory conditions (B3-llm, DF-llm, …) run
through the model gateway `RunRequest.model` configures (`membench.pipeline.model_gateway.ModelSettings`, what
`--model-*` and `--memory-model` say): the call starts it for the run set after probing its models,
as `membench run` does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from membench.pipeline.grid_run import RunOutcome, run_embedded
from membench.pipeline.model_gateway import ModelSettings
from membench.pipeline.run_errors import AuditFailed, ReportRefused, RequestInvalid, RunRefused
from membench.pipeline.settings import Settings, load_settings

if TYPE_CHECKING:
    from membench.pipeline.run_display import RunDisplay

__all__ = ["AuditFailed", "ModelSettings", "ReportRefused", "RequestInvalid", "RunOutcome", "RunRefused", "RunRequest",
           "admit_conditions", "admit_refused_traps", "check_compare", "check_conditions", "check_run_set_id",
           "load_signer", "load_skeleton", "make_run_agent", "open_finalized", "refuse_refsol_without_solutions",
           "run_grid"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class RunRequest:
    """One grid, as `membench run PACK` takes it (the option each field mirrors in brackets)."""

    pack: str  # a built-in pack's name or a pack directory [PACK]
    conditions: tuple[str, ...] = ("B0", "B5")  # memory conditions [--conditions]
    seeds: tuple[int, ...] = (1, 2, 3)  # [--seeds]
    agent: str = "scripted:memory-literal"  # scripted:*, command:PROGRAM, openai:MODEL, codex, claude-code [--agent]
    # units run at once; None: `membench run`'s default for the agent (cores for a CPU-bound agent,
    # more for one that waits on a model: `membench.pipeline.worker_count.default_workers`) [--workers]
    workers: int | None = None
    run_set: str | None = None  # None: derived from pack, agent and grid, so a re-run resumes [--run-set]
    sandbox: str = "bwrap"  # [--sandbox]
    read_budget: int = 2000  # memory read budget, tokens [--read-budget]
    settings: Settings | None = None  # MEMBENCH_HOME, bus and warehouse; None: from the environment
    baseline: str | None = None  # [--baseline]
    study: Any = None  # a `membench.reports.study.Study`, a study file's Path, or None: the default study [--study]
    compare: tuple[tuple[str, str], ...] = ()  # pairs answered in the report's `requested` [--compare A:B]
    include_refused: bool = False  # [--include-refused]
    sign_key: Path | None = None  # Ed25519 private key (PEM) that signs the log root [--sign-key]
    stop_grace: float = 30.0  # seconds running units get after a first SIGINT/SIGTERM [--stop-grace]
    # how model agents and model-driven conditions reach their models [--model-*, --memory-model, --max-steps, …]
    model: ModelSettings = field(default_factory=ModelSettings)


def check_run_set_id(run_set: str | None, where: str = "--run-set") -> None:
    """A run-set id becomes a directory under runs/ and a value in warehouse queries: a plain name
    (`membench.formats.fields.PLAIN_NAME`) or None (derived)."""
    from membench.formats.fields import PLAIN_NAME_RULE, is_plain_name

    if run_set is not None and not is_plain_name(run_set):
        raise RequestInvalid(f"{where}: invalid run-set id {run_set!r} ({PLAIN_NAME_RULE})")


def load_skeleton(pack: str):
    """The pack as authored (not finalized yet): what the conditions and the agent are checked against."""
    from membench.packs.pack_resolver import resolve_pack_dir
    from membench.formats.pack_format import PackError, load_pack

    try:
        return load_pack(resolve_pack_dir(pack))
    except PackError as exc:
        raise RequestInvalid(str(exc)) from None


def check_conditions(conditions: list[str], skeleton) -> None:
    """Every condition is a memory system membench can run; a paper ablation that cannot be defined
    here, or a source benchmark's own condition name, is named as such."""
    from membench.memory_systems.registry import MEMORY_SYSTEMS, undefined_ablation
    from membench.formats.fields import did_you_mean

    if not conditions:
        raise RequestInvalid("--conditions: empty list")
    for condition in conditions:
        if condition in MEMORY_SYSTEMS:
            continue
        if undefined_ablation(condition):  # docs/design.md §5
            raise RequestInvalid(f"--conditions: {undefined_ablation(condition)}; it is not run")
        if condition in skeleton.conditions:  # e.g. an imported A/B pack's remem
            raise RequestInvalid(f"--conditions: '{condition}' is a condition of pack '{skeleton.name}' (its source "
                                 "benchmark's name), not a memory system membench can run; score predictions made "
                                 "under it with `membench score`, or run a memory system "
                                 f"(known: {', '.join(sorted(MEMORY_SYSTEMS))})")
        raise RequestInvalid(f"--conditions: unknown condition '{condition}'{did_you_mean(condition, MEMORY_SYSTEMS)} "
                             f"(known: {', '.join(sorted(MEMORY_SYSTEMS))})")


def check_compare(pairs, conditions: list[str]) -> tuple[tuple[str, str], ...]:
    """The --compare pairs, each once: two different conditions of the run."""
    out: list[tuple[str, str]] = []
    for a, b in pairs:
        if a == b:
            raise RequestInvalid(f"--compare: '{a}:{b}' compares a condition with itself")
        for side in (a, b):
            if side not in conditions:
                raise RequestInvalid(f"--compare {a}:{b}: condition '{side}' is not in the run set (its conditions: "
                                     f"{', '.join(conditions) or 'none'})")
        if (a, b) not in out:
            out.append((a, b))
    return tuple(out)


def make_run_agent(agent: str, loop=None, with_gateway: bool = False):
    from membench.agents.registry import make_agent

    try:
        return make_agent(agent, loop, with_gateway=with_gateway)
    except ValueError as exc:
        raise RequestInvalid(f"--agent: {exc}") from None


def admit_conditions(home: Path, conditions: list[str], study, memory_model: str | None, say: Say,
                     base_urls: dict[str, str] | None = None, any_upstream: bool = False) -> list[str]:
    """The conditions admitted for evaluation: a library, external or plug-in condition needs a passing
    conformance record of the configuration it would run (`membench memory check`). Under a study
    with families a condition without one is dropped (said, its registered slots stay at p = 1);
    otherwise it is refused."""
    from membench.memory_systems.conformance_records import (ConditionNotAdmitted, conformance_status,
                                                              require_conformant)

    if study is not None and study.families:
        statuses = {c: conformance_status(home, c, memory_model, base_urls=base_urls,
                                           any_upstream=any_upstream) for c in conditions}
        dropped = [c for c in conditions if statuses[c][0] in ("missing", "failed", "budget_spent")]
        for c in dropped:
            say(f"--conditions: {c} is conformance-unavailable, not run; its registered slots stay in their "
                f"families at p = 1 ({statuses[c][1]})")
        conditions = [c for c in conditions if c not in dropped]
        if not conditions:
            raise RequestInvalid("--conditions: no condition is admitted for evaluation")
    try:
        require_conformant(home, conditions, memory_model, "--conditions", base_urls=base_urls,
                           any_upstream=any_upstream)
    except ConditionNotAdmitted as exc:
        raise RequestInvalid(str(exc)) from None
    return conditions


def refuse_refsol_without_solutions(pack) -> None:
    """`scripted:refsol` applies the scored session's reference solution; on a pack that carries none
    (an imported coding-agent A/B pack: that benchmark publishes no solutions) it would change
    nothing and score 0 silently, so it is refused before anything runs."""
    missing = [seq.seq_id for seq in pack.sequences if not pack.solution(seq, seq.scored_session).files]
    if missing:
        shown = ", ".join(f"'{m}'" for m in missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise RequestInvalid(f"--agent scripted:refsol: pack '{pack.name}' has no reference solution for the scored "
                             f"session of {len(missing)} of its {len(pack.sequences)} sequences ({shown}; "
                             f"hidden/<seq>/s<index>.solution.json has no files), so the agent would change nothing "
                             "and score 0; imported packs carry none because their source publishes none")


def load_signer(sign_key: Path | None):
    """The Ed25519 private key of SIGN_KEY, read before anything is written."""
    if sign_key is None:
        return None
    from membench.audit.log_root_record import LogRootError, load_signing_key

    try:
        return load_signing_key(sign_key)
    except LogRootError as exc:
        raise RequestInvalid(f"--sign-key: {exc}") from None


def open_finalized(pack: str, home: Path):
    """The finalized pack (its secrets placed, cached under MEMBENCH_HOME/packs): a bad placement is
    refused, not a traceback."""
    from membench.packs.pack_resolver import open_pack
    from membench.formats.pack_format import PackError

    try:
        return open_pack(pack, home)
    except PackError as exc:
        raise RequestInvalid(str(exc)) from None


def admit_refused_traps(spec: str, pack, home: Path, include_refused: bool, say: Say) -> None:
    """A pack with traps `membench validate` refused (its record for this finalized pack) is not run
    unless INCLUDE_REFUSED: refused naming them and the two ways on. With it, one line says which
    are measured (the report says it again above every number)."""
    from membench.pipeline.report_inputs import refused_traps

    in_pack = {seq.seq_id for seq in pack.sequences}  # an admitted pack's record lists the traps it left out
    refused = {seq_id: why for seq_id, why in refused_traps(home, pack.digest).items() if seq_id in in_pack}
    if not refused:
        return
    named = "; ".join(f"{seq_id} ({why or 'refused'})" for seq_id, why in sorted(refused.items()))
    if include_refused:
        say(f"--include-refused: measuring {len(refused)} trap(s) `membench validate` refused: {named}")
        return
    raise RequestInvalid(f"{len(refused)} of {len(pack.sequences)} traps of pack '{pack.name}' were refused by "
                         f"`membench validate`: {named}. Run the admitted traps only: `membench validate {spec} "
                         f"--admitted DIR`, then `membench run DIR`; or measure them anyway with --include-refused "
                         "(the report then says so at the top)")


def report_builder(home: Path, baseline: str | None, study, pack_spec: str | None,
                   compare: tuple[tuple[str, str], ...] = ()):
    """What `run_embedded` calls to build the report at the end: the full report (canary proof,
    admission and conformance funnels, `membench.pipeline.report_inputs`) with these options."""
    from membench.pipeline.report_inputs import build_full_report
    from membench.warehouse.read_model import WarehouseReadModel

    def build(warehouse, run_set: str, blob_dir: Path | None):
        return build_full_report(WarehouseReadModel(warehouse), run_set, home, baseline=baseline, study=study, pack_spec=pack_spec,
                                 blob_dir=blob_dir, compare=compare)

    return build


def run_grid(request: RunRequest, display: RunDisplay | None = None) -> RunOutcome:
    """Check REQUEST by the rules of a legal run, then run its grid on the embedded pipeline and
    return the `RunOutcome` (the report, its directory, the units, the log's verification, how it
    ended). DISPLAY shows the run's account and progress (`membench.pipeline.run_display`; default: nothing).

    Raises `RequestInvalid` for a request that breaks a rule or whose models fail their pre-flight
    probe (nothing written), `RunRefused` when the scoring pre-flight fails or the run set's recorded
    environment differs, `AuditFailed` when the
    warehouse disagrees with the log, `ReportRefused` when the units ran but the report cannot be
    built. A SIGINT/SIGTERM during the call (main thread) stops the grid cleanly: the outcome says
    `stopped="signal"`; a second kills the running units' sandboxes, and a third raises
    KeyboardInterrupt (the call ends no process: `membench run` gives the grid its hard exit)."""
    from membench.pipeline.model_gateway import check_model_settings, model_run_set, parse_base_urls, run_set_gateway
    from membench.pipeline.run_display import SilentDisplay
    from membench.pipeline.run_environment import prepare_scoring
    from membench.agents.model_agents import LoopLimits
    from membench.runner.grid import RunConfig, code_digest, plan_grid
    from membench.memory_systems.registry import is_model_driven
    from membench.sandbox.registry import BACKENDS

    display = display if display is not None else SilentDisplay()
    say: Say = lambda text: display.print(text, highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    settings = request.settings or load_settings()
    if not settings.bus.startswith("file://"):
        raise RequestInvalid(f"--bus {settings.bus}: the library call runs on the embedded bus (file://); a Kafka "
                             "run set is started with `membench run --bus kafka://…`")
    if request.sandbox not in BACKENDS:
        raise RequestInvalid(f"--sandbox: unknown backend '{request.sandbox}' (known: {', '.join(BACKENDS)})")
    workers, workers_why = request.workers, None
    if workers is None:
        from membench.pipeline.worker_count import default_workers

        workers, workers_why = default_workers(request.agent)
    if workers < 1 or request.read_budget < 0 or request.stop_grace < 0:
        raise RequestInvalid("--workers must be at least 1, --read-budget and --stop-grace at least 0")
    if not request.seeds:
        raise RequestInvalid("--seeds: empty list")
    check_run_set_id(request.run_set)
    conditions = list(request.conditions)
    skeleton = load_skeleton(request.pack)
    check_conditions(conditions, skeleton)
    from membench.pipeline.report_inputs import check_baseline, load_study

    study = load_study(request.study) if request.study is None or isinstance(request.study, Path) else request.study
    check_baseline(conditions, request.baseline, study)
    pairs = check_compare(request.compare, conditions)
    model = request.model
    loop = LoopLimits(model.max_steps, model.max_tokens)
    made = make_run_agent(request.agent, loop, with_gateway=model.used)
    check_model_settings(model, made, [c for c in conditions if is_model_driven(c)])
    # the admission is the record of this code against this upstream (a replay calls none)
    conditions = admit_conditions(settings.home, conditions, study, model.memory_model, say,
                                  base_urls=parse_base_urls(model.base_urls), any_upstream=bool(model.replay))
    if request.agent == "scripted:refsol":
        refuse_refsol_without_solutions(skeleton)
    signer = load_signer(request.sign_key)
    loaded = open_finalized(request.pack, settings.home)
    admit_refused_traps(request.pack, loaded, settings.home, request.include_refused, say)
    seeds = [int(s) for s in request.seeds]
    run_set = request.run_set or model_run_set(loaded, request.agent, model, conditions, seeds)
    gateway = run_set_gateway(model, made, conditions, settings.runs_dir, run_set, workers, say)
    config = RunConfig(run_set, request.agent, read_budget=request.read_budget, code_digest=code_digest(),
                       gateway=gateway, loop=loop, memory_model=model.memory_model)
    prepare_scoring(loaded, request.sandbox, settings.runs_dir, run_set)  # before anything is written
    return run_embedded(loaded, plan_grid(loaded, conditions, seeds), config, request.sandbox, settings,
                        workers, signer=signer, stop_grace=request.stop_grace, display=display,
                        build_report=report_builder(settings.home, request.baseline, study, request.pack, pairs),
                        workers_note=None if workers_why is None else f"workers: {workers} ({workers_why})")
