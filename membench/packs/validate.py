"""Admission gates of a pack (docs/design.md §4; DreamBench-SWE Appendix C.3-C.4) and the admission
funnel: authored → valid (static gates) → admitted (live gates, run in the sandbox).

Static gates, per trap:
- `hidden_material`: every session has its hidden oracle and a loadable reference solution;
- `secrets`: the trap's placeholders are well-formed, declared, used and its own (finalize found no
  problem); it has at least one CSPRNG secret; every secret was injected into an agent-visible
  event and into hidden material; every decisive literal contains a generated secret; nothing that
  looks like a placeholder is left after finalizing;
- `decisive_literals`: every decisive literal occurs in the scored session's oracle (a misspelt one
  names nothing and the leak gates would check nothing); a format-2 pack's C1-C8 trap declares one;
- `slot_patterns`: every slot of a reference solution whose answer needs memory (not empty, not its
  default) is captured by its pattern in some agent-visible text (an instruction, an event, the
  curated context), or `scripted:memory-literal` could never pass the trap;
- `why_not_verbatim`: every non-C1 trap says why verbatim replay of one event is insufficient;
- `no_single_event` (C2, C3, C6, C7): at least two required facts, no single event carries all of
  them (event_fact_map), no single event contains every decisive literal, and for C7 no event
  contains a decisive literal at all (the answer must be composed);
- `no_public_leak`: no decisive literal is in any session instruction or in the public repository
  (the message names the literal's index and the trap's secrets, never the value);
- `oracle_hidden`: no file of the base repository or of any reference solution equals an oracle
  (the oracle is mounted only into the scoring sandbox, never into a workspace);
- `oracle_runner`: every pytest oracle uses only what the fast oracle runner offers
  (`membench.sandbox.oracle_runners.fast_runner_refusal`: the pytest names, marks and fixtures of
  `membench/sandbox/harness/pytest_standin.py`); the refusal names the oracle and what it uses.

Live gates, per statically valid trap (each a real run through the runner, scored in the sandbox):
- `reference_passes`: `scripted:refsol` passes every session in order (a failure names the
  session and its failing oracle tests);
- `b0_headroom`: `scripted:memory-literal` under B0 fails S3 for C1–C8, and passes it for C9/C10
  (there the trap runs the other way);
- `verbatim_trap` (C9/C10 only): `scripted:memory-literal` under B5, a verbatim memory that
  surfaces the disproved lesson or the irrelevant memory, fails S3.

Which pack the funnel belongs to. Normally the checked pack is the one `membench run PACK` sees
(the finalized copy in MEMBENCH_HOME/packs, or the pack itself), and the funnel is recorded under
its digest. When a trap's placeholders are broken, `run` refuses the whole pack (finalizing is
strict) and validation checks a temporary copy (`ValidationReport.runnable` False) whose digest no
run will ever carry: the pack a user can run then is the *admitted pack* — the skeleton without its
refused traps (`write_admitted_pack`) — and the funnel is recorded under that pack's digest, the
one its runs carry (membench/commands/pack.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from membench.packs.finalize import finalize_pack, scan_placeholders, slot_problem, staged_directory
from membench.packs.pack_resolver import finalized_copy, resolve_pack_dir
from membench.runner.grid import RunConfig, RunUnit, run_unit
from membench.sandbox.base import Sandbox
from membench.sandbox.oracle_runners import fast_runner_refusal
from membench.sandbox.workspace import snapshot
from membench.formats.fields import read_input_text
from membench.formats.pack_format import (
    CONSTRUCT_NAMES,
    CONSTRUCTS,
    NO_SINGLE_EVENT_CONSTRUCTS,
    SECRET_LIKE,
    Pack,
    PackError,
    Sequence,
    decisive_literal_problem,
    has_placeholders,
    load_pack,
    load_solution,
    sequence_texts,
)

REVERSED_CONSTRUCTS = ("C9", "C10")
STATIC_GATES = ("hidden_material", "secrets", "decisive_literals", "slot_patterns", "why_not_verbatim", "no_single_event",
                "no_public_leak", "oracle_hidden", "oracle_runner")
LIVE_GATES = ("reference_passes", "b0_headroom", "verbatim_trap")


@dataclass
class TrapVerdict:
    seq_id: str
    construct: str
    gates: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {passed, detail}

    def gate(self, name: str, passed: bool, detail: str = "", ok: str = "") -> bool:
        """Record a gate; `detail` explains a failure, `ok` (optional) a pass."""
        self.gates[name] = {"passed": bool(passed), "detail": ok if passed else detail}
        return passed

    @property
    def valid(self) -> bool:
        return all(self.gates.get(g, {"passed": True})["passed"] for g in STATIC_GATES) and bool(self.gates)

    @property
    def admitted(self) -> bool:
        return self.valid and all(self.gates.get(g, {"passed": True})["passed"] for g in LIVE_GATES) \
            and "reference_passes" in self.gates

    @property
    def first_failure(self) -> str | None:
        for name in STATIC_GATES + LIVE_GATES:
            if name in self.gates and not self.gates[name]["passed"]:
                return f"{name}: {self.gates[name]['detail']}"
        return None


@dataclass
class ValidationReport:
    pack: str
    digest: str
    traps: list[TrapVerdict]
    runnable: bool = True  # False: DIGEST is a temporary copy's (broken placeholders), which no run carries

    @property
    def refused(self) -> list[str]:
        return [t.seq_id for t in self.traps if not t.admitted]

    def funnel(self) -> dict[str, Any]:
        by: dict[str, dict[str, int]] = {}
        for c in CONSTRUCTS:
            rows = [t for t in self.traps if t.construct == c]
            if rows:
                by[c] = {"authored": len(rows), "valid": sum(t.valid for t in rows),
                         "admitted": sum(t.admitted for t in rows)}
        return {"authored": len(self.traps), "valid": sum(t.valid for t in self.traps),
                "admitted": sum(t.admitted for t in self.traps), "by_construct": by}

    def to_json(self) -> dict[str, Any]:
        return {**self.funnel(), "pack": self.pack, "pack_digest": self.digest,
                "traps": [{"seq_id": t.seq_id, "construct": t.construct, "valid": t.valid, "admitted": t.admitted,
                           "first_failure": t.first_failure, "gates": t.gates} for t in self.traps]}

    def to_markdown(self) -> str:
        f = self.funnel()
        lines = [f"# Admission funnel — {self.pack}", "", f"pack digest `{self.digest}`", "",
                 "| construct | authored | valid | admitted |", "|---|---:|---:|---:|"]
        for c, row in f["by_construct"].items():
            lines.append(f"| {_construct_label(c)} | {row['authored']} | {row['valid']} | {row['admitted']} |")
        lines.append(f"| **total** | **{f['authored']}** | **{f['valid']}** | **{f['admitted']}** |")
        lines += ["", f"Total: {f['authored']} authored -> {f['valid']} valid -> {f['admitted']} admitted", ""]
        refused = [t for t in self.traps if not t.admitted]
        if refused:
            lines += ["## Refused traps", "", "| trap | construct | first failing gate |", "|---|---|---|"]
            for t in refused:
                lines.append(f"| {t.seq_id} | {_construct_label(t.construct)} | "
                             f"{(t.first_failure or '').replace('|', '/')} |")
        else:
            lines.append("Every trap passed every gate.")
        return "\n".join(lines) + "\n"


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def static_gates(pack: Pack, seq: Sequence, provenance: dict[str, Any] | None, base: dict[str, bytes]) -> TrapVerdict:
    v = TrapVerdict(seq.seq_id, seq.construct)
    hidden = pack.root / "hidden" / seq.seq_id
    # hidden material
    problems, oracles, solutions = [], [], []
    for session in seq.sessions:
        if getattr(session, "mode", "task") != "task":
            continue
        oracle = pack.oracle_path(seq, session)
        if getattr(session, "scoring", None) is None:
            if not oracle.is_file():
                problems.append(f"session {session.index}: missing oracle hidden/{seq.seq_id}/{session.oracle_id}.py")
            else:
                oracles.append(oracle.read_bytes())
        try:
            solutions.append((session.index, load_solution(pack.solution_path(seq, session), seq.seq_id)))
        except PackError as exc:
            problems.append(f"session {session.index}: {exc}")
    v.gate("hidden_material", not problems, "; ".join(problems))
    # secrets
    record = (provenance or {}).get("sequences", {}).get(seq.seq_id)
    texts = sequence_texts(_raw_sequence(pack, seq.seq_id))
    texts += [p.read_text(encoding="utf-8", errors="ignore") for p in sorted(hidden.rglob("*")) if p.is_file()] \
        if hidden.is_dir() else []
    leftovers = sorted({m.group(0) for t in texts for m in SECRET_LIKE.finditer(t)})
    if record is None:
        v.gate("secrets", False, "no CSPRNG secret was injected: the pack has no placeholders and no provenance "
                                 "(decisive literals must come from {{SECRET:name:class}} placeholders)")
    elif record.get("problems"):
        v.gate("secrets", False, record["problems"][0])
    elif leftovers:
        v.gate("secrets", False, f"leftover placeholder {leftovers[0]!r} after finalize")
    elif not record.get("secrets"):
        v.gate("secrets", False, "the trap has no CSPRNG secret")
    else:
        missing = [n for n, s in record["secrets"].items() if not any(p.startswith("event:") for p in s["placed_in"])]
        unhidden = [n for n, s in record["secrets"].items() if not any(p.startswith("file:hidden/") for p in s["placed_in"])]
        literal = [lit for lit, ok in zip(seq.decisive_literals, record.get("decisive_literals_with_secret", []))
                   if not ok]
        if missing:
            v.gate("secrets", False, f"secret '{missing[0]}' was never injected into an agent-visible event")
        elif unhidden:
            v.gate("secrets", False, f"secret '{unhidden[0]}' is in no oracle or reference solution")
        elif literal:
            v.gate("secrets", False, f"decisive literal {literal[0]!r} contains no generated secret")
        else:
            v.gate("secrets", True, ok=f"{len(record['secrets'])} secrets injected")
    # decisive literals name something the scored oracle checks
    problem = decisive_literal_problem(pack.root, seq, pack.format_version)
    v.gate("decisive_literals", problem is None, problem or "",
           ok=f"{len(seq.decisive_literals)} literals, each checked by the scored oracle")
    # slot patterns can find their answers
    visible = [e.content for e in seq.events] + [s.instruction for s in seq.sessions] + [seq.curated_context]
    slot_problems = [f"session {sol_index}: {problem}" for sol_index, solution in solutions
                     for name, slot in solution.slots.items()
                     if (problem := slot_problem(name, slot.answer, slot.pattern, slot.default, visible)) is not None]
    v.gate("slot_patterns", not slot_problems, "; ".join(slot_problems[:3]))
    # why not verbatim
    if seq.construct == "C1":
        v.gate("why_not_verbatim", True, ok="C1: verbatim retention is the construct")
    else:
        v.gate("why_not_verbatim", bool((seq.why_not_verbatim or "").strip()),
               "" if (seq.why_not_verbatim or "").strip() else f"{seq.construct} trap lacks field 'why_not_verbatim'")
    # no single event
    if seq.construct in NO_SINGLE_EVENT_CONSTRUCTS:
        required = set(seq.required_fact_ids)
        covering = [eid for eid, facts in seq.event_fact_map.items() if required and required <= set(facts)]
        literals = [_norm(lit) for lit in seq.decisive_literals]
        all_in_one = [e.event_id for e in seq.events if len(literals) > 1 and all(lit in _norm(e.content) for lit in literals)]
        composed = [e.event_id for e in seq.events for lit in literals if seq.construct == "C7" and lit in _norm(e.content)]
        if len(required) < 2:
            v.gate("no_single_event", False, f"{seq.construct} needs at least two required_fact_ids")
        elif covering:
            v.gate("no_single_event", False, f"event {covering[0]} carries every required fact")
        elif all_in_one:
            v.gate("no_single_event", False, f"event {all_in_one[0]} contains every decisive literal")
        elif composed:
            v.gate("no_single_event", False, f"C7: event {composed[0]} contains a decisive literal verbatim")
        else:
            v.gate("no_single_event", True, ok=f"{len(required)} facts over {len(seq.event_fact_map)} events")
    # public leak
    leaks = []
    secret_names = _trap_secrets(pack, seq)
    for k, lit in enumerate(seq.decisive_literals):
        # named by index and the trap's secrets, never quoted: the literal holds a secret value, and this
        # message goes to a terminal, a JSON report and CI logs
        named = f"decisive_literals[{k}]" + (f" (trap secrets: {', '.join(secret_names)})" if secret_names else "")
        for session in seq.sessions:
            if lit in session.instruction:
                leaks.append(f"session {session.index} instruction reveals {named}")
        for rel, content in base.items():
            if lit.encode() in content:
                leaks.append(f"repository file {rel} contains {named}")
    v.gate("no_public_leak", not leaks, "; ".join(leaks[:3]))
    # oracle hidden
    workspace_files = list(base.values())
    for _, solution in solutions:
        try:
            workspace_files += [t.encode() for t in solution.reference().values()]
        except KeyError:
            pass
    equal = [o for o in oracles if o in workspace_files]
    inside = [r for r in pack.repos.values() if hidden.resolve().is_relative_to(r.resolve())]
    v.gate("oracle_hidden", not equal and not inside,
           "an oracle equals a workspace file" if equal else ("hidden/ lies inside a repository" if inside else ""))
    # oracle runner: an oracle the fast runner cannot run as pytest would is scored by pytest, at
    # about three times the CPU of every session: refused here, so the author hears why
    refusals = []
    for session in seq.sessions:
        oracle = pack.oracle_path(seq, session)
        if getattr(session, "mode", "task") == "task" and getattr(session, "scoring", None) is None \
                and oracle.is_file():
            why = fast_runner_refusal(oracle)
            if why:
                refusals.append(f"session {session.index} (hidden/{seq.seq_id}/{session.oracle_id}.py): {why}")
    v.gate("oracle_runner", not refusals,
           "; ".join(refusals[:3]) + " — not offered by the fast oracle runner (docs/authoring.md, \"Oracles\")"
           if refusals else "")
    return v


def _trap_secrets(pack: Pack, seq: Sequence) -> list[str]:
    """The names of the trap's secrets (its declaration, else its provenance record): what a message
    names instead of a value, which is never stored outside the trap's own material."""
    if seq.secrets:
        return sorted(seq.secrets)
    provenance = pack.root / "provenance.json"
    if provenance.is_file():
        record = json.loads(provenance.read_text(encoding="utf-8")).get("sequences", {}).get(seq.seq_id, {})
        return sorted(record.get("secrets", {}))
    return []


