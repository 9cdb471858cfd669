"""NATIVE: the agent's own memory files, carried between the sessions of one unit (docs/memory-systems.md).

Every other condition is a memory system membench runs; under NATIVE the agent is its own memory
system. What it chose to remember lives where its CLI keeps it — Claude Code's project CLAUDE.md
family and its auto memory under HOME, Codex's AGENTS.md chain (and its memories folder when
enabled), a declared `MEMORY.md` for any other agent — and membench keeps exactly those files
(`SURFACES`) from one session of the unit to the next, in the unit's own instance (one per
namespace: never another condition's, seed's or sequence's):

- before a session the files are written back where the agent keeps them (the workspace and a
  fresh HOME); the MemoryRead records what the agent's own loader loads at start, within its own
  cap (`loaded_view`), and nothing is added to the agent's prompt;
- after the session every changed file is a MemoryWrite whose content is the file's unified diff,
  and the workspace's memory files are taken out of the workspace, so they are never the patch and
  never reach a later session but through here;
- after the pack's events that follow a session are delivered, the agent is told them in a
  memory-update turn (`write`): it may record what it wants in its memory files; only those are
  kept (anything else it changes there is dropped). The delivered events are the provenance.

A workspace file is memory only when the pack's base checkout does not have it: a CLAUDE.md or
AGENTS.md the repository ships is the pack's, its edits part of the patch.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membench.memory_systems.base import MemoryContext, MemoryItem, Namespace
from membench.sandbox.workspace import snapshot, write_files
from membench.schemas.events import Event

HOME_PREFIX = "~/"  # a memory id's path under the agent's HOME; a workspace path has none
DECLARED_FILE = "MEMORY.md"  # the memory file of an agent without one of its own (scripted, openai:, command:)
# Claude Code loads the first 200 lines of its auto memory's MEMORY.md, at most 25 KB; a declared
# MEMORY.md follows the same rule. Codex joins its AGENTS.md chain up to project_doc_max_bytes.
AUTO_MEMORY_LINES, AUTO_MEMORY_BYTES = 200, 25_000
CODEX_PROJECT_DOC_BYTES = 32 * 1024
CLAUDE_PROJECT = "-workspace"  # Claude Code's folder name for the project at /workspace (its path, / as -)


@dataclass(frozen=True)
class Surface:
    """Files an agent keeps memory in: `pattern` (fnmatch, `*` crossing folders) under `root`
    (`workspace` or `home`). `loaded`: the agent reads it at session start (else on demand only: a
    candidate, never admitted); `lines`/`size`: the agent's own per-file cap; `group`: files of one
    group share the group's byte cap; `instead_of`: loaded only when that file is absent."""

    root: str
    pattern: str
    memory_type: str
    loaded: bool = True
    lines: int | None = None
    size: int | None = None
    group: str | None = None
    instead_of: str | None = None


CLAUDE_SURFACES = (
    Surface("workspace", "CLAUDE.md", "claude_md"),
    Surface("workspace", "CLAUDE.local.md", "claude_md"),
    Surface("workspace", ".claude/CLAUDE.md", "claude_md"),
    Surface("workspace", ".claude/rules/*.md", "claude_rules"),
    Surface("workspace", "*/CLAUDE.md", "claude_md", loaded=False),  # a subfolder's: read when work reaches it
    Surface("home", ".claude/CLAUDE.md", "claude_md"),
    Surface("home", f".claude/projects/{CLAUDE_PROJECT}/memory/MEMORY.md", "auto_memory",
            lines=AUTO_MEMORY_LINES, size=AUTO_MEMORY_BYTES),
    Surface("home", f".claude/projects/{CLAUDE_PROJECT}/memory/*", "auto_memory", loaded=False),
)
CODEX_SURFACES = (
    Surface("home", ".codex/AGENTS.override.md", "agents_md"),
    Surface("home", ".codex/AGENTS.md", "agents_md", instead_of=".codex/AGENTS.override.md"),
    Surface("workspace", "AGENTS.override.md", "agents_md", group="project_doc"),
    Surface("workspace", "AGENTS.md", "agents_md", group="project_doc", instead_of="AGENTS.override.md"),
    Surface("workspace", "*/AGENTS.override.md", "agents_md", loaded=False),
    Surface("workspace", "*/AGENTS.md", "agents_md", loaded=False),
    Surface("home", ".codex/memories/*", "codex_memories", loaded=False),  # only when the memories feature is on
)
DECLARED_SURFACES = (
    Surface("workspace", DECLARED_FILE, "declared", lines=AUTO_MEMORY_LINES, size=AUTO_MEMORY_BYTES),
)
GROUP_CAPS = {"project_doc": CODEX_PROJECT_DOC_BYTES}


