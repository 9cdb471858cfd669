"""Skill banks seen by sandboxed agents (command and model agents): agent-run distillation in the
learning phase, the frozen bank mounted read-only in the transfer phase (docs/transfer.md).

Distillation session (after every learning task, passed or not): the agent runs in its sandbox with
- /workspace: a scratch directory (discarded: a distillation changes no task);
- /skills, read-write: a staging copy of the bank as it stands (the skills distilled so far);
- /finished, read-only: `workspace/` (the finished task's tree as the oracle scored it), `diff.patch`
  (its production diff) and `task.json` (`{"protocol": 1, "task_id", "instruction", "outcome"}`,
  outcome `pass`/`fail`/… of the hidden oracle — the verdict only, never the oracle);
- the instruction DISTILL_INSTRUCTION (naming the task and the outcome), and MEMBENCH_DISTILL=1,
  MEMBENCH_SKILLS_DIR=/skills, MEMBENCH_FINISHED_DIR=/finished.
The harness then reads the staging copy without following links and keeps only `<name>/SKILL.md`
regular files with a plain name (SKILL_NAME), at most MAX_SKILL_BYTES of UTF-8 text, at most
MAX_SKILLS skills in the bank, examining at most MAX_ENTRIES entries. Anything else (a symlink,
another file, an oversized or binary skill, a removed skill: skills already distilled are never
lost) is refused: one harness `Turn`
(source_kind `skill_refused`) names the path and the reason; the run goes on. Each new or changed
skill is copied into the bank and recorded as a `MemoryWrite`.

Transfer: MountedBankAgent hands the frozen bank to the agent at /skills read-only (the sandbox
mounts it so; a write fails inside the jail) and appends BANK_NOTE to its instruction, so a program
agent reads it from the instruction file and MEMBENCH_SKILLS_DIR, a model agent from its prompt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from membench.agents.base import SKILLS_MOUNT, AgentTask
from membench.memory_systems.base import MemoryContext
from membench.memory_systems.skill_bank import MANIFEST
from membench.sandbox.workspace import write_files
from membench.schemas.payloads import BoundedText

SANDBOXED_KINDS = ("command", "model")  # agents that run in the sandbox and can be shown a bank directory
SCRIPTED, AGENT = "scripted", "agent"  # which distiller wrote a learned bank (SkillBankFrozen.distiller)
FINISHED_MOUNT = "/finished"
SKILL_FILE = "SKILL.md"
SKILL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_SKILL_BYTES = 16 * 1024
MAX_SKILLS = 64
MAX_ENTRIES = 1024  # entries of the staging copy examined; a flood beyond is refused unread

DISTILL_INSTRUCTION = (  # a template: {task_id}, {outcome}
    "Distillation session for learning task {task_id} (the hidden oracle's outcome: {outcome}). "
    "What you write here is kept for later projects.\n"
    f"- {FINISHED_MOUNT}/task.json: the task's id, instruction and the hidden oracle's outcome; "
    f"{FINISHED_MOUNT}/workspace: the repository as you left it; {FINISHED_MOUNT}/diff.patch: your production diff.\n"
    f"- {SKILLS_MOUNT}: the skill bank (read-write). Write what is worth reusing as {SKILLS_MOUNT}/<name>/{SKILL_FILE} "
    f"(name: letters, digits, '.', '_', '-'; at most {MAX_SKILL_BYTES} bytes of UTF-8 text; at most {MAX_SKILLS} skills). "
    "You may rewrite a skill; removing one, symlinks and any other file are refused.\n"
    "- Nothing you change in /workspace is kept.")

BANK_NOTE = (f"\n\nA frozen skill bank is mounted read-only at {SKILLS_MOUNT} (one <name>/{SKILL_FILE} per skill, "
             f"learned earlier; also in $MEMBENCH_SKILLS_DIR). Read what helps; it cannot be changed.")


def distill_instruction(task_id: str, outcome: str) -> str:
    return DISTILL_INSTRUCTION.format(task_id=task_id, outcome=outcome)


def runs_in_sandbox(agent) -> bool:
    return getattr(agent, "kind", None) in SANDBOXED_KINDS


class MountedBankAgent:
    """The transfer unit's agent with the frozen bank at /skills (read-only) and the note saying so."""

    def __init__(self, agent, bank: Path):
        self.agent, self.bank = agent, Path(bank)
        self.name, self.kind = agent.name, agent.kind
        self.model = getattr(agent, "model", None)
        self._told = False

    def act(self, task: AgentTask, emitter):
        if not self._told:  # what the agent is told about the bank is in its log once
            self._told = True
            emitter.emit("Turn", {"role": "system", "text": _text(BANK_NOTE.strip()), "source_event_id": None,
                                  "source_kind": "skill_bank_mount", "input_tokens": 0, "cached_tokens": 0,
                                  "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0})
        return self.agent.act(replace(task, instruction=task.instruction + BANK_NOTE, skills=self.bank,
                                      skills_writable=False), emitter)


def _text(value: str) -> BoundedText:
    from membench.schemas.events import bounded_text

    return bounded_text(value)


@dataclass(frozen=True)
class Refusal:
    path: str  # relative to the bank
    reason: str


@dataclass(frozen=True)
class Distilled:
    written: list[tuple[str, str]]  # (skill name, text) new or changed, already in the bank
    refused: list[Refusal]
    status: str  # the distillation session's agent status


def stage(bank: Path, staging: Path) -> None:
    """A writable copy of the bank's skills (never its manifest) for the agent's session."""
    staging.mkdir(parents=True, exist_ok=True)
    for skill in sorted(bank.iterdir()) if bank.exists() else []:
        if skill.name != MANIFEST and (skill / SKILL_FILE).is_file():
            (staging / skill.name).mkdir()
            shutil.copyfile(skill / SKILL_FILE, staging / skill.name / SKILL_FILE)


def collect(bank: Path, staging: Path) -> tuple[list[tuple[str, str]], list[Refusal]]:
    """Validate what the agent left in STAGING against BANK: (accepted new or changed skills, refusals).
    Reads with lstat and never follows a link, so nothing outside the staging directory is read."""
    accepted: list[tuple[str, str]] = []
    refused: list[Refusal] = []
    present: set[str] = set()
    existing = {p.name for p in bank.iterdir() if (p / SKILL_FILE).is_file()} if bank.exists() else set()
    seen = 0
    for dirpath, dirnames, filenames in os.walk(staging, followlinks=False):
        rel_dir = Path(dirpath).relative_to(staging)
        for name in sorted(dirnames + filenames):
            seen += 1
            if seen > MAX_ENTRIES:
                refused.append(Refusal(rel_dir.as_posix(), f"more than {MAX_ENTRIES} entries: the rest not examined"))
                dirnames[:] = []
                break
            path = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            mode = os.lstat(path).st_mode
            depth = len(rel_dir.parts)
            if stat.S_ISLNK(mode):
                refused.append(Refusal(rel, "a symbolic link"))
            elif stat.S_ISDIR(mode):
                if depth > 0:
                    refused.append(Refusal(rel, f"a directory inside a skill (only <name>/{SKILL_FILE})"))
                elif not SKILL_NAME.match(name):
                    refused.append(Refusal(rel, "not a plain skill name (letters, digits, '.', '_', '-')"))
            elif depth != 1 or name != SKILL_FILE:
                refused.append(Refusal(rel, f"not a <name>/{SKILL_FILE} file"))
            elif not SKILL_NAME.match(rel_dir.parts[0]):
                continue  # its directory was refused already
            elif not stat.S_ISREG(mode):
                refused.append(Refusal(rel, "not a regular file"))
            else:
                size = os.lstat(path).st_size
                if size > MAX_SKILL_BYTES:
                    refused.append(Refusal(rel, f"{size} bytes, more than {MAX_SKILL_BYTES}"))
                    continue
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as f:
                    data = f.read(MAX_SKILL_BYTES + 1)
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    refused.append(Refusal(rel, f"not UTF-8 text (byte {exc.start})"))
                    continue
                skill = rel_dir.parts[0]
                present.add(skill)
                old = bank / skill / SKILL_FILE
                if old.is_file() and old.read_text(encoding="utf-8", errors="replace") == text:
                    continue
                if skill not in existing and len(existing) + len(accepted) >= MAX_SKILLS:
                    refused.append(Refusal(rel, f"the bank holds {MAX_SKILLS} skills already"))
                    continue
                accepted.append((skill, text))
        if seen > MAX_ENTRIES:
            break
        dirnames[:] = [d for d in dirnames if not os.path.islink(Path(dirpath) / d)]
    for skill in sorted(existing - present):
        refused.append(Refusal(f"{skill}/{SKILL_FILE}", "a removed skill (skills already distilled are kept)"))
    return accepted, refused


def distill_with_agent(agent, emitter, sandbox, gateway, bank: Path, task_id: str, instruction: str,
                       finished: dict[str, bytes], diff: str, outcome: str) -> Distilled:
    """One distillation session of a sandboxed agent; new or changed skills are written into BANK."""
    with tempfile.TemporaryDirectory(prefix="membench-distill-") as tmp:
        root = Path(tmp)
        staging, scratch, shown = root / "skills", root / "scratch", root / "finished"
        stage(bank, staging)
        scratch.mkdir()
        write_files(finished, shown / "workspace")
        (shown / "diff.patch").write_text(diff, encoding="utf-8")
        (shown / "task.json").write_text(json.dumps({"protocol": 1, "task_id": task_id, "instruction": instruction,
                                                     "outcome": outcome}, indent=1), encoding="utf-8")
        for path in [shown, *shown.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        # no reference solution: a distillation session has none, and only scripted agents read it
        result = agent.act(AgentTask(distill_instruction(task_id, outcome), scratch, MemoryContext((), (), 0),
                                     None,  # type: ignore[arg-type]
                                     sandbox=sandbox,
                                     gateway=gateway, skills=staging, skills_writable=True,
                                     extra_ro_mounts={FINISHED_MOUNT: shown},
                                     extra_env={"MEMBENCH_DISTILL": "1", "MEMBENCH_FINISHED_DIR": FINISHED_MOUNT}),
                           emitter)
        accepted, refused = collect(bank, staging)
    for skill, text in accepted:
        target = bank / skill / SKILL_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return Distilled(accepted, refused, result.status)


__all__ = ["AGENT", "BANK_NOTE", "DISTILL_INSTRUCTION", "Distilled", "FINISHED_MOUNT", "MAX_ENTRIES", "MAX_SKILLS", "MAX_SKILL_BYTES",
           "MountedBankAgent", "Refusal", "SCRIPTED", "collect", "distill_instruction", "distill_with_agent", "runs_in_sandbox", "stage"]
