"""What pins a memory system's conformance record to the code and the upstream that earned it
(docs/memory-systems.md, "What a record is pinned to"), and what changed between a record and now.

A record of `membench memory check` admits exactly the configuration it was made for. Beside the
condition's settings, that configuration holds:

- `code`: SHA-256 of the files whose code answers the reads — `modules`, a plug-in's package (every
  `.py` file of the top-level package its factory lives in, or that module's file alone); `files`,
  the existing files a command adapter's argv names (its interpreter and its script); `membench`,
  membench's own modules of the system (the factory's module and the memory-system modules it
  imports, transitively);
- a plug-in's distribution (name and version), beside its factory;
- `upstream`: the memory model's upstream host, or STAND_IN when it is a server on this machine (a
  scripted or local stand-in, never the provider the model's name claims). A check against a
  stand-in and a run against a real upstream are different configurations, so different records.

All of it goes into the configuration's digest, which keys the record: an edited module is a new
configuration with no record, and `changes` names what differs from the condition's last record.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import ipaddress
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

STAND_IN = "stand-in (a model server on this machine)"
OWN_PACKAGE = "membench.memory_systems"
GROUP_WORDS = {"modules": "module", "files": "file", "membench": "membench module"}
KIND_WORDS = {"plugin": "plug-in", "external": "adapter", "library": "library", "built_in": "condition",
              "mcp": "MCP server"}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_files(module: str) -> dict[str, str]:
    """A plug-in's code: every `.py` file of the top-level package MODULE belongs to (paths relative
    to the package's parent, e.g. `acme_memory/adapter.py`), or MODULE's own file when it is a
    top-level module. The whole package, because the factory's module may delegate to any of it."""
    top = module.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):  # e.g. a factory defined in __main__: no file to pin
        spec = None
    if spec is None:
        return {}
    if spec.submodule_search_locations:
        found: dict[str, str] = {}
        for location in spec.submodule_search_locations:
            root = Path(location)
            for path in sorted(root.rglob("*.py")):
                if "__pycache__" not in path.parts:
                    found[(Path(top) / path.relative_to(root)).as_posix()] = file_sha256(path)
        return found
    if spec.origin and os.path.isfile(spec.origin):
        return {Path(spec.origin).name: file_sha256(Path(spec.origin))}
    return {}


def own_modules(module: str) -> dict[str, str]:
    """Membench's code of a memory system: MODULE's file and every module of membench.memory_systems
    it imports, transitively (read from the source, not from what happens to be imported)."""
    root = Path(__file__).resolve().parents[2]  # the folder holding the membench package
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        rel = path.relative_to(root).as_posix()
        if rel in seen or not path.is_file():
            continue
        seen[rel] = file_sha256(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            todo += [n for n in names if n.startswith(OWN_PACKAGE + ".")]
    return dict(sorted(seen.items()))


def argv_files(argv: list[str]) -> dict[str, str]:
    """A command adapter's code: each argument that names an existing file (a directory, such as a
    store, is not code and changes as it is used)."""
    return {arg: file_sha256(Path(arg)) for arg in dict.fromkeys(argv) if os.path.isfile(arg)}


def distribution(point: Any, module: str) -> dict[str, str] | None:
    """The distribution (name, version) a plug-in was installed with: its entry point's, else the one
    that provides its top-level package; None when it comes from no distribution."""
    from importlib.metadata import packages_distributions, version

    dist = getattr(point, "dist", None)
    if dist is not None:
        return {"name": dist.metadata["Name"], "version": dist.version}
    names = packages_distributions().get(module.split(".")[0]) or []
    return {"name": names[0], "version": version(names[0])} if names else None


def upstream(base_urls: dict[str, str] | None) -> str | None:
    """The memory model's upstream (its Chat Completions go to the `openai` URL, else the `*` one):
    the URL's host, or STAND_IN for a loopback host; None without one."""
    url = (base_urls or {}).get("openai") or (base_urls or {}).get("*")
    if not url:
        return None
    host = (urlsplit(url).hostname or "").lower()
    try:
        local = ipaddress.ip_address(host).is_loopback or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        local = host == "localhost" or host.endswith(".localhost")
    return STAND_IN if local else host


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "…"


def changes(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a record's configuration and the current one, one phrase each (empty
    when they are the same); a record made before admissions were pinned holds no code digest."""
    if "code" not in recorded:
        return ["its record holds no code digest (made before admissions were pinned to their code)"]
    found = []
    for key, word in (("kind", "kind"), ("memory_model", "memory model"), ("upstream", "upstream")):
        if recorded.get(key) != current.get(key):
            found.append(f"{word} changed ({_short(recorded.get(key))} → {_short(current.get(key))})")
    old_detail, new_detail = recorded.get("detail") or {}, current.get("detail") or {}
    for key in sorted(set(old_detail) | set(new_detail)):
        if old_detail.get(key) != new_detail.get(key):
            found.append(f"{key} changed ({_short(old_detail.get(key))} → {_short(new_detail.get(key))})")
    old_code, new_code = recorded.get("code") or {}, current.get("code") or {}
    for group in sorted(set(old_code) | set(new_code)):
        word = GROUP_WORDS.get(group, group)
        before, after = old_code.get(group) or {}, new_code.get(group) or {}
        for name in sorted(set(before) | set(after)):
            if name not in after:
                found.append(f"{word} {name} removed")
            elif name not in before:
                found.append(f"{word} {name} added")
            elif before[name] != after[name]:
                found.append(f"{word} {name} changed (sha256 {before[name][:12]}… → {after[name][:12]}…)")
    return found


def repair_budget_spender(attempts: list[dict[str, Any]], digest: str, budget: int) -> dict[str, Any] | None:
    """The attempt that spent a condition's repair budget, so that `membench memory check` refuses the
    configuration DIGEST: none of ATTEMPTS (the condition's ledger, oldest first) passed and BUDGET of
    them are of other configurations — the BUDGET-th of those spent it. None while a check is allowed."""
    if any(a.get("verdict") == "pass" for a in attempts):
        return None
    others = [a for a in attempts if a.get("digest") != digest]
    return others[budget - 1] if len(others) >= budget else None


def describe(config: dict[str, Any]) -> str:
    """One line of what a configuration is pinned to (`memory check`'s text output)."""
    parts = []
    detail = config.get("detail") or {}
    if detail.get("distribution"):
        parts.append(f"distribution {detail['distribution']['name']} {detail['distribution']['version']}")
    if detail.get("version"):
        parts.append(f"{detail.get('library', 'library')} {detail['version']}")
    for group, files in (config.get("code") or {}).items():
        if files:
            parts.append(f"{len(files)} {GROUP_WORDS.get(group, group)} file{'s' if len(files) > 1 else ''}")
    if config.get("memory_model"):
        parts.append(f"memory model {config['memory_model']}")
    if config.get("upstream"):
        parts.append(f"upstream {config['upstream']}")
    return ", ".join(parts) or "no code digest"