def _raw_sequence(pack: Pack, seq_id: str) -> dict[str, Any]:
    raw = json.loads(read_input_text(pack.root / "manifest.json", PackError))  # size-limited, strict UTF-8
    return next((s for s in raw.get("sequences", []) if s.get("seq_id") == seq_id), {})


class _Collector:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any, datum: bytes) -> None:
        self.events.append(event)

    def verdicts(self) -> dict[int, str]:
        return {e.session_index: e.payload["outcome"] for e in self.events if e.kind == "OracleVerdict"}

    def failing_cases(self, session: int) -> str:
        """' (failing: test_a, test_b)' — the oracle tests of SESSION that did not pass, or ''."""
        for e in self.events:
            if e.kind == "OracleVerdict" and e.session_index == session:
                bad = [f"{c['case_id']} {c['outcome']}" for c in e.payload.get("cases", []) if c.get("outcome") != "pass"]
                return f" (failing: {', '.join(bad[:5])}{', …' if len(bad) > 5 else ''})" if bad else ""
        return ""

    def ended(self) -> tuple[str, str | None]:
        end = next((e for e in self.events if e.kind == "RunEnded"), None)
        return (end.payload["status"], end.payload.get("error_type")) if end else ("missing", None)


def _live_run(pack: Pack, seq: Sequence, condition: str, agent: str, sandbox: Sandbox, timeout_s: float) -> _Collector:
    collector = _Collector()
    config = RunConfig(run_set=f"validate-{pack.name}-{pack.digest[:8]}", agent=agent, oracle_timeout_s=timeout_s)
    run_unit(pack, RunUnit(pack.name, seq.seq_id, condition, 0), config, sandbox, collector)
    return collector


