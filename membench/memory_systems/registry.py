"""Memory systems by condition name (`--conditions`), and the registration of external adapters.

The built-in systems are listed here. External systems (a command or an HTTP endpoint speaking the
protocol of `membench.memory_systems.external`) are added by an explicit call: `register_external`
for one, `register_adapters_from_env` for those named in MEMBENCH_MEMORY_ADAPTERS (the CLI calls it
once at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from membench.memory_systems.base import MemorySetup, MemorySystem, Namespace
from membench.memory_systems.curated import CuratedFileMemory
from membench.memory_systems.episodic import RawEpisodicMemory
from membench.memory_systems.libraries import LIBRARY_SYSTEMS
from membench.memory_systems.model_driven import MODEL_DRIVEN, UNDEFINED_ABLATIONS
from membench.memory_systems.native import NativeMemory
from membench.memory_systems.external import adapters_from_env, external_factory
from membench.memory_systems.mcp_servers import MCP_SERVERS, mcp_factory, servers_from_env, spec_from_json
from membench.memory_systems.reflection import ReflectionMemory
from membench.memory_systems.skill_bank import SkillBankMemory
from membench.memory_systems.subtask import SubtaskMemory
from membench.memory_systems.summaries import SessionSummaryMemory
from membench.memory_systems.tracker import TaskTrackerMemory
from membench.memory_systems.typed import VARIANTS as TYPED_VARIANTS
from membench.memory_systems.vector import TokenVectorMemory
from membench.memory_systems.verbatim import NoMemory, VerbatimEventMemory
from membench.formats.fields import did_you_mean

MEMORY_SYSTEMS: dict[str, type] = {
    "B0": NoMemory,
    "B1": RawEpisodicMemory,
    "B2": TokenVectorMemory,
    "B4": SessionSummaryMemory,
    "B3": ReflectionMemory,  # model-free: extractive lessons, no model writes them
    "B5": VerbatimEventMemory,
    "B6": SubtaskMemory,
    "B7": TaskTrackerMemory,
    # the reference-probe family (DF, DF-raw-only, DF-hybrid, DF-strict, DF-strict-hybrid) and
    # its model-free ablations A0, A2, A5, A6 (membench/memory_systems/typed.py)
    **TYPED_VARIANTS,
    # model-driven policies: the memory model (--memory-model) writes and judges through the model
    # gateway (membench/memory_systems/model_driven.py)
    **MODEL_DRIVEN,
    # real memory libraries in-process (Mem0 native and literal, dense retrieval on embedded Qdrant):
    # their model and embedding calls go through the gateway (membench/memory_systems/libraries.py)
    **LIBRARY_SYSTEMS,
    # MCP memory servers, agent-driven: the agent calls the server's own tools during the session
    # (membench/memory_systems/mcp_servers.py)
    # (a factory stands where a class does: the registry calls both alike)
    **{name: mcp_factory(spec) for name, spec in MCP_SERVERS.items()},  # type: ignore[misc]
    "curated_file": CuratedFileMemory,
    "skill_bank": SkillBankMemory,
    # the agent's own memory files (CLAUDE.md, auto memory, AGENTS.md, MEMORY.md), kept between the
    # unit's sessions (membench/memory_systems/native.py)
    "NATIVE": NativeMemory,
    # the coding-agent A/B benchmark's name for B0 (imported packs run no_memory / curated_file / B5)
    "no_memory": NoMemory,
}


def register_external(name: str, command: list[str] | None = None, url: str | None = None,
                      timeout_s: float = 60.0) -> None:
    """Register an external memory system (a command or an HTTP endpoint) as condition NAME."""
    if name in MEMORY_SYSTEMS:
        raise ValueError(f"condition '{name}' is already registered")
    MEMORY_SYSTEMS[name] = external_factory(name, command, url, timeout_s)  # type: ignore[assignment]


def register_mcp_server(name: str, spec: dict) -> None:
    """Register a stdio MCP memory server as condition NAME (spec: mcp_servers.spec_from_json)."""
    if name in MEMORY_SYSTEMS:
        raise ValueError(f"condition '{name}' is already registered")
    MCP_SERVERS[name] = spec_from_json(name, spec, "register_mcp_server")
    MEMORY_SYSTEMS[name] = mcp_factory(MCP_SERVERS[name])  # type: ignore[assignment]


def register_adapters_from_env(environ: Mapping[str, str]) -> list[str]:
    """Register the adapters of MEMBENCH_MEMORY_ADAPTERS (a JSON object {name: {command|url}}) and
    the MCP memory servers of MEMBENCH_MCP_SERVERS (a JSON object {name: {command, write, search}});
    names already registered keep their system. Returns the names added; a malformed value raises
    ValueError naming the variable."""
    added = []
    for name, spec in servers_from_env(environ.get("MEMBENCH_MCP_SERVERS")).items():
        if name not in MEMORY_SYSTEMS:
            MCP_SERVERS[name] = spec
            MEMORY_SYSTEMS[name] = mcp_factory(spec)  # type: ignore[assignment]
            added.append(name)
    for name, factory in adapters_from_env(environ.get("MEMBENCH_MEMORY_ADAPTERS")).items():
        if name not in MEMORY_SYSTEMS:
            MEMORY_SYSTEMS[name] = factory  # type: ignore[assignment]
            added.append(name)
    return added


# the conditions membench ships whose behaviour its own tests pin down; everything else (a library
# condition, an external adapter, a plug-in) must pass `membench memory check` before it is measured
BUILT_IN: frozenset[str] = frozenset(c for c in MEMORY_SYSTEMS if c not in LIBRARY_SYSTEMS and c not in MCP_SERVERS)
PLUGIN_GROUP = "membench.memory_systems"
PLUGIN_ENTRY_POINTS: dict[str, object] = {}  # a plug-in's entry point: its distribution, for its record


def register_plugins(entry_points=None) -> list[str]:
    """Register the memory systems vendors ship as Python packages: each entry point of the group
    `membench.memory_systems` names a factory (a class or a callable taking (namespace) or, with
    `accepts_setup = True`, (namespace, setup)) under the condition name it is registered as. Called
    explicitly (the CLI, once at start-up); names already registered keep their system. A plug-in
    that cannot be loaded raises ValueError naming it."""
    if entry_points is None:
        from importlib.metadata import entry_points as all_entry_points

        entry_points = all_entry_points(group=PLUGIN_GROUP)
    added = []
    for point in entry_points:
        if point.name in MEMORY_SYSTEMS:
            continue
        try:
            factory = point.load()
        except Exception as exc:  # noqa: BLE001 (a vendor's package: its error, named)
            raise ValueError(f"memory-system plug-in '{point.name}' ({point.value}) cannot be loaded: "
                             f"{type(exc).__name__}: {exc}") from None
        MEMORY_SYSTEMS[point.name] = factory
        PLUGIN_ENTRY_POINTS[point.name] = point
        added.append(point.name)
    return added


def needs_conformance(condition: str) -> bool:
    """Whether CONDITION is measured only with a passing conformance record (library, external, plug-in)."""
    return condition not in BUILT_IN


def configuration(condition: str, memory_model: str | None = None, base_urls: dict[str, str] | None = None) -> dict:
    """What decides CONDITION's behaviour, as recorded with its conformance record; its digest keys
    the record (a changed setting, version, memory model, upstream or code file is a new
    configuration): `code` and `upstream` as membench/memory_systems/admission.py says."""
    from membench.memory_systems import admission
    from membench.memory_systems.libraries import settings_record

    factory: Any = MEMORY_SYSTEMS[condition]  # a class, or a plug-in's or an external system's factory
    module = getattr(factory, "__module__", "?")
    if condition in LIBRARY_SYSTEMS:
        kind, detail = "library", settings_record(condition)
        code = {"membench": admission.own_modules(module)}
    elif condition in BUILT_IN:
        kind, detail = "built_in", {"class": f"{module}.{getattr(factory, '__qualname__', factory)}"}
        code = {"membench": admission.own_modules(module)}
    elif getattr(factory, "mcp_spec", None) is not None:
        spec = factory.mcp_spec
        kind, detail = "mcp", spec.record()
        code = {"files": admission.argv_files(spec.argv(Path("/nonexistent"))),
                "membench": admission.own_modules(module)}
    elif getattr(factory, "spec", None) is not None:
        kind, detail = "external", dict(factory.spec)
        code = {"files": admission.argv_files(factory.spec.get("command") or []),
                "membench": admission.own_modules(module)}
    else:
        kind, detail = "plugin", {"factory": f"{module}.{getattr(factory, '__qualname__', repr(factory))}",
                                  "distribution": admission.distribution(PLUGIN_ENTRY_POINTS.get(condition), module)}
        code = {"modules": admission.package_files(module)}
    driven = is_model_driven(condition)
    return {"condition": condition, "kind": kind, "detail": detail, "code": code,
            "memory_model": memory_model if driven else None,
            "upstream": admission.upstream(base_urls) if driven else None}


def configuration_digest(config: dict) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def is_model_driven(condition: str) -> bool:
    """Whether the condition's memory policy calls the memory model (model_driven) or not (model_free)."""
    return bool(getattr(MEMORY_SYSTEMS.get(condition), "model_driven", False))


def undefined_ablation(condition: str) -> str | None:
    """Why a paper ablation that is not registered here cannot be defined (A4, A11), or None."""
    return UNDEFINED_ABLATIONS.get(condition)


def memory_conditions() -> list[str]:
    return sorted(MEMORY_SYSTEMS)


def make_memory(condition: str, namespace: Namespace, setup: MemorySetup | None = None) -> MemorySystem:
    try:
        factory = MEMORY_SYSTEMS[condition]
    except KeyError:
        raise ValueError(f"unknown condition '{condition}'{did_you_mean(condition, MEMORY_SYSTEMS)} "
                         f"(known: {', '.join(memory_conditions())})") from None
    if getattr(factory, "accepts_setup", False):
        return factory(namespace, setup or MemorySetup())
    return factory(namespace)
