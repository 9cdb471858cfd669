"""Running a transfer study's units (docs/transfer.md).

Units: one learning unit per seed (`<study>/learning/learning/<seed>`), then one transfer unit per
(project, condition, seed) (`<study>/<project>/<condition>/<seed>`). The learning unit runs the
learning tasks in order, one session each (memory: the skills distilled so far), scores each by
its hidden oracle (membench/sandbox/scoring.py), distils a passed task into a skill, and at the end freezes
the learned bank, its one-skill-ablated copy and a copy of the study's native bank, one
`SkillBankFrozen` event each. A transfer unit verifies its bank against the recorded digest
(`skill_bank_modified` excludes the unit, before and after the run), then holds the conversation
plan_handoff → implementing → delivery → delivery_review (→ implementing again while the public
check fails, up to the scenario's rounds) → freezing → testing → test_feedback → finished.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from membench.agents.base import AgentTask
from membench.bus.emitter import Listener, RunEmitter
from membench.gateway.server import ModelUnavailable
from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.skill_bank import SkillBankMemory
from membench.memory_systems.text import tfidf_scores
from membench.runner.grid import (AFTER_VERDICT, HARNESS_FAULT, PATCH_BROKE_SCORING, RunConfig, RunUnit, oracle_base_score,
                            oracle_isolation_proven, patch_produced, run_id_for, settle_harness_fault, verdict_payload)
from membench.transfer_protocol.agent_bank import (AGENT, SCRIPTED, MountedBankAgent, distill_instruction,
                                           distill_with_agent, runs_in_sandbox)
from membench.transfer_protocol.bank import (ABLATED, CONDITION_BANKS, LEARNED, NATIVE, check_frozen, copy_bank, distill,
                                     freeze, remove_bank, write_skill)
from membench.transfer_protocol.evaluator import (EVALUATOR_ISOLATION, freeze_submission, public_check, run_evaluator,
                                          submission_tree)
from membench.transfer_protocol.model_user import ModelUser, model_of
from membench.transfer_protocol.user import ScriptedUser
from membench.sandbox.base import IsolationUnavailable, Sandbox
from membench.sandbox.scoring import HarnessFault, score_session
from membench.sandbox.workspace import diff_trees, render_patch, render_patch_bounded, snapshot, tree_digest, write_files
from membench.schemas.events import bounded_text
from membench.formats.transfer_format import Project, Study

LEARNING = "learning"


@dataclass(frozen=True)
class FrozenBank:
    path: Path
    digest: str


def learning_unit(study: Study, seed: int) -> RunUnit:
    return RunUnit(study.name, LEARNING, LEARNING, seed)


def plan_transfer(study: Study, conditions: list[str], seeds: list[int]) -> list[RunUnit]:
    return [RunUnit(study.name, p.project_id, c, s) for p in study.projects for c in conditions for s in seeds]


def bank_dir(banks_root: Path, seed: int, bank: str) -> Path:
    return Path(banks_root) / f"s{seed}" / bank


def _turn(emitter: RunEmitter, role: str, text: str, latency_ms: int = 0, source_kind: str | None = None,
          visibility: str = "agent") -> None:
    emitter.emit("Turn", {"role": role, "text": bounded_text(text), "source_event_id": None, "source_kind": source_kind,
                          "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0,
                          "latency_ms": latency_ms}, visibility=visibility)


def _run_started(emitter: RunEmitter, study: Study, unit: RunUnit, agent, config: RunConfig, attempt: int,
                 fixture_digest: str, bank_digest: str | None) -> None:
    emitter.emit("RunStarted", {
        "suite": unit.suite, "task": unit.task, "condition": unit.condition, "seed": unit.seed,
        "agent": agent.name, "agent_kind": agent.kind, "model": getattr(agent, "model", None),
        "budgets": {"memory_read_tokens": config.read_budget, "oracle_timeout_s": int(config.oracle_timeout_s)},
        "code_digest": config.code_digest, "pack_digest": study.digest, "fixture_digest": fixture_digest,
        "skill_bank_digest": bank_digest, "attempt": attempt, "construct": None, "family": "transfer"},
        visibility="harness")


@dataclass
class _Progress:
    agent_acted: bool = False  # once an agent was started, a harness exception fails the run (below)


def _close(emitter: RunEmitter, body, progress: _Progress | None = None) -> str:
    """Run BODY (which emits the run's events); close the run with RunEnded whatever happens. A
    harness exception before the agent was started is the unit's error (excluded); after, the
    agent may have provoked it, so the run completes as `harness_error:…` with what it did not
    reach unpassed — an agent cannot remove its cell by crashing the harness (docs/design.md §5)."""
    status, error_type = "completed", None
    try:
        result = body()
        if result is not None:
            status, error_type = result
    except (IsolationUnavailable, HarnessFault) as exc:
        status, error_type = "excluded", getattr(exc, "reason", "isolation_unavailable")
        emitter.session_index = -1
        _turn(emitter, "system", str(exc), visibility="harness")
    except Exception as exc:  # a harness bug still closes the run, saying what broke
        status, error_type = (("completed", f"harness_error:{type(exc).__name__}")
                              if progress is not None and progress.agent_acted
                              else ("error", f"task_exception:{type(exc).__name__}"))
        emitter.session_index = -1
        _turn(emitter, "system", "".join(traceback.format_exception(exc)), source_kind="harness_error",
              visibility="harness")
    emitter.session_index = -1
    emitter.emit("RunEnded", {"status": status, "error_type": error_type}, visibility="harness")
    return emitter.run_id


def _emit_patch(emitter: RunEmitter, start: dict[str, bytes], after: dict[str, bytes], config: RunConfig) -> None:
    diff = diff_trees(start, after)
    production = render_patch_bounded(start, diff, diff.production)
    stripped = render_patch_bounded(start, diff, diff.tests + diff.git)
    for name, rendered in (("production_diff", production), ("stripped_diff", stripped)):
        if rendered.truncated:  # the stored diff is cut (membench/sandbox/workspace.py DIFF_STORE_LIMIT): say so
            _turn(emitter, "system", f"{name}: kept {len(rendered.text.encode())} of {rendered.full_bytes} bytes",
                  source_kind="diff_truncated", visibility="harness")
    emitter.emit("PatchProduced", patch_produced(diff, production.text, stripped.text, config.blob_dir))


def _read_skills(items: list[MemoryItem], query: str, budget: int) -> MemoryContext:
    """The distilled-so-far skills a learning task sees: TF-IDF order, whole skills within budget."""
    if not items:
        return MemoryContext((), (), budget)
    scores = tfidf_scores([i.text for i in items], query)
    order = sorted(range(len(items)), key=lambda i: (-float(scores[i]), i))
    admitted, used = [], 0
    for i in order:
        if scores[i] > 0 and used + items[i].tokens <= budget:
            admitted.append(items[i])
            used += items[i].tokens
    return MemoryContext(tuple(admitted), tuple(items[i].memory_id for i in order), budget)


def _memory_read(emitter: RunEmitter, query: str, context: MemoryContext) -> None:
    emitter.emit("MemoryRead", {
        "query": bounded_text(query), "candidates": list(context.candidates),
        "admitted_ids": [i.memory_id for i in context.items], "tokens_admitted": context.tokens_admitted,
        "token_budget": context.token_budget, "context": bounded_text(context.render())})


# ------------------------------------------------------------------------------------------ learning
def run_learning(study: Study, seed: int, config: RunConfig, sandbox: Sandbox, publish: Listener, agent,
                 banks_root: Path, attempt: int = 1) -> str:
    """The learning phase of one seed; writes and freezes the banks under banks_root/s<seed>/."""
    unit = learning_unit(study, seed)
    emitter = RunEmitter(config.run_set, run_id_for(config.run_set, unit, attempt), unit.unit_id, publish)
    _run_started(emitter, study, unit, agent, config, attempt,
                 tree_digest({t.task_id: t.instruction.encode() for t in study.learning}), None)

    distiller = AGENT if runs_in_sandbox(agent) else SCRIPTED
    progress = _Progress()

    def body():
        learned = bank_dir(banks_root, seed, LEARNED)
        if learned.exists():  # a retried attempt distils afresh
            remove_bank(learned)
        learned.mkdir(parents=True)
        skills: list[MemoryItem] = []
        by_task: dict[str, set[str]] = {}  # learning task -> the skills its distillation wrote (the ablation's unit)
        for index, task in enumerate(study.learning):
            emitter.session_index = index
            start = snapshot(task.repo)
            with tempfile.TemporaryDirectory(prefix="membench-learn-") as tmp:
                workspace = Path(tmp) / "workspace"
                write_files(start, workspace)
                emitter.emit("SessionStarted", {
                    "session_index": index, "instruction": bounded_text(task.instruction), "start_state": "clean",
                    "workspace_digest": tree_digest(start), "scored": True, "oracle_id": task.task_id})
                _turn(emitter, "user", task.instruction, source_kind="instruction")
                context = _read_skills(skills, task.instruction, config.read_budget)
                _memory_read(emitter, task.instruction, context)
                progress.agent_acted = True
                outcome = agent.act(AgentTask(task.instruction, workspace, context, task.solution, sandbox=sandbox,
                                              gateway=config.gateway), emitter)
                result = score_session(sandbox, start, workspace, task.oracle, config.oracle_timeout_s)
                if result.outcome == "isolation_unavailable" and not oracle_isolation_proven(
                        sandbox, start, task.oracle, config.oracle_timeout_s):  # the agent's tree broke scoring
                    _turn(emitter, "system", "scoring could not start on the agent's tree but starts on the "
                                             f"task's base checkout: {result.detail}", source_kind="isolation_probe",
                          visibility="harness")
                    result = replace(result, outcome=PATCH_BROKE_SCORING)
                elif result.harness_fault:
                    result = settle_harness_fault(emitter, result, lambda: oracle_base_score(
                        sandbox, start, task.oracle, config.oracle_timeout_s))
                _emit_patch(emitter, start, result.scored_tree, config)
                emitter.emit("OracleVerdict", verdict_payload(task.task_id, result), visibility="harness")
                if result.outcome == "isolation_unavailable":
                    raise IsolationUnavailable(result.detail)
                if result.outcome == HARNESS_FAULT:
                    raise HarnessFault(result.harness_fault)
                emitter.emit("SessionEnded", {"session_index": index, "status": outcome.status})
                if runs_in_sandbox(agent):  # the agent distils in its own sandbox session
                    by_task[task.task_id] = _agent_distillation(emitter, agent, sandbox, config, learned, task, start,
                                                                result, skills, index)
                elif result.outcome == "pass":  # only verified practice becomes a skill
                    diff = diff_trees(start, result.scored_tree)
                    text = distill(task.instruction, render_patch(start, diff, diff.production), task.task_id)
                    write_skill(learned, task.task_id, text)
                    _skill_written(emitter, skills, index, task.task_id, text)
        emitter.session_index = -1
        ablated = bank_dir(banks_root, seed, ABLATED)
        # the ablated task's skill: the scripted distiller names it by the task; an agent's are the
        # skills its distillation session after that task wrote (created or changed)
        copy_bank(learned, ablated, without=frozenset(by_task.get(study.ablate_skill, ())) if runs_in_sandbox(agent)
                  else study.ablate_skill)
        native = bank_dir(banks_root, seed, NATIVE)
        copy_bank(study.native_bank, native)
        for name, path, ablated_skill in ((LEARNED, learned, None), (ABLATED, ablated, study.ablate_skill),
                                          (NATIVE, native, None)):
            digest, files = freeze(path)
            emitter.emit("SkillBankFrozen", {"bank": name, "digest": digest, "files": files,
                                             "ablated_skill": ablated_skill,
                                             "distiller": None if name == NATIVE else distiller},
                         visibility="harness")
        return None

    return _close(emitter, body, progress)


def _skill_written(emitter: RunEmitter, skills: list[MemoryItem], index: int, name: str, text: str) -> None:
    """A skill entered the learned bank: a MemoryWrite, and later learning tasks may read it."""
    sources = [e.event_id for e in emitter.emitted if e.session_index == index and e.visibility == "agent"]
    item = MemoryItem(f"skill:{name}", "skill", text, tuple(sources), ())
    skills[:] = [i for i in skills if i.memory_id != item.memory_id] + [item]
    emitter.emit("MemoryWrite", {"memory_id": item.memory_id, "memory_type": "skill", "scope": [],
                                 "provenance_event_ids": sources, "content": bounded_text(text)})


def _agent_distillation(emitter: RunEmitter, agent, sandbox: Sandbox, config: RunConfig, learned: Path, task,
                        start: dict[str, bytes], result, skills: list[MemoryItem], index: int) -> set[str]:
    """A sandboxed agent's distillation session after a learning task (membench/transfer_protocol/agent_bank.py):
    its transcript as the agent reports it, a MemoryWrite per accepted skill, a harness Turn per refusal.
    Returns the names of the skills it wrote."""
    _phase(emitter, "distillation")
    _turn(emitter, "user", distill_instruction(task.task_id, result.outcome), source_kind="distillation_instruction")
    diff = diff_trees(start, result.scored_tree)
    distilled = distill_with_agent(agent, emitter, sandbox, config.gateway, learned, task.task_id, task.instruction,
                                   result.scored_tree, render_patch(start, diff, diff.production), result.outcome)
    for refusal in distilled.refused:
        _turn(emitter, "system", f"skill refused: {refusal.path}: {refusal.reason}", source_kind="skill_refused",
              visibility="harness")
    for name, text in distilled.written:
        _skill_written(emitter, skills, index, name, text)
    return {name for name, _ in distilled.written}


# ------------------------------------------------------------------------------------------ transfer
def run_transfer(study: Study, unit: RunUnit, config: RunConfig, sandbox: Sandbox, publish: Listener, agent,
                 bank: FrozenBank | None, attempt: int = 1) -> str:
    project = study.project(unit.task)
    emitter = RunEmitter(config.run_set, run_id_for(config.run_set, unit, attempt), unit.unit_id, publish)
    start = snapshot(project.workspace)
    _run_started(emitter, study, unit, agent, config, attempt, tree_digest(start), bank.digest if bank else None)
    ev = project.evaluator
    emitter.emit("EvaluatorPlan", {
        "task_id": ev.task_id, "manifest_sha256": ev.sha256, "max_score": ev.max_score,
        "dimensions": [{"dimension": d.dimension, "title": d.title, "weight": d.weight} for d in ev.dimensions],
        "hard_caps": [{"cap_id": c.cap_id, "cap": c.cap, "invariant": c.invariant, "cases": list(c.cases)}
                      for c in ev.hard_caps],
        "cases": [{"case_id": c.case_id, "dimension": c.dimension, "weight": c.weight,
                   "prerequisites": list(c.prerequisites)} for c in ev.cases]}, visibility="harness")

    progress = _Progress()

    def body():
        memory, actor = None, agent
        if CONDITION_BANKS.get(unit.condition) is not None:
            problem = "no frozen bank recorded for this seed" if bank is None else check_frozen(bank.path, bank.digest)
            if problem is not None:
                _turn(emitter, "system", f"skill_bank_modified: {problem}", visibility="harness")
                return "excluded", "skill_bank_modified"
            assert bank is not None  # no problem found: the bank was recorded
            memory = SkillBankMemory(Namespace(config.run_set, unit.condition, unit.seed, unit.task),
                                     MemorySetup(skill_bank=bank.path))
            if runs_in_sandbox(agent):  # the bank also at /skills in the agent's sandbox, read-only
                actor = MountedBankAgent(agent, bank.path)
        outcome = _conversation(project, unit, config, sandbox, actor, emitter, start, memory, progress)
        if memory is not None:  # the bank must still be the frozen one after the agent ran
            assert bank is not None  # a memory is made only from a recorded bank (above)
            problem = check_frozen(bank.path, bank.digest)
            if problem is not None:
                _turn(emitter, "system", f"skill_bank_modified: {problem}", visibility="harness")
                return "excluded", "skill_bank_modified"
        return outcome

    return _close(emitter, body, progress)


def _phase(emitter: RunEmitter, phase: str, round_: int = 0) -> None:
    emitter.emit("TransferPhase", {"phase": phase, "round": round_})


def _user_says(emitter: RunEmitter, produce) -> str:
    """A simulated-user turn; its latency (the user's own time) is kept apart from the agent's."""
    started = time.monotonic()
    text = produce()
    _turn(emitter, "simulated_user", text, latency_ms=int((time.monotonic() - started) * 1000),
          source_kind="simulated_user")
    return text


def _user_says_after_verdict(emitter: RunEmitter, produce) -> None:
    """A user turn after the run's verdict (the test feedback): nothing then changes the cell, so a
    user model that cannot answer is a harness note, never the unit's exclusion."""
    try:
        _user_says(emitter, produce)
    except ModelUnavailable as exc:
        _turn(emitter, "system", f"{exc.reason} after the scored verdict (the cell stands): {exc}",
              source_kind=AFTER_VERDICT, visibility="harness")


def _simulated_user(project: Project, config: RunConfig, emitter: RunEmitter):
    """The unit's simulated user: the scripted one, or a model through the gateway (`--user model:M`)."""
    model = model_of(config.user)
    if model is None:
        return ScriptedUser(project.scenario)
    return ModelUser(project.scenario, model, config.gateway, emitter.unit_id, emitter.emit)


def _conversation(project: Project, unit: RunUnit, config: RunConfig, sandbox: Sandbox, agent, emitter: RunEmitter,
                  start: dict[str, bytes], memory, progress: _Progress | None = None) -> tuple[str, str | None] | None:
    emitter.session_index = 0
    try:
        user = _simulated_user(project, config, emitter)
        try:
            return _talk(project, config, sandbox, agent, emitter, start, memory, user, progress)
        finally:
            if isinstance(user, ModelUser):
                user.close()
    except ModelUnavailable as exc:  # the user's model (or the agent's) could not answer: not the agent's failure
        emitter.session_index = -1
        _turn(emitter, "system", str(exc), visibility="harness")
        return "excluded", exc.reason


def _talk(project: Project, config: RunConfig, sandbox: Sandbox, agent, emitter: RunEmitter,
          start: dict[str, bytes], memory, user, progress: _Progress | None = None) -> tuple[str, str | None] | None:
    with tempfile.TemporaryDirectory(prefix="membench-transfer-") as tmp:
        workspace = Path(tmp) / "workspace"
        write_files(start, workspace)
        emitter.emit("SessionStarted", {
            "session_index": 0, "instruction": bounded_text(project.scenario.plan), "start_state": "clean",
            "workspace_digest": tree_digest(start), "scored": True, "oracle_id": project.evaluator.task_id})
        _phase(emitter, "plan_handoff")
        message = _user_says(emitter, user.plan)
        check = None
        status = "completed"
        for round_ in range(project.scenario.max_review_rounds):
            _phase(emitter, "implementing", round_)
            query = project.scenario.plan if round_ == 0 else project.scenario.plan + "\n" + message
            context = memory.read(query, config.read_budget) if memory is not None else MemoryContext((), (), 0)
            if memory is not None:
                _memory_read(emitter, query, context)
            if progress is not None:
                progress.agent_acted = True
            outcome = agent.act(AgentTask(message, workspace, context, project.solution, sandbox=sandbox,
                                          gateway=config.gateway), emitter)
            status = outcome.status
            asked = [e for e in emitter.emitted if e.kind == "Turn" and e.payload["role"] == "agent"]
            question = asked[-1].payload["text"]["text"] if asked else ""
            if question.rstrip().endswith("?"):  # the user answers one question per round
                answer = _user_says(emitter, lambda: user.answer(question))
                agent.act(AgentTask(answer, workspace, context, project.solution, sandbox=sandbox,
                                    gateway=config.gateway), emitter)
            _phase(emitter, "delivery", round_)
            check = public_check(sandbox, workspace, project.public_check, config.oracle_timeout_s)
            emitter.emit("PublicCheck", {"passed": check.passed, "exit_status": check.exit_status,
                                         "duration_ms": check.duration_ms, "workspace_digest": check.workspace_digest,
                                         "output": bounded_text(check.output)})
            _phase(emitter, "delivery_review", round_)
            message = _user_says(emitter, lambda: user.review(check.passed, check.output))
            if check.passed:
                break
        _phase(emitter, "freezing")
        frozen = Path(tmp) / "frozen"
        now = submission_tree(workspace)
        if check is not None and check.passed and tree_digest(now) != check.workspace_digest:
            _turn(emitter, "system", "the workspace changed after the passing public check", visibility="harness")
            return "error", "workspace_changed_after_public_check"
        digest, files = freeze_submission(workspace, frozen)
        _emit_patch(emitter, start, now, config)
        emitter.emit("SubmissionFrozen", {"digest": digest, "files": files,
                                          "public_check_passed": bool(check and check.passed)}, visibility="harness")
        _phase(emitter, "testing")
        results = run_evaluator(sandbox, frozen, project.evaluator, config.oracle_timeout_s)
        for r in results:
            emitter.emit("EvaluatorCase", {"case_id": r.case_id, "dimension": r.dimension, "weight": r.weight,
                                           "status": r.status, "duration_ms": r.duration_ms,
                                           "evidence_sha256": r.evidence_sha256,
                                           "prerequisites": list(r.prerequisites)}, visibility="harness")
        applicable = [r for r in results if r.status != "not_applicable"]
        # the acceptance verdict (the manifests' mode `all_cases_pass`), so verdicts, failure taxonomy and
        # the per-condition table read a transfer run like any scored session; the submission ran in a
        # sandbox of its own, apart from the case runner (isolation process)
        emitter.emit("OracleVerdict", {
            "oracle_id": project.evaluator.task_id,
            "outcome": "pass" if applicable and all(r.status == "passed" for r in applicable) else "fail",
            "cases": [{"case_id": r.case_id, "outcome": {"passed": "pass", "failed": "fail"}.get(r.status, r.status),
                       "duration_ms": r.duration_ms} for r in applicable],
            "exit_status": 0, "inconclusive": False, "duration_ms": sum(r.duration_ms for r in results),
            "isolation": EVALUATOR_ISOLATION}, visibility="harness")
        _phase(emitter, "test_feedback")
        _user_says_after_verdict(emitter, lambda: user.feedback(sum(r.status == "passed" for r in applicable),
                                                                len(applicable)))
        _phase(emitter, "finished")
        emitter.emit("SessionEnded", {"session_index": 0, "status": status})
    return None


__all__ = ["FrozenBank", "LEARNING", "bank_dir", "learning_unit", "plan_transfer", "run_learning",
           "run_transfer"]