def live_gates(pack: Pack, seq: Sequence, verdict: TrapVerdict, sandbox: Sandbox, timeout_s: float = 60.0) -> None:
    scored = seq.scored_session.index
    ref = _live_run(pack, seq, "B0", "scripted:refsol", sandbox, timeout_s)
    status, error = ref.ended()
    outcomes = ref.verdicts()
    failing = [f"S{i}: {outcomes.get(s.index, 'no verdict')}{ref.failing_cases(s.index)}"
               for i, s in enumerate(seq.sessions, 1)
               if getattr(s, "mode", "task") == "task" and outcomes.get(s.index) != "pass"]
    if status != "completed":
        verdict.gate("reference_passes", False, f"reference run ended {status} ({error})")
        return
    if not verdict.gate("reference_passes", not failing, "reference solution fails " + ", ".join(failing)):
        return
    b0 = _live_run(pack, seq, "B0", "scripted:memory-literal", sandbox, timeout_s)
    b0_outcome = b0.verdicts().get(scored, "no verdict")
    if seq.construct in REVERSED_CONSTRUCTS:
        verdict.gate("b0_headroom", b0_outcome == "pass",
                     f"{seq.construct}: no memory must pass S3 (the trap is in the memory), got {b0_outcome}")
        b5 = _live_run(pack, seq, "B5", "scripted:memory-literal", sandbox, timeout_s)
        b5_outcome = b5.verdicts().get(scored, "no verdict")
        verdict.gate("verbatim_trap", b5_outcome != "pass",
                     f"verbatim memory (B5) must fail S3 by surfacing the trap memory, got {b5_outcome}")
    else:
        verdict.gate("b0_headroom", b0_outcome != "pass", f"B0 must fail S3, got {b0_outcome}")


