"""Skill banks of the transfer protocol: the scripted distiller, freezing, the ablated copy.

The scripted distiller (scripted agents; sandboxed agents distil themselves, agent_bank.py) turns a learning task the agent solved
into one skill, `<task id>/SKILL.md`: the instruction it was given and the production diff that
passed the hidden oracle. A task that did not pass leaves no skill: only verified practice is
distilled. Freezing writes `MANIFEST.sha256` (membench/memory_systems/skill_bank.py) and makes
every file read-only; the `SkillBankFrozen` event records each file's SHA-256 and the digest.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from membench.memory_systems.skill_bank import MANIFEST, verify_bank, write_manifest
from membench.schemas.payloads import BankFile

LEARNED, NATIVE, ABLATED = "learned", "native", "ablated"
#: condition -> the bank it mounts (no_memory mounts none)
CONDITION_BANKS = {"learned_bank": LEARNED, "native_bank": NATIVE, "ablated_bank": ABLATED}


def distill(instruction: str, diff: str, task_id: str) -> str:
    return (f"---\nname: {task_id}\nsource: learning task {task_id}\n---\n# Skill from {task_id}\n\n"
            f"Task: {instruction}\n\nWhat passed the task's checks (production diff):\n\n{diff}\n")


def write_skill(bank: Path, task_id: str, text: str) -> None:
    target = bank / task_id / "SKILL.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def freeze(bank: Path) -> tuple[str, list[BankFile]]:
    """Write the bank's manifest, make it read-only; returns (digest, [{path, sha256}])."""
    bank.mkdir(parents=True, exist_ok=True)
    digest = write_manifest(bank)
    files: list[BankFile] = []
    for line in (bank / MANIFEST).read_text(encoding="utf-8").splitlines():
        if line.strip():
            sha, _, rel = line.partition("  ")
            files.append({"path": rel, "sha256": sha})
    for path in bank.rglob("*"):
        if path.is_file():
            path.chmod(0o444)
    return digest, files


def copy_bank(source: Path, dest: Path, without: str | frozenset[str] | None = None) -> None:
    """Copy a bank's skills (not its manifest), leaving out the skill directory (or directories) `without`."""
    left_out = frozenset([without]) if isinstance(without, str) else (without or frozenset())
    if dest.exists():
        remove_bank(dest)
    for path in sorted(source.rglob("*")):
        rel = path.relative_to(source)
        if not path.is_file() or path.name == MANIFEST or rel.parts[0] in left_out:
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(path.read_bytes())
    dest.mkdir(parents=True, exist_ok=True)


def remove_bank(bank: Path) -> None:
    for path in bank.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
    shutil.rmtree(bank)


def check_frozen(bank: Path, expected_digest: str) -> str | None:
    """None when BANK verifies against its manifest and the manifest's digest is the recorded one;
    else the reason, one line."""
    if not Path(bank).is_dir():  # e.g. a runner on another machine without the learning machine's banks
        return (f"{bank}: no such bank directory (a transfer runner needs the learning runner's "
                f"runs/<run set>/banks/ under its MEMBENCH_HOME)")
    try:
        digest, _ = verify_bank(bank)
    except Exception as exc:  # SkillBankError, or an unreadable file
        return str(exc)
    if digest != expected_digest:
        return f"{bank}: bank digest {digest} is not the frozen one {expected_digest}"
    return None


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


__all__ = ["ABLATED", "CONDITION_BANKS", "LEARNED", "NATIVE", "check_frozen", "copy_bank", "distill", "file_digest",
           "freeze", "remove_bank", "write_skill"]