def surfaces_for(agent_name: str) -> tuple[Surface, ...]:
    head = agent_name.partition(":")[0]
    return {"claude-code": CLAUDE_SURFACES, "codex": CODEX_SURFACES}.get(head, DECLARED_SURFACES)


def memory_hint(agent_name: str) -> str:
    """Where the agent keeps its memory, in the words of the memory-update turn."""
    head = agent_name.partition(":")[0]
    if head == "claude-code":
        return "your CLAUDE.md files or your auto memory"
    if head == "codex":
        return "AGENTS.md"
    return f"the file {DECLARED_FILE} at the repository root"


def memory_id(root: str, rel: str) -> str:
    return "native:" + (HOME_PREFIX if root == "home" else "") + rel


def clip(text: str, lines: int | None, size: int | None) -> str:
    """The part of `text` a loader with these caps reads: the first `lines` lines, then at most
    `size` bytes of UTF-8 (never half a character)."""
    if lines is not None:
        text = "".join(text.splitlines(keepends=True)[:lines])
    if size is not None and len(text.encode("utf-8")) > size:
        text = text.encode("utf-8")[:size].decode("utf-8", "ignore")
    return text


def read_declared(workspace: Path) -> str:
    """What an agent with a declared memory file loads of it at session start (scripted agents)."""
    path = Path(workspace) / DECLARED_FILE
    if path.is_symlink() or not path.is_file():
        return ""
    surface = DECLARED_SURFACES[0]
    return clip(path.read_bytes().decode("utf-8", "replace"), surface.lines, surface.size)


def _match(surfaces: Sequence[Surface], root: str, rel: str) -> Surface | None:
    return next((s for s in surfaces if s.root == root and fnmatch.fnmatchcase(rel, s.pattern)), None)


def _regular_files(root: Path) -> list[str]:
    """Relative posix paths of the regular files under root; symlinks (file or folder) are never
    followed, so an agent cannot make the harness read a file outside its sandbox as its memory."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path) and os.path.isfile(path):
                found.append(Path(path).relative_to(root).as_posix())
    return sorted(found)


def loaded_view(surfaces: Sequence[Surface], files: dict[tuple[str, str], bytes]) -> tuple[list[MemoryItem], list[str]]:
    """(what the agent loads at session start, every memory file's id) for the memory FILES
    ((root, path) -> bytes): loaded surfaces in their loader's order, each within its caps."""
    admitted: list[MemoryItem] = []
    used: dict[str, int] = {}
    for surface in surfaces:
        if not surface.loaded:
            continue
        for (root, rel), data in sorted(files.items()):
            if root != surface.root or _match(surfaces, root, rel) is not surface:
                continue
            if surface.instead_of and (root, surface.instead_of) in files:
                continue
            text = clip(data.decode("utf-8", "replace"), surface.lines, surface.size)
            if surface.group:
                cap = GROUP_CAPS[surface.group]
                text = clip(text, None, max(0, cap - used.get(surface.group, 0)))
                used[surface.group] = used.get(surface.group, 0) + len(text.encode("utf-8"))
            if text:
                admitted.append(MemoryItem(memory_id(root, rel), surface.memory_type, text))
    return admitted, [memory_id(root, rel) for root, rel in sorted(files)]


def file_diff(label: str, before: bytes | None, after: bytes | None) -> str:
    old = [] if before is None else before.decode("utf-8", "replace").splitlines(keepends=True)
    new = [] if after is None else after.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(old, new, "/dev/null" if before is None else f"a/{label}",
                                        "/dev/null" if after is None else f"b/{label}"))


def drop_memory_files(agent: Any, workspace: Path, pack_paths: Iterable[str]) -> list[str]:
    """Under every condition but NATIVE: the memory files the agent left in the workspace (its
    surfaces, not the pack's) are removed before scoring, so they are never the patch and never
    reach a later session, as under NATIVE. A prediction made elsewhere (`external`) is kept whole."""
    if getattr(agent, "kind", "") == "external":
        return []
    surfaces, pack = surfaces_for(agent.name), frozenset(pack_paths)
    dropped = [rel for rel in _regular_files(Path(workspace))
               if rel not in pack and _match(surfaces, "workspace", rel) is not None]
    for rel in dropped:
        (Path(workspace) / rel).unlink()
    return dropped


@dataclass
class _Bound:
    """What a memory-update turn needs of the unit: set by the runner (`bind`)."""

    agent: Any
    run_agent: Callable[[Any], Any]  # (NativeSession) -> the agent's outcome, acting in the unit's sandbox


@dataclass
class NativeSession:
    """One session of the agent with its memory files in place (a task session or a memory-update turn)."""

    workspace: Path
    home: Path
    declared_file: str
    feedback: tuple[str, ...] = ()  # a memory-update turn: what followed the session