def validate_pack(spec: str, home: Path, sandbox: Sandbox, workers: int = 2,
                  on_trap: Callable[[TrapVerdict], None] | None = None, timeout_s: float = 60.0) -> ValidationReport:
    """Run every gate over PACK (a built-in name or a directory). A malformed manifest raises
    PackError (the whole pack is refused); a bad trap is refused and counted in the funnel."""
    root = resolve_pack_dir(spec)
    load_pack(root, check_hidden=False)  # manifest-level problems refuse the whole pack
    provenance: dict[str, Any] | None = None
    tmp: tempfile.TemporaryDirectory | None = None
    if has_placeholders(root):
        scan = scan_placeholders(root)
        if scan["pack_problems"]:
            raise PackError(scan["pack_problems"][0])
        if any(e["problems"] for e in scan["sequences"].values()):
            tmp = tempfile.TemporaryDirectory(prefix="membench-validate-")
            final = Path(tmp.name) / root.name
            finalize_pack(root, final, strict=False)
        else:
            final = finalized_copy(root, home)
        provenance = json.loads((final / "provenance.json").read_text(encoding="utf-8"))
    else:
        final = root
        if (root / "provenance.json").exists():
            provenance = json.loads((root / "provenance.json").read_text(encoding="utf-8"))
    try:
        pack = load_pack(final, check_hidden=False)
        bases = {name: snapshot(path) for name, path in pack.repos.items()}
        verdicts = [static_gates(pack, seq, provenance, bases[seq.repo]) for seq in pack.sequences]

        def live(index: int) -> TrapVerdict:
            v = verdicts[index]
            if v.valid:
                live_gates(pack, pack.sequences[index], v, sandbox, timeout_s)
            if on_trap:
                on_trap(v)
            return v

        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="membench-validate") as pool:
            list(pool.map(live, range(len(verdicts))))
        return ValidationReport(pack.name, pack.digest, verdicts, runnable=tmp is None)
    finally:
        if tmp is not None:
            tmp.cleanup()


