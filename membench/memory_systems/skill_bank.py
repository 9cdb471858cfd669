"""skill_bank: a frozen directory of skills (`<name>/SKILL.md`) with a SHA-256 manifest
`MANIFEST.sha256` (lines `<sha256>  <relative path>`, the `sha256sum` format) covering every file.

The manifest is verified before use — a missing, extra or changed file refuses the bank
(`SkillBankError`) — and the manifest's own SHA-256 is the bank's digest, recorded in RunStarted's
`skill_bank_digest`. A read ranks the skills by TF-IDF cosine similarity to the query and admits
whole skills with a positive score, best first, while they fit the token budget. Writes are
ignored: the bank is frozen."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from membench.memory_systems.base import MemoryContext, MemoryItem, MemorySetup, Namespace
from membench.memory_systems.text import tfidf_scores
from membench.schemas.events import Event

MANIFEST = "MANIFEST.sha256"


class SkillBankError(RuntimeError):
    """The skill bank is missing or does not match its SHA-256 manifest."""


def write_manifest(bank: Path) -> str:
    """(Re)write MANIFEST.sha256 for every file of BANK; returns the bank digest. For authors."""
    bank = Path(bank)
    lines = []
    for path in sorted(p for p in bank.rglob("*") if p.is_file() and p.name != MANIFEST):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(bank).as_posix()}")
    (bank / MANIFEST).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return hashlib.sha256((bank / MANIFEST).read_bytes()).hexdigest()


def verify_bank(bank: Path) -> tuple[str, dict[str, str]]:
    """Check BANK against its manifest; returns (digest, {skill name: SKILL.md text})."""
    bank = Path(bank)
    manifest = bank / MANIFEST
    if not manifest.is_file():
        raise SkillBankError(f"{bank}: no {MANIFEST} (a skill bank must be frozen with a SHA-256 manifest)")
    listed: dict[str, str] = {}
    for n, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        digest, _, rel = line.partition("  ")
        if len(digest) != 64 or not rel:
            raise SkillBankError(f"{manifest}: line {n}: expected '<sha256>  <path>'")
        listed[rel] = digest
    present = {p.relative_to(bank).as_posix() for p in bank.rglob("*") if p.is_file() and p.name != MANIFEST}
    for rel in sorted(present - set(listed)):
        raise SkillBankError(f"{bank / rel}: file not in {MANIFEST} (the bank is frozen)")
    for rel, digest in sorted(listed.items()):
        path = bank / rel
        if not path.is_file():
            raise SkillBankError(f"{path}: listed in {MANIFEST} but missing")
        actual = hashlib.sha256(path.read_bytes()).hexdigest()
        if actual != digest:
            raise SkillBankError(f"{path}: SHA-256 {actual} does not match {MANIFEST} ({digest})")
    skills = {Path(rel).parent.as_posix(): (bank / rel).read_text(encoding="utf-8")
              for rel in sorted(listed) if Path(rel).name == "SKILL.md"}
    return hashlib.sha256(manifest.read_bytes()).hexdigest(), skills


class SkillBankMemory:
    condition = "skill_bank"
    uses_memory = True
    accepts_setup = True

    def __init__(self, namespace: Namespace, setup: MemorySetup | None = None):
        self.namespace = namespace
        bank = (setup or MemorySetup()).skill_bank
        if bank is None:
            raise SkillBankError("condition skill_bank: the pack names no skill bank (manifest field 'skill_bank')")
        self.skill_bank_digest, skills = verify_bank(bank)
        self._items = [MemoryItem(f"skill:{name}", "skill", text, (), ()) for name, text in skills.items()]

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        return []

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        if not self._items:
            return MemoryContext((), (), budget_tokens)
        scores = tfidf_scores([i.text for i in self._items], query)
        order = sorted(range(len(self._items)), key=lambda i: (-float(scores[i]), i))
        admitted, used = [], 0
        for i in order:
            if scores[i] <= 0:
                break
            if used + self._items[i].tokens <= budget_tokens:
                admitted.append(self._items[i])
                used += self._items[i].tokens
        return MemoryContext(tuple(admitted), tuple(self._items[i].memory_id for i in order), budget_tokens)