class NativeMemory:
    condition = "NATIVE"
    uses_memory = True
    native = True  # the runner lets the agent keep its own memory files (membench/runner/grid.py)

    def __init__(self, namespace: Namespace):
        self.namespace = namespace
        self.agent_name = "scripted:memory-literal"
        self.files: dict[tuple[str, str], bytes] = {}  # (root, path) -> content held between sessions
        self.provenance: dict[tuple[str, str], tuple[str, ...]] = {}  # what each file was learned from, so far
        self.pack_paths: frozenset[str] = frozenset()
        self.tree: dict[str, bytes] = {}  # the workspace the agent last left (a memory-update turn starts there)
        self._bound: _Bound | None = None

    # ------------------------------------------------------------------ the runner's calls
    def bind(self, agent: Any, base: dict[str, bytes], run_agent: Callable[[NativeSession], Any]) -> None:
        """The unit's agent, the pack's base checkout (its paths are the repository's, never memory)
        and how to run the agent in a memory-update turn."""
        self.agent_name = agent.name
        self.pack_paths = frozenset(base)
        self.tree = dict(base)
        self._bound = _Bound(agent, run_agent)

    @property
    def surfaces(self) -> tuple[Surface, ...]:
        return surfaces_for(self.agent_name)

    def read(self, query: str, budget_tokens: int) -> MemoryContext:
        """What the agent's own loader loads at session start; membench's budget is not in force
        (`token_budget` 0), the agent's own caps are."""
        admitted, candidates = loaded_view(self.surfaces, self.files)
        return MemoryContext(tuple(admitted), tuple(candidates), 0)

    def open_session(self, workspace: Path, feedback: Sequence[str] = ()) -> NativeSession:
        """Write the held memory files where the agent keeps them: WORKSPACE and a fresh HOME."""
        home = Path(tempfile.mkdtemp(prefix="membench-native-home-"))
        for (root, rel), data in self.files.items():
            target = (Path(workspace) if root == "workspace" else home) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return NativeSession(Path(workspace), home, DECLARED_FILE, tuple(feedback))

    def close_session(self, session: NativeSession, provenance: Sequence[str]) -> list[MemoryItem]:
        """Keep the memory files the session left; returns one item per changed file (its diff).
        The workspace's memory files are removed from it: they are memory, not the patch."""
        found: dict[tuple[str, str], bytes] = {}
        for root, base in (("workspace", session.workspace), ("home", session.home)):
            for rel in _regular_files(base):
                if root == "workspace" and rel in self.pack_paths:
                    continue  # the repository's own file, not memory
                if _match(self.surfaces, root, rel) is not None:
                    found[(root, rel)] = (base / rel).read_bytes()
        for root, rel in found:
            if root == "workspace":
                (session.workspace / rel).unlink()
        shutil.rmtree(session.home, ignore_errors=True)
        if not session.feedback:  # a task session: the next memory-update turn starts from what it left
            self.tree = snapshot(session.workspace)
        changed = []
        for key in sorted(set(found) | set(self.files)):
            before, after = self.files.get(key), found.get(key)
            if before == after:
                continue
            if after is None:
                learned = tuple(provenance)
                del self.files[key]
                self.provenance.pop(key, None)
            else:
                # a file keeps what it learned earlier unless it is new: its evidence accumulates
                learned = tuple(dict.fromkeys(self.provenance.get(key, ()) + tuple(provenance)))
                self.files[key] = after
                self.provenance[key] = learned
            surface = _match(self.surfaces, *key)
            label = (HOME_PREFIX if key[0] == "home" else "") + key[1]
            changed.append(MemoryItem(memory_id(*key), surface.memory_type if surface else "native",
                                      file_diff(label, before, after), learned))
        return changed

    def write(self, events: Sequence[Event]) -> list[MemoryItem]:
        """The memory-update turn: the agent is told the pack events delivered after the session
        and keeps what it wants in its memory files. Nothing is delivered, or no agent is bound
        (a unit that never reached its first session): nothing to do."""
        delivered = [e for e in events if e.kind == "Turn" and e.visibility == "agent"
                     and e.payload.get("source_event_id")]
        if not delivered or self._bound is None:
            return []
        with tempfile.TemporaryDirectory(prefix="membench-native-ws-") as tmp:
            workspace = Path(tmp)
            write_files(self.tree, workspace)
            session = self.open_session(workspace, [e.payload["text"]["text"] for e in delivered])
            try:
                self._bound.run_agent(session)
            except BaseException:
                shutil.rmtree(session.home, ignore_errors=True)
                raise
            return self.close_session(session, [e.event_id for e in delivered])


def update_prompt(agent_name: str, feedback: Sequence[str]) -> str:
    """The memory-update turn's instruction."""
    return ("Your session on this repository has ended. This is what followed it:\n\n"
            + "\n\n".join(f"- {text}" for text in feedback)
            + f"\n\nIf later sessions on this repository need any of it, record it in {memory_hint(agent_name)}, "
              "as you keep memory across sessions. Change nothing else.")
