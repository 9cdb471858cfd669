"""`failure_reason`: a fixed enum, first matching rule wins, recorded with the rule that fired.

The order is docs/design.md §7's and the coding-agent A/B benchmark's (its `classify_failure_reason`):

1. oracle_inconclusive — no verdict, or the oracle flagged itself inconclusive (timed out, could
   not run);
then what the agent produced and the harness refused or broke on (an agent can fail a
session this way, never exclude it, or it could leave the comparison at will; these outcomes never pass):
   invalid_agent_output — a workspace path that is not UTF-8, a workspace over MEMBENCH_WORKSPACE_MB,
   a change over MEMBENCH_PATCH_MB, a tree on which the scoring sandboxes would not start while
   they start on the pack's base checkout (`patch_broke_scoring`);
   and, as agent conduct (below), a model request of the agent's that the upstream kept failing
   (429, 5xx, timeout) while the gateway's probe of the configured model was answered
   (`model_request_failed`), or, replaying a recording, a request it does not hold
   (`model_replay_diverged`) — the agent's own, never an exclusion it could provoke;
   harness_error — the harness raised after the agent started (the traceback is in a harness Turn);
2. timeout — the agent's session ended by timeout;
3. over_context_budget — a memory read admitted more tokens than its budget, an agent turn's
   input exceeded RunStarted's `context_tokens` budget, or the agent reported a context overflow;
4. wrong_file_modified — a changed path broke the path rules, or the patch edited `.git`
   (this fires even when the tests pass: such a run is not resolved);
then, only when the oracle did not pass:
5. agent_hallucinated_memory — the agent cited a memory id that was never injected;
6. stale_memory_followed — it cited a stale memory, or a forbidden patch pattern showed up while
   the task has stale/forbidden evidence;
7. missing_memory — a relevant memory existed but was not injected, or relevant evidence was
   delivered and no memory was ever learned from it;
8. ignored_memory — relevant memories were injected and none was cited;
9. irrelevant_memory_distracted — the agent cited an injected memory that is neither relevant nor stale;
10. compile_failure — a changed production file does not compile;
11. test_failure — everything else that did not pass (test commands, patch patterns, an empty diff).
Rules 5–9 (the memory reasons) need an applicable memory contract (membench.processors.contract): a run
without memory it learned from (B0, no_memory, curated_file, a first session) fails only as a task
failure. Its citations are not lost: they are counted as `citations_without_memory` in the
report's memory-contract panel (membench/reports/failures.py), read from the session's MemoryCitation events.

**The A/B benchmark's packs** follow that benchmark's published taxonomy where it
differs: a session that was shown memory (a MemoryRead admitted ids) is judged for a cited id
that memory never held, contract or not — so a `curated_file` run citing an id its MEMORY.md
never carried is `agent_hallucinated_memory`, while its contract stays `not_applicable` as that
benchmark's artifact contract requires. A `no_memory` run (no MemoryRead) still fails only as a
task failure. Those packs are the ones whose RunStarted carries the `agent_must_finish` policy,
which only their importer declares (`AB_TAXONOMY_POLICY`); processors never read packs.

**Resolution**. `classify` is the one place that decides whether a session is resolved;
the verdict fold (`SessionVerdict.passed`, `RunSummary.scored_passed`, hence `pass_rate`) calls
it too, so the tables cannot disagree. A session is resolved when no rule fires. The rules marked
`agent_conduct` (the two model-request rules, timeout, the three over_context_budget rules) judge
the agent rather than the patch, and whether they fail a session whose oracle passed is the suite's resolution policy,
carried in `RunStarted.resolution_policy` (event v5; membench/formats/pack_format.py):
- `patch_as_submitted` (native packs, DreamBench-SWE: the outcome is the oracle's verdict on the
  final diff) — they do not fire on a passing session; the agent's status stays in the log
  (`SessionEnded.status`), and a runtime contract failure such as `memory_read_over_budget` stays
  in the memory contract. A log written before event v5 reads as this policy.
- `agent_must_finish` (imported coding-agent A/B packs, as that benchmark's published code does)
  — they fire even when the tests pass: a timed-out or overflowing run is not resolved.
On a session the oracle did not pass they are the reason under either policy (first rule wins).
A session whose isolation was unavailable, or whose oracle harness produced no outcome
(`harness_fault`), is excluded: neither resolved nor failed, no reason imputed. Both are decided
by the runner on the pack's untouched base checkout; on the agent's tree alone they stay failures
(`patch_broke_scoring`, or the oracle's `fail`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from membench.processors.contract import MEMORY_FAILURE_REASONS, Attribution, attribute, memory_contract
from membench.processors.evidence import STALE_LABELS, SessionEvidence
from membench.schemas.derived import DerivedEvent, UnitKey, make_derived, shallow_fields

FAILURE_REASONS = (
    "oracle_inconclusive", "invalid_agent_output", "harness_error", "timeout", "over_context_budget",
    "wrong_file_modified", "agent_hallucinated_memory",
    "stale_memory_followed", "missing_memory", "ignored_memory", "irrelevant_memory_distracted",
    "compile_failure", "test_failure",
)
# verdict outcomes (membench/sandbox/scoring.py, membench/runner/grid.py) that are the agent's doing, by the rule naming each
INVALID_OUTPUT_OUTCOMES = {"unencodable_workspace_path": "workspace_path_not_utf8",
                           "workspace_too_large": "workspace_over_limit", "patch_too_large": "patch_over_limit",
                           "patch_broke_scoring": "scoring_failed_only_on_agent_tree"}
# verdict outcomes that exclude a session: the harness's, proven on the pack's base checkout
# (membench/sandbox/scoring.py, membench/runner/grid.py), so that no agent can bring them about
EXCLUDING_OUTCOMES = frozenset({"isolation_unavailable", "harness_fault"})


def _failed(cases: list[dict[str, str]]) -> bool:
    return any(c["outcome"] in ("fail", "error") for c in cases)


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    when: Callable[[SessionEvidence, Attribution], bool]
    only_if_not_passed: bool = False
    needs_contract: bool = False
    agent_conduct: bool = False  # judges the agent, not the patch: the resolution policy decides (module doc)
    # needs only the ids the session was shown, not an attribution of them: judged on the A/B
    # benchmark's packs wherever memory was read (module doc)
    citations_only: bool = False


# the policy only the A/B benchmark's importer declares: its runs follow that benchmark's taxonomy
AB_TAXONOMY_POLICY = "agent_must_finish"


def memory_judged(rule: Rule, ev: SessionEvidence, att: Attribution) -> bool:
    """Whether a memory rule may fire in this session (module doc)."""
    if not rule.needs_contract or att.applicable:
        return True
    return rule.citations_only and ev.resolution_policy == AB_TAXONOMY_POLICY and bool(ev.injected_ids)


def _outcome_is(outcome: str) -> Callable[[SessionEvidence, Attribution], bool]:
    return lambda ev, att: ev.outcome == outcome


RULES: tuple[Rule, ...] = (
    Rule("no_oracle_verdict", "oracle_inconclusive", lambda ev, att: ev.verdict is None),
    Rule("oracle_inconclusive", "oracle_inconclusive", lambda ev, att: bool(ev.verdict and ev.verdict["inconclusive"])),
    *(Rule(rule, "invalid_agent_output", _outcome_is(outcome)) for outcome, rule in INVALID_OUTPUT_OUTCOMES.items()),
    Rule("model_request_failed", "invalid_agent_output", lambda ev, att: ev.agent_requests_failed > 0,
         agent_conduct=True),
    Rule("model_replay_diverged", "invalid_agent_output", lambda ev, att: ev.agent_replay_misses > 0,
         agent_conduct=True),
    Rule("harness_exception_after_agent_started", "harness_error", lambda ev, att: ev.outcome == "harness_error"),
    Rule("agent_timeout", "timeout", lambda ev, att: ev.status == "timeout", agent_conduct=True),
    Rule("memory_read_over_budget", "over_context_budget", lambda ev, att: ev.reads_over_budget > 0,
         agent_conduct=True),
    Rule("agent_input_over_budget", "over_context_budget",
         lambda ev, att: ev.context_budget is not None and ev.max_agent_input_tokens > ev.context_budget,
         agent_conduct=True),
    Rule("agent_reported_context_overflow", "over_context_budget", lambda ev, att: ev.status == "context_overflow",
         agent_conduct=True),
    Rule("path_rule_violated", "wrong_file_modified", lambda ev, att: _failed(ev.cases("path:"))),
    Rule("git_edit_rejected", "wrong_file_modified", lambda ev, att: ev.outcome == "production_patch_apply_failed"),
    Rule("cited_never_injected", "agent_hallucinated_memory", lambda ev, att: bool(att.hallucinated),
         only_if_not_passed=True, needs_contract=True, citations_only=True),
    Rule("stale_memory_cited", "stale_memory_followed", lambda ev, att: att.stale_used > 0,
         only_if_not_passed=True, needs_contract=True),
    Rule("forbidden_pattern_with_stale_evidence", "stale_memory_followed",
         lambda ev, att: _failed(ev.cases("pattern:forbidden:")) and bool(ev.evidence_of(STALE_LABELS)),
         only_if_not_passed=True, needs_contract=True),
    Rule("relevant_memory_not_injected", "missing_memory", lambda ev, att: att.missing_relevant > 0,
         only_if_not_passed=True, needs_contract=True),
    Rule("relevant_evidence_never_stored", "missing_memory",
         lambda ev, att: bool(att.relevant_evidence) and not att.relevant, only_if_not_passed=True, needs_contract=True),
    Rule("relevant_injected_not_cited", "ignored_memory",
         lambda ev, att: bool(att.relevant) and not set(att.cited) & att.relevant,
         only_if_not_passed=True, needs_contract=True),
    Rule("irrelevant_memory_cited", "irrelevant_memory_distracted",
         lambda ev, att: any(i not in att.relevant and i not in att.stale for i in att.cited),
         only_if_not_passed=True, needs_contract=True),
    Rule("production_file_does_not_compile", "compile_failure", lambda ev, att: _failed(ev.cases("compile:")),
         only_if_not_passed=True),
    Rule("patch_pattern_violated", "test_failure", lambda ev, att: _failed(ev.cases("pattern:")),
         only_if_not_passed=True),
    Rule("oracle_not_passed", "test_failure", lambda ev, att: True, only_if_not_passed=True),
)


@dataclass(frozen=True)
class Classification:
    failure_reason: str | None
    rule: str | None
    excluded: bool = False

    @property
    def resolved(self) -> bool:
        return self.failure_reason is None and not self.excluded

    @property
    def memory_failure(self) -> bool:
        return self.failure_reason in MEMORY_FAILURE_REASONS


def classify(ev: SessionEvidence, att: Attribution) -> Classification:
    """The first rule of `RULES` that holds; no reason when none does (resolved). The one decision
    of a session's resolution (module doc): `resolve` and the verdict fold use it too."""
    if ev.outcome in EXCLUDING_OUTCOMES:
        return Classification(None, None, excluded=True)
    passed = ev.outcome == "pass"
    patch_decides = ev.resolution_policy == "patch_as_submitted"
    for rule in RULES:
        if rule.only_if_not_passed and passed:
            continue
        if rule.agent_conduct and passed and patch_decides:
            continue
        if not memory_judged(rule, ev, att):
            continue
        if rule.when(ev, att):
            return Classification(rule.reason, rule.name)
    return Classification(None, None)


def resolve(ev: SessionEvidence) -> Classification:
    """A session's classification from its evidence alone (what the verdict fold asks)."""
    return classify(ev, attribute(ev))


def failure_events(key: UnitKey, ev: SessionEvidence, att: Attribution, verdict: Classification) -> list[DerivedEvent]:
    """A task session's FailureClassified and MemoryContract."""
    session: dict[str, Any] = {"session_index": ev.session_index, "scored": ev.scored}
    failure = {**session, "resolved": verdict.resolved, "excluded": verdict.excluded,
               "failure_reason": verdict.failure_reason, "rule": verdict.rule,
               "memory_failure": verdict.memory_failure, "oracle_outcome": ev.outcome}
    contract = {**session, **shallow_fields(memory_contract(ev, att, verdict.resolved, verdict.failure_reason))}
    return [
        make_derived(key, "FailureClassified", ev.source_seq, failure, ev.session_index),
        make_derived(key, "MemoryContract", ev.source_seq, contract, ev.session_index),
    ]