def write_admitted_pack(spec: str, report: ValidationReport, out: Path) -> Path:
    """PACK's skeleton without the traps REPORT refused, written to OUT (whole or not at all): the pack
    to run after a refusal. Like any skeleton it is finalized on its first use, with fresh secrets.
    PackError when nothing was refused (PACK is its own admitted pack), nothing was admitted, or OUT
    exists."""
    root = resolve_pack_dir(spec)
    refused = set(report.refused)
    if not refused:
        raise PackError(f"every trap of {report.pack} was admitted: the pack is its own admitted pack")
    if len(refused) == len(report.traps):
        raise PackError(f"no trap of {report.pack} was admitted: there is no admitted pack to write")
    out = Path(out)
    if out.exists():
        raise PackError(f"{out}: already exists (the admitted pack is written to a new directory)")
    with staged_directory(out, replace=False) as work:
        shutil.copytree(root, work, ignore=shutil.ignore_patterns("__pycache__"))
        manifest = json.loads((work / "manifest.json").read_text(encoding="utf-8"))
        manifest["sequences"] = [s for s in manifest.get("sequences", []) if s.get("seq_id") not in refused]
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        for seq_id in refused:  # the refused traps' oracles and solutions leave with them
            shutil.rmtree(work / "hidden" / seq_id, ignore_errors=True)
        load_pack(work, check_hidden=True)  # what is written is a loadable pack
    return out


def _construct_label(construct: str) -> str:
    """The construct with its name (DreamBench-SWE Table 30), as the report shows it."""
    name = CONSTRUCT_NAMES.get(construct)
    return f"{construct} {name}" if name else construct
