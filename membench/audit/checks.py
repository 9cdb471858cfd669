"""The checks replay makes beside the hash chains: scored diffs and recorded model calls against
the run set's blob store, transfer runs' skill-bank digests against their seed's frozen banks, and
where a source's blob store and banks are (`SourceDirs`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from membench.audit.findings import Finding
from membench.schemas.events import Event
from membench.formats.fields import is_plain_name
from membench.schemas.log_root import HEX64

# (inline text field, digest field) of PatchProduced (event v3): a diff is inline up to 64 KiB,
# else only its digest is set and the text is in the run set's blob store, blobs/<sha256>
DIFF_FIELDS = (("production_diff", "production_diff_sha256"), ("stripped_diff", "stripped_diff_sha256"))


class BlobStore:
    """The content-addressed store of one run set (`runs/<run_set>/blobs/<sha256>`); each blob is
    hashed once however many events name it."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self._checked: dict[str, str | None] = {}

    def problem(self, digest: str) -> str | None:
        """None when blobs/<digest> exists and hashes to digest; else what is wrong."""
        if digest not in self._checked:
            self._checked[digest] = self._check(digest)
        return self._checked[digest]

    def _check(self, digest: str) -> str | None:
        if self.directory is None:
            return "no blob store is known for this source"
        path = self.directory / digest
        if not path.is_file():
            return f"blob {path} is missing"
        sha = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                sha.update(chunk)
        if sha.hexdigest() != digest:
            return f"blob {path} has SHA-256 {sha.hexdigest()}, not its name"
        return None


def diff_findings(event: Event, blobs: BlobStore) -> list[Finding]:
    """A PatchProduced's diffs against their digests: an inline text must hash to its digest, a
    digest without inline text must name a blob that hashes to it. Null fields (logs written
    before event v3, or a patch without that part) are not findings."""
    if event.kind != "PatchProduced":
        return []
    out = []
    for text_field, digest_field in DIFF_FIELDS:
        text, digest = event.payload.get(text_field), event.payload.get(digest_field)
        if text is None and digest is None:
            continue
        if digest is None:
            out.append(Finding(event.run_id, event.seq, f"PatchProduced.{text_field} is inline but "
                                                        f"{digest_field} is null"))
        elif not HEX64.match(digest):  # never a path: a digest like "../x" must not reach the file system
            out.append(Finding(event.run_id, event.seq, f"PatchProduced.{digest_field} {digest[:80]!r} is not "
                                                        "64 lowercase hex characters"))
        elif text is not None:
            actual = hashlib.sha256(text.encode("utf-8")).hexdigest()
            if actual != digest:
                out.append(Finding(event.run_id, event.seq, f"PatchProduced.{digest_field} {digest} is not the "
                                                            f"SHA-256 of the inline {text_field} ({actual})"))
        else:
            problem = blobs.problem(digest)
            if problem:
                out.append(Finding(event.run_id, event.seq, f"PatchProduced.{text_field} is stored by digest "
                                                            f"{digest_field} only, and {problem}"))
    return out


def model_call_findings(event: Event, blobs: BlobStore) -> list[Finding]:
    """A recorded ModelCall's request and response bodies must be in the blob store under their
    digests (they are what `--model-replay` answers from, and what an auditor reads)."""
    if event.kind != "ModelCall" or not event.payload.get("recorded"):
        return []
    out = []
    for name in ("request_digest", "response_digest"):
        digest = event.payload.get(name)
        if digest is None or not HEX64.match(digest):
            out.append(Finding(event.run_id, event.seq, f"ModelCall.{name} {str(digest)[:80]!r} is not "
                                                        "64 lowercase hex characters"))
            continue
        problem = blobs.problem(digest)
        if problem:
            out.append(Finding(event.run_id, event.seq, f"ModelCall {event.payload.get('call_id')} is recorded "
                                                        f"but its {name.split('_')[0]} body: {problem}"))
    return out


# ------------------------------------------------------------------------ transfer skill banks


