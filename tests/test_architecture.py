"""The folders are the architecture (docs/design.md §1): each package imports only the packages
upstream of it, and interface modules hold protocols and types, not the implementations."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# package -> the project packages it may import (besides itself)
ALLOWED = {
    "schemas": set(),
    "processors": {"schemas"},
    "sandbox": {"schemas"},
    "producers": {"schemas", "sandbox"},
    "warehouse": {"schemas"},
    "analytics": set(),
    "reports": {"analytics", "warehouse", "schemas"},
    "exports": {"analytics", "warehouse", "schemas", "reports"},
    "membench": {"schemas", "producers", "processors", "sandbox", "warehouse", "analytics", "reports", "exports"},
}
INTERFACES = ("producers/bus/base.py", "producers/agents/base.py", "producers/memory_systems/base.py",
              "sandbox/base.py", "warehouse/protocol.py")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_each_package_imports_only_upstream_packages():
    broken = []
    for package, allowed in ALLOWED.items():
        for path in sorted((REPO / package).rglob("*.py")):
            for module in _imports(path):
                top = module.split(".")[0]
                if top in ALLOWED and top != package and top not in allowed:
                    broken.append(f"{path.relative_to(REPO)} imports {module}")
    assert not broken, "imports against the layering:\n" + "\n".join(broken)


def test_interface_modules_import_no_implementation():
    for rel in INTERFACES:
        package = rel.rsplit("/", 1)[0].replace("/", ".")
        own = {m for m in _imports(REPO / rel) if m.startswith(package + ".")}
        # an interface may use its siblings' types only through other interfaces
        assert own <= {package + ".base"}, f"{rel} imports {sorted(own)}"


def test_programs_that_run_inside_the_sandbox_use_the_standard_library_only():
    """They run on the sandbox's python3, where membench and its dependencies are not importable."""
    import sys

    inside = sorted((REPO / "producers" / "agents" / "inside").glob("*.py"))
    assert inside
    for path in inside:
        foreign = {m for m in _imports(path) if m.split(".")[0] not in sys.stdlib_module_names}
        assert not foreign, f"{path.relative_to(REPO)} imports {sorted(foreign)}"
