"""Planning and running the grid of run units (docs/design.md §5).

Per session: materialize the workspace (the previous session's scored production tree, or the
clean base), ask the memory system for context, let the agent act, score the production diff in
a fresh oracle sandbox, deliver the pack's events that follow the session, let the memory system
write. Every step is an event.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import tempfile
import threading
import traceback
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membench.agents.base import AgentOutcome, AgentTask
from membench.agents.model_agents import LoopLimits
from membench.agents.registry import make_agent
from membench.bus.blobs import put_blob
from membench.bus.emitter import Listener, RunEmitter
from membench.gateway.server import ModelGateway, ModelUnavailable
from membench.runner.labels import sequence_labels
from membench.memory_systems.base import MemoryContext, MemorySetup, Namespace
from membench.memory_systems.declared import DeclaredMemory
from membench.memory_systems.model_client import MemoryModel
from membench.memory_systems.native import drop_memory_files, update_prompt
from membench.memory_systems.mcp_servers import session_tools
from membench.memory_systems.registry import is_model_driven, make_memory
from membench.sandbox.base import IsolationUnavailable, Sandbox
from membench.sandbox.scoring import HarnessFault, ScoreResult, score_session, score_with_rules
from membench.sandbox.workspace import (DIFF_STORE_LIMIT, TreeDiff, capped_directory, render_patch_bounded, snapshot,
                               tree_digest, write_files)
from membench.schemas.events import bounded_text
from membench.formats.pack_format import Pack, Sequence, Solution
from membench.schemas.payloads import OracleVerdict, PatchProduced

RUN_NAMESPACE = uuid.UUID("6f1d2a43-5c55-4c1e-9a43-6d656d62656e")
DEFAULT_READ_BUDGET = 2000
INLINE_DIFF_LIMIT = 64 << 10  # a PatchProduced diff up to this many bytes is kept in the event itself


@dataclass(frozen=True)
class RunUnit:
    suite: str
    task: str
    condition: str
    seed: int

    @property
    def unit_id(self) -> str:
        return f"{self.suite}/{self.task}/{self.condition}/{self.seed}"


@dataclass(frozen=True)
class RunConfig:
    run_set: str
    agent: str
    read_budget: int = DEFAULT_READ_BUDGET
    oracle_timeout_s: float = 120.0
    code_digest: str = ""
    blob_dir: Path | None = None  # the content store beside the log (runs/<run set>/blobs); see patch_fields
    gateway: ModelGateway | None = None  # the model gateway model agents reach (started per run set)
    loop: LoopLimits | None = None  # the built-in `openai:` agent's step and token limits
    user: str = "scripted"  # the transfer protocol's simulated user: `scripted` or `model:MODEL`
    # conditions that only label predictions scored here (`membench score`): their memory ran
    # elsewhere; membench records the memories the pack declares for them (Sequence.source_memories,
    # membench/memory_systems/declared.py) and reads none for a label the pack declares nothing for
    label_conditions: frozenset[str] = frozenset()
    # the model a model-driven memory policy (B3-llm, DF-llm, …) calls through `gateway` (--memory-model)
    memory_model: str | None = None
    # where a memory library's on-disk stores live (default: `memory/` beside the blobs); a runner
    # names its own, since a store is locked to one process and runners may share MEMBENCH_HOME
    memory_dir: Path | None = None


def plan_grid(pack: Pack, conditions: list[str], seeds: list[int]) -> list[RunUnit]:
    return [RunUnit(pack.name, seq.seq_id, c, s) for seq in pack.sequences for c in conditions for s in seeds]


def default_run_set(pack_name: str, pack_digest: str, agent: str, conditions: list[str], seeds: list[int]) -> str:
    """The run-set id of a grid when the user names none: the same pack, agent and grid get the same id,
    which is what makes `membench run` resumable."""
    key = json.dumps([pack_digest, agent, sorted(conditions), sorted(seeds)])
    short_agent = re.sub(r"[^a-z0-9]+", "-", agent.split(":")[-1].lower()).strip("-")
    return f"{pack_name}-{short_agent}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def run_id_for(run_set: str, unit: RunUnit, attempt: int) -> str:
    return str(uuid.uuid5(RUN_NAMESPACE, f"{run_set}/{unit.unit_id}/{attempt}"))


class HeldUntilStarted:
    """An emit for what a memory system records while it opens (a library's settings turn, a model
    call): a run's first event is RunStarted, and RunStarted is written after the memory system
    opened (it records the skill bank's digest), so those events are held and emitted, in order, by
    `release()` right after it — a processor rejects any event of a run before its RunStarted.
    Thread-safe: the gateway emits from its handler threads."""

    def __init__(self, emit: Callable[..., object]):
        self._emit = emit
        self._held: list[tuple[str, Mapping[str, Any], str]] | None = []
        self._lock = threading.Lock()

    def __call__(self, kind: str, payload: Mapping[str, Any], visibility: str = "agent") -> None:
        with self._lock:
            if self._held is not None:
                self._held.append((kind, payload, visibility))
                return
        self._emit(kind, payload, visibility)

    def release(self) -> None:
        with self._lock:  # emitted under the lock: nothing emitted now may overtake what was held
            held, self._held = self._held or [], None
            for kind, payload, visibility in held:
                self._emit(kind, payload, visibility)


def run_unit(pack: Pack, unit: RunUnit, config: RunConfig, sandbox: Sandbox, publish: Listener,
             attempt: int = 1, agent=None) -> str:
    """Run one unit to its RunEnded event; returns the run id. Exceptions inside become a RunEnded
    with status `error` (or `excluded` for missing isolation), never a silent gap. `agent`, when
    given, replaces `config.agent` (scoring given predictions uses an agent that applies them)."""
    seq = pack.sequence(unit.task)
    emitter = RunEmitter(config.run_set, run_id_for(config.run_set, unit, attempt), unit.unit_id, publish)
    agent = agent or make_agent(config.agent, config.loop, with_gateway=config.gateway is not None)
    base = snapshot(pack.repos[seq.repo])
    memory: Any = None  # the condition's memory system (a DeclaredMemory, or what make_memory makes)
    memory_error = None
    system = "no_memory" if unit.condition in config.label_conditions else unit.condition
    driven = is_model_driven(system)
    # what the memory system records while it opens belongs to the run: held until RunStarted
    opening = HeldUntilStarted(emitter.emit)
    # a model-driven policy calls the memory model from here, the harness, through the run set's gateway
    memory_model = (MemoryModel(config.memory_model, config.gateway, unit.unit_id, opening)
                    if driven and config.memory_model and config.gateway is not None else None)
    try:  # before RunStarted: a skill bank is verified here and its digest recorded there
        setup = MemorySetup.for_sequence(pack, seq)
        declared = seq.source_memories.get(unit.condition) if unit.condition in config.label_conditions else None
        if declared:
            memory = DeclaredMemory(unit.condition, declared, {e.event_id: e.content for e in seq.events})
        else:
            if config.memory_dir is not None:  # else beside the blobs, else a private temporary one
                setup = dataclasses.replace(setup, store_dir=config.memory_dir)
            elif config.blob_dir is not None:
                setup = dataclasses.replace(setup, store_dir=config.blob_dir.parent / "memory")
            memory = make_memory(system, Namespace(config.run_set, unit.condition, unit.seed, seq.seq_id),
                                 dataclasses.replace(setup, model=memory_model) if memory_model else setup)
    except Exception as exc:  # a memory system that cannot start closes the run as an error
        memory_error = exc
    emitter.emit("RunStarted", {
        "suite": unit.suite, "task": unit.task, "condition": unit.condition, "seed": unit.seed,
        "agent": agent.name, "agent_kind": agent.kind, "model": getattr(agent, "model", None),
        "budgets": {"memory_read_tokens": config.read_budget, "oracle_timeout_s": int(config.oracle_timeout_s)},
        "code_digest": config.code_digest, "pack_digest": pack.digest, "fixture_digest": tree_digest(base),
        "skill_bank_digest": getattr(memory, "skill_bank_digest", None), "attempt": attempt,
        "construct": seq.construct, "family": seq.family,
        "resolution_policy": pack.resolution_policy,  # event v5: the suite's rule, for the processors
        "memory_model": config.memory_model if driven else None,  # event v6: model_driven when set
    }, visibility="harness")
    opening.release()
    for label in sequence_labels(seq):
        emitter.emit("OracleLabel", label, visibility="harness")
    status, error_type = "completed", None
    if memory_error is not None:
        emitter.emit("Turn", {"role": "system", "text": bounded_text(f"memory system {unit.condition}: {memory_error}"),
                              "source_event_id": None, "source_kind": None, "input_tokens": 0, "cached_tokens": 0,
                              "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")
        emitter.emit("RunEnded", {"status": "error", "error_type": f"memory_setup:{type(memory_error).__name__}"},
                     visibility="harness")
        return emitter.run_id
    if getattr(memory, "native", False):
        _bind_native(memory, agent, base, emitter, sandbox, config)
    progress = _Progress()
    try:
        _run_sessions(pack, seq, base, memory, agent, emitter, sandbox, config, progress)
    except (IsolationUnavailable, ModelUnavailable, HarnessFault) as exc:  # not the agent's: the unit is excluded
        status, error_type = "excluded", getattr(exc, "reason", "isolation_unavailable")
        emitter.session_index = -1
        emitter.emit("Turn", {"role": "system", "text": bounded_text(str(exc)), "source_event_id": None,
                              "source_kind": None, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                              "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")
    except Exception as exc:  # a harness bug must still close the run in the log, saying what broke
        # Before the agent acted nothing of the agent's can be the cause: the unit is an error (its
        # cell excluded). After, the agent may have provoked it, and a cell it could remove that way
        # would be an exclusion the agent chooses: the run completes, its unfinished sessions
        # unpassed (docs/design.md §5).
        status, error_type = (("completed", f"harness_error:{type(exc).__name__}") if progress.agent_acted
                              else ("error", f"task_exception:{type(exc).__name__}"))
        emitter.session_index = -1
        emitter.emit("Turn", {"role": "system", "text": bounded_text("".join(traceback.format_exception(exc))),
                              "source_event_id": None, "source_kind": "harness_error", "input_tokens": 0,
                              "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0},
                     visibility="harness")
    finally:
        if memory_model is not None:
            memory_model.close()
        if getattr(memory, "agent_driven", False):  # a memory server started for this namespace stops with its run
            memory.close()
    emitter.session_index = -1
    emitter.emit("RunEnded", {"status": status, "error_type": error_type}, visibility="harness")
    return emitter.run_id


@dataclass
class _Progress:
    agent_acted: bool = False  # set when an agent is first started in the run: from then on an exception fails
    scored_verdict: bool = False  # the scored session's verdict is in the log: from then on nothing changes the cell


AFTER_VERDICT = "after_scored_verdict"  # source_kind of the note that replaces an exclusion met after it


def _run_sessions(pack: Pack, seq: Sequence, base: dict[str, bytes], memory, agent, emitter: RunEmitter,
                  sandbox: Sandbox, config: RunConfig, progress: _Progress | None = None) -> None:
    progress = progress if progress is not None else _Progress()
    tree = base
    for session in seq.sessions:
        try:
            tree = _run_session(pack, seq, session, tree, base, memory, agent, emitter, sandbox, config, progress)
        except (IsolationUnavailable, ModelUnavailable) as exc:
            if not progress.scored_verdict:
                raise
            # After the scored verdict (its memory write, later sessions) nothing can change the cell: a
            # memory model the agent's trajectory made fail, or any outage, is a note, never an exclusion.
            _system_turn(emitter, AFTER_VERDICT, f"{getattr(exc, 'reason', 'isolation_unavailable')} after the scored "
                                                 f"session's verdict (the cell stands; the rest of the run is "
                                                 f"skipped): {exc}")
            return


def _run_session(pack: Pack, seq: Sequence, session, tree: dict[str, bytes], base: dict[str, bytes], memory, agent,
                 emitter: RunEmitter, sandbox: Sandbox, config: RunConfig, progress: _Progress) -> dict[str, bytes]:
    """One session: act and score it (a task session), deliver the events that follow it, let the
    memory system write; returns the next session's start tree."""
    emitter.session_index = session.index
    scored = session.index == seq.scored_session.index
    clean = session.start_state == "clean" or (scored and seq.clean_start_s3)
    start = base if clean else tree
    with tempfile.TemporaryDirectory(prefix="membench-ws-") as tmp, \
            capped_directory(Path(tmp) / "workspace") as workspace:  # the agent cannot outgrow the cap
        write_files(start, workspace)
        emitter.emit("SessionStarted", {
            "session_index": session.index, "instruction": bounded_text(session.instruction),
            "start_state": "clean" if clean else "continuation", "workspace_digest": tree_digest(start),
            "scored": scored, "oracle_id": session.oracle_id or None})
        emitter.emit("Turn", {"role": "user", "text": bounded_text(session.instruction), "source_event_id": None,
                              "source_kind": "instruction" if session.mode == "task" else "history",
                              "input_tokens": 0, "cached_tokens": 0,
                              "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})
        if session.mode == "history":  # recorded evidence: no agent, no scoring; its events follow
            outcome = AgentOutcome(status="history")
        else:
            tree, outcome = _act_and_score(pack, seq, session, start, workspace, memory, agent, emitter, sandbox,
                                           config, base, progress)
            progress.scored_verdict = progress.scored_verdict or scored
    emitter.emit("SessionEnded", {"session_index": session.index, "status": outcome.status})
    for event in seq.events:
        if event.after_session == session.index:
            emitter.emit("Turn", {
                "role": "user", "text": bounded_text(event.content), "source_event_id": event.event_id,
                "source_kind": event.kind, "source_scope": list(event.scope_files), "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                "reasoning_tokens": 0, "latency_ms": 0})
    session_events = [e for e in emitter.emitted if e.session_index == session.index and e.visibility == "agent"]
    _emit_memory_writes(emitter, memory.write(session_events))
    return tree


def _emit_memory_writes(emitter: RunEmitter, items) -> None:
    for item in items:
        emitter.emit("MemoryWrite", {
            "memory_id": item.memory_id, "memory_type": item.memory_type, "scope": list(item.scope),
            "provenance_event_ids": list(item.provenance_event_ids), "content": bounded_text(item.text)})


NOT_INJECTED = MemoryContext((), (), 0)  # NATIVE: the agent loads its own memory files; membench adds nothing


def _bind_native(memory, agent, base: dict[str, bytes], emitter: RunEmitter, sandbox: Sandbox,
                 config: RunConfig) -> None:
    """NATIVE (membench/memory_systems/native.py): its memory-update turn is the unit's agent, told
    what followed the session, acting on its memory files in the unit's sandbox."""
    def run_agent(native):
        prompt = update_prompt(agent.name, native.feedback)
        emitter.emit("Turn", {"role": "user", "text": bounded_text(prompt), "source_event_id": None,
                              "source_kind": "memory_update", "input_tokens": 0, "cached_tokens": 0,
                              "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})
        return agent.act(AgentTask(prompt, native.workspace, NOT_INJECTED, Solution({}, {}), sandbox=sandbox,
                                   gateway=config.gateway, native=native), emitter)

    memory.bind(agent, base, run_agent)


def verdict_payload(oracle_id: str, result: ScoreResult) -> OracleVerdict:
    """The `OracleVerdict` payload of a scoring result (`membench.sandbox.scoring.ScoreResult`)."""
    return {"oracle_id": oracle_id, "outcome": result.outcome,
            "cases": [{"case_id": c["case_id"], "outcome": c["outcome"], "duration_ms": c.get("duration_ms", 0)}
                      for c in result.cases],
            "exit_status": result.exit_status, "inconclusive": result.inconclusive,
            "duration_ms": result.duration_ms, "isolation": result.isolation}


def _act_and_score(pack: Pack, seq: Sequence, session, start: dict[str, bytes], workspace: Path, memory, agent,
                   emitter: RunEmitter, sandbox: Sandbox, config: RunConfig, base: dict[str, bytes] | None = None,
                   progress: _Progress | None = None) -> tuple[dict[str, bytes], AgentOutcome]:
    """One task session: memory read, agent act, scoring (pytest oracle, or the session's scoring
    rules); returns the scored tree (the next session's start) and the agent's outcome.

    Once the agent is started, a harness exception is this session's failure, not the unit's
    exclusion: the traceback is recorded in a harness Turn, the verdict is `harness_error`, the
    session's start tree carries on and the run goes on (docs/design.md §5). Only isolation or a
    model that is unavailable still excludes: isolation only when the backend also fails on the
    pack's untouched base checkout (_isolation_proven), an oracle harness that produced no outcome
    only when it produces none on that checkout either (settle_harness_fault), a model only when the
    gateway's own probe of the configured model fails too (docs/gateway.md), and none of them once
    the scored session's verdict is recorded (_run_sessions)."""
    # NATIVE: the agent's memory files, written where it keeps them (read below says what it loads)
    native = memory.open_session(workspace) if getattr(memory, "native", False) else None
    # an agent-driven memory (an MCP memory server) puts nothing into the prompt: the agent calls its tools
    tools = session_tools(memory, emitter, config.read_budget)
    context = memory.read(session.instruction, config.read_budget) if tools is None \
        else MemoryContext((), (), config.read_budget)
    if getattr(memory, "uses_memory", True) and tools is None:
        emitter.emit("MemoryRead", {
            "query": bounded_text(session.instruction), "candidates": list(context.candidates),
            "admitted_ids": [i.memory_id for i in context.items], "tokens_admitted": context.tokens_admitted,
            "token_budget": context.token_budget, "context": bounded_text(context.render())})
    search = ((lambda query: memory.read(query, config.read_budget))
              if getattr(memory, "uses_memory", True) and native is None and tools is None else None)
    if progress is not None:
        progress.agent_acted = True
    outcome: AgentOutcome | None = None
    verdict_emitted = False
    try:
        outcome = agent.act(AgentTask(session.instruction, workspace, NOT_INJECTED if native else context,
                                      pack.solution(seq, session), sandbox=sandbox, gateway=config.gateway,
                                      memory_search=search, memory_tools=tools, native=native), emitter)
        if native is not None:  # what the agent changed in its memory files; they leave the workspace
            _emit_memory_writes(emitter, memory.close_session(native, [
                e.event_id for e in emitter.emitted if e.session_index == session.index and e.kind == "Turn"
                and e.payload.get("source_kind") == "instruction"]))
        elif dropped := drop_memory_files(agent, workspace, base or start):  # no condition but NATIVE keeps them
            _system_turn(emitter, "native_memory_dropped", "the agent's own memory files, dropped (only NATIVE "
                                                           f"keeps them; never the patch): {', '.join(dropped)}")
        result = _score(pack, seq, session, start, workspace, sandbox, config)
        if result.outcome == "isolation_unavailable" and not _isolation_proven(pack, seq, session, base or start,
                                                                               sandbox, config):
            # the backend scores the untouched base checkout: the agent's tree broke scoring, its failure
            _system_turn(emitter, "isolation_probe", f"scoring could not start on the agent's tree but starts on "
                                                     f"the pack's base checkout: {result.detail}")
            result = dataclasses.replace(result, outcome=PATCH_BROKE_SCORING)
        elif result.harness_fault and session.scoring is None:
            result = settle_harness_fault(emitter, result, lambda: oracle_base_score(
                sandbox, base or start, pack.oracle_path(seq, session), config.oracle_timeout_s))
        diff = result.diff
        production = render_patch_bounded(start, diff, diff.production)
        stripped = render_patch_bounded(start, diff, diff.tests + diff.git)
        for name, rendered in (("production_diff", production), ("stripped_diff", stripped)):
            if rendered.truncated:  # recorded beside the cut text's own last line
                _system_turn(emitter, "diff_truncated", f"{name}: kept {len(rendered.text.encode())} of "
                                                        f"{rendered.full_bytes} bytes (limit {DIFF_STORE_LIMIT})")
        emitter.emit("PatchProduced", patch_produced(diff, production.text, stripped.text, config.blob_dir))
        emitter.emit("OracleVerdict", verdict_payload(session.oracle_id, result), visibility="harness")
        verdict_emitted = True
    except (IsolationUnavailable, ModelUnavailable, HarnessFault):
        if native is not None:
            shutil.rmtree(native.home, ignore_errors=True)
        raise
    except Exception as exc:  # after the agent started: this session fails, the run goes on
        if native is not None:  # its memory files of this session are lost with it
            shutil.rmtree(native.home, ignore_errors=True)
        _system_turn(emitter, "harness_error", "".join(traceback.format_exception(exc)))
        if not verdict_emitted:
            emitter.emit("OracleVerdict", {
                "oracle_id": session.oracle_id, "outcome": HARNESS_ERROR, "cases": [], "exit_status": -1,
                "inconclusive": False, "duration_ms": 0, "isolation": "in_process"}, visibility="harness")
        return start, outcome or AgentOutcome(status="error")
    if result.outcome == "isolation_unavailable":
        raise IsolationUnavailable(result.detail)
    if result.outcome == HARNESS_FAULT:
        raise HarnessFault(result.harness_fault)
    return result.scored_tree, outcome


# Verdict outcomes the runner gives (OracleVerdict.outcome is a string; membench/processors/failure.py maps them):
HARNESS_ERROR = "harness_error"  # the harness raised after the agent started; the traceback is in a harness Turn
PATCH_BROKE_SCORING = "patch_broke_scoring"  # scoring could not start on the agent's tree, yet does on the base
HARNESS_FAULT = "harness_fault"  # the oracle's harness produced no outcome, on the base checkout too (excluded)


def _score(pack: Pack, seq: Sequence, session, start: dict[str, bytes], workspace: Path, sandbox: Sandbox,
           config: RunConfig):
    if session.scoring is not None:
        return score_with_rules(sandbox, start, workspace, session.scoring, pack.hidden_files_dir(seq, session),
                                session.scoring.timeout_s or config.oracle_timeout_s)
    return score_session(sandbox, start, workspace, pack.oracle_path(seq, session), config.oracle_timeout_s)


def _isolation_proven(pack: Pack, seq: Sequence, session, base: dict[str, bytes], sandbox: Sandbox,
                      config: RunConfig) -> bool:
    """Whether the backend is unavailable whatever the agent did: the session's scoring, run again
    on the pack's untouched base checkout (no change required), is also `isolation_unavailable`.
    Only then is the unit excluded; an agent's tree that breaks the scoring sandboxes' start (a
    shadowed module, a file that stops the production server) fails its session instead."""
    if session.scoring is not None:
        return base_scoring_unavailable(base, lambda clean: score_with_rules(
            sandbox, base, clean, session.scoring, pack.hidden_files_dir(seq, session),
            session.scoring.timeout_s or config.oracle_timeout_s))
    return oracle_isolation_proven(sandbox, base, pack.oracle_path(seq, session), config.oracle_timeout_s)


def oracle_isolation_proven(sandbox: Sandbox, base: dict[str, bytes], oracle_file: Path, timeout_s: float) -> bool:
    """_isolation_proven for a session scored by a pytest oracle (also the transfer learning tasks')."""
    return base_scoring_unavailable(base, lambda clean: score_session(sandbox, base, clean, oracle_file, timeout_s,
                                                                      require_change=False))


def base_scoring_unavailable(base: dict[str, bytes], rescore) -> bool:
    """`rescore(workspace)` over a fresh copy of `base` is `isolation_unavailable` too."""
    return _rescore_base(base, rescore).outcome == "isolation_unavailable"


def _rescore_base(base: dict[str, bytes], rescore) -> ScoreResult:
    with tempfile.TemporaryDirectory(prefix="membench-probe-") as tmp:
        clean = Path(tmp) / "workspace"
        clean.mkdir()
        write_files(base, clean)
        return rescore(clean)


def oracle_base_score(sandbox: Sandbox, base: dict[str, bytes], oracle_file: Path, timeout_s: float) -> ScoreResult:
    """The session's pytest oracle over the untouched base checkout (no change required)."""
    return _rescore_base(base, lambda clean: score_session(sandbox, base, clean, oracle_file, timeout_s,
                                                           require_change=False))


def settle_harness_fault(emitter: RunEmitter, result: ScoreResult, score_base: Callable[[], ScoreResult]
                         ) -> ScoreResult:
    """A scoring whose oracle harness produced no outcome (`result.harness_fault`): a fault of the
    harness only if it produces none on the pack's untouched base checkout either — nothing of the
    agent's is there — and then the verdict is `harness_fault` (the unit is excluded, the cause in a
    harness Turn `harness_fault`). Otherwise the agent's tree caused it (it ended the oracle's run,
    starved it, made it collect nothing): the `fail` stands, the probe's finding in a harness Turn
    `harness_probe`. An agent can make the harness fault on its own tree, never on the base."""
    base = score_base()
    if base.harness_fault:
        also = "" if base.harness_fault == result.harness_fault else f" (on the agent's tree: {result.harness_fault})"
        _system_turn(emitter, HARNESS_FAULT, f"{base.harness_fault}, on the pack's base checkout too{also}")
        return dataclasses.replace(result, outcome=HARNESS_FAULT)
    _system_turn(emitter, "harness_probe", f"the oracle's harness produced no outcome on the agent's tree "
                                           f"({result.harness_fault}) but did on the pack's base checkout "
                                           f"(outcome {base.outcome}): the agent's failure")
    return result


def _system_turn(emitter: RunEmitter, source_kind: str, text: str) -> None:
    """A harness-visible system Turn: what the harness records about a session (memory systems never see it)."""
    emitter.emit("Turn", {"role": "system", "text": bounded_text(text), "source_event_id": None,
                          "source_kind": source_kind, "input_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                          "reasoning_tokens": 0, "latency_ms": 0}, visibility="harness")


def patch_fields(name: str, text: str, blob_dir: Path | None) -> dict[str, str | None]:
    """`name` and `name_sha256` of a PatchProduced event: the diff inline when it is at most
    INLINE_DIFF_LIMIT bytes of UTF-8, else only its digest, with the text stored content-addressed
    at blob_dir/<sha256> (written atomically; `replay --verify` checks it). Without a blob_dir a
    large diff keeps only its digest."""
    data = text.encode("utf-8")
    if len(data) <= INLINE_DIFF_LIMIT:
        return {name: text, f"{name}_sha256": hashlib.sha256(data).hexdigest()}
    digest = put_blob(blob_dir, data) if blob_dir is not None else hashlib.sha256(data).hexdigest()
    return {name: None, f"{name}_sha256": digest}


def patch_produced(diff: TreeDiff, production: str, stripped: str, blob_dir: Path | None) -> PatchProduced:
    """The PatchProduced payload of a session's diff: its paths, and the production and stripped
    diffs' texts (inline or stored, patch_fields)."""
    kept = {**patch_fields("production_diff", production, blob_dir), **patch_fields("stripped_diff", stripped, blob_dir)}
    return {"files": diff.files, "added_lines": diff.added_lines, "removed_lines": diff.removed_lines,
            "production_paths": diff.production, "test_paths": diff.tests, "stripped_paths": diff.tests + diff.git,
            "diff_sha256": diff.sha256,
            "production_diff": kept["production_diff"], "production_diff_sha256": kept["production_diff_sha256"],
            "stripped_diff": kept["stripped_diff"], "stripped_diff_sha256": kept["stripped_diff_sha256"]}


def run_grid(pack: Pack, units: list[RunUnit], config: RunConfig, sandbox: Sandbox, publish: Listener,
             workers: int, attempts: dict[str, int], on_done: Callable[[RunUnit, str], None],
             agent_for: Callable[[RunUnit], object] | None = None) -> None:
    """Run units concurrently; `agent_for(unit)`, when given, replaces config.agent per unit."""
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="membench-unit") as pool:
        futures = {pool.submit(run_unit, pack, unit, config, sandbox, publish, attempts.get(unit.unit_id, 1),
                               agent_for(unit) if agent_for else None): unit
                   for unit in units}
        for future in as_completed(futures):
            on_done(futures[future], future.result())


def code_digest() -> str:
    """SHA-256 over membench's own Python sources: which code produced a run."""
    root = Path(__file__).resolve().parents[2]  # the folder holding the membench package
    digest = hashlib.sha256()
    for path in sorted((root / "membench").rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