@dataclass
class BankLedger:
    """What the skill-bank check needs from the log: the digests each learning run froze
    (`SkillBankFrozen`) and the digest each transfer run says it used (`RunStarted`). Small (a few
    entries per run), so `replay --jobs N` workers send theirs to the parent, which checks them all:
    a learning run and the transfer runs of its seed may be replayed by different workers."""

    # (run_set, seed, bank, digest, run_id, seq) of every SkillBankFrozen
    frozen: list[tuple[str, int, str, str, str, int]] = field(default_factory=list)
    # (run_set, run_id, seq, seed, condition, skill_bank_digest) of every transfer run's RunStarted
    uses: list[tuple[str, str, int, int, str, str | None]] = field(default_factory=list)
    _seeds: dict[str, int] = field(default_factory=dict)  # learning run -> seed (from its RunStarted)

    def add(self, event: Event) -> None:
        if event.kind == "RunStarted" and event.payload.get("family") == "transfer":
            seed = event.payload["seed"]  # RunStarted's seed, task and condition are required fields
            if event.payload["task"] == "learning":
                self._seeds[event.run_id] = seed
            else:
                self.uses.append((event.run_set, event.run_id, event.seq, seed, event.payload["condition"],
                                  event.payload.get("skill_bank_digest")))
        elif event.kind == "SkillBankFrozen":
            learned_seed = self._seeds.get(event.run_id)
            if learned_seed is not None:
                self.frozen.append((event.run_set, learned_seed, event.payload["bank"], event.payload["digest"],
                                    event.run_id, event.seq))

    def extend(self, other: "BankLedger") -> None:
        self.frozen.extend(other.frozen)
        self.uses.extend(other.uses)

    def findings(self, banks_for: Callable[[str], Path | None] | None) -> list[Finding]:
        """A transfer run's `RunStarted.skill_bank_digest` must be a digest its seed's learning run
        froze for the condition's bank; a bank directory that is present (`banks_for(run_set)/
        s<seed>/<bank>`) must still verify against its MANIFEST.sha256, whose SHA-256 must be a
        frozen digest. A retried learning unit freezes again, so any of a seed's frozen digests
        counts."""
        from membench.memory_systems.skill_bank import MANIFEST, SkillBankError, verify_bank
        from membench.transfer_protocol.bank import CONDITION_BANKS

        digests: dict[tuple[str, int, str], set[str]] = {}
        where: dict[tuple[str, int, str], tuple[str, int]] = {}
        for run_set, seed, bank, digest, run_id, seq in self.frozen:
            key = (run_set, seed, bank)
            digests.setdefault(key, set()).add(digest)
            where[key] = max(where.get(key, (run_id, seq)), (run_id, seq))  # one deterministic event to name
        out = []
        for run_set, run_id, seq, seed, condition, stated in self.uses:
            used = CONDITION_BANKS.get(condition)
            if used is None:
                if stated is not None:
                    out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {stated} on condition "
                                                    f"{condition!r}, which uses no skill bank"))
                continue
            frozen = digests.get((run_set, seed, used))
            if stated is None:
                continue  # no bank was frozen for its seed: the runner excluded the run (skill_bank_modified)
            if not frozen:
                out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {stated}: the log holds no "
                                                f"SkillBankFrozen of bank {used!r} for seed {seed}"))
            elif stated not in frozen:
                out.append(Finding(run_id, seq, f"RunStarted.skill_bank_digest {stated} is not the digest seed "
                                                f"{seed}'s learning run froze for bank {used!r} "
                                                f"({', '.join(sorted(frozen))})"))
        for (run_set, seed, bank), frozen in sorted(digests.items()):
            root = banks_for(run_set) if banks_for is not None else None
            directory = root / f"s{seed}" / bank if root is not None else None
            if directory is None or not directory.is_dir():
                continue  # the banks are not beside this source: only the digests above are checked
            run_id, seq = where[(run_set, seed, bank)]
            manifest = directory / MANIFEST
            if not manifest.is_file():
                out.append(Finding(run_id, seq, f"skill bank {directory} has no {MANIFEST}"))
                continue
            actual = hashlib.sha256(manifest.read_bytes()).hexdigest()
            if actual not in frozen:
                out.append(Finding(run_id, seq, f"{manifest} hashes to {actual}, not the frozen digest of bank "
                                                f"{bank!r} ({', '.join(sorted(frozen))})"))
                continue
            try:
                verify_bank(directory)
            except SkillBankError as exc:
                out.append(Finding(run_id, seq, f"skill bank {bank!r} no longer matches its manifest: {exc}"))
        return out


@dataclass(frozen=True)
class SourceDirs:
    """Where a source's blob store and skill banks are: beside a log file (`file_dir`), else the run
    set's directory under `runs_dir`. Picklable, so `replay --jobs N` workers get it."""

    file_dir: Path | None = None
    runs_dir: Path | None = None

    def _root(self, run_set: str) -> Path | None:
        if self.file_dir is not None:
            return self.file_dir
        # a run-set id that is not a plain name never becomes a path
        return self.runs_dir / run_set if self.runs_dir is not None and is_plain_name(run_set) else None

    def blobs(self, run_set: str) -> Path | None:
        root = self._root(run_set)
        return root / "blobs" if root is not None else None

    def banks(self, run_set: str) -> Path | None:
        root = self._root(run_set)
        return root / "banks" if root is not None else None
