"""The folders are the architecture (docs/design.md §1): the rooms are the subpackages of the one
import name, membench; each imports only the rooms
upstream of it, interface modules hold protocols and types, not the implementations, no two
modules import each other (directly or round a circle), and a module's name says its job, so the
same name in two rooms is the same job."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "membench"

# room -> the rooms it may import (besides itself); a room is membench/ROOM, except "membench": the
# command line and the Python API, the modules directly in membench/ and membench/commands/
# the rooms that run a unit, lowest first: each may import the ones before it
UNIT_ROOMS = ("bus", "gateway", "memory_systems", "agents", "runner")
ALLOWED = {
    "schemas": set(),
    "formats": set(),
    "analytics": set(),
    "processors": {"schemas", "formats"},
    "sandbox": {"schemas", "formats"},
    "bus": {"schemas", "formats"},
    "warehouse": {"schemas", "bus"},  # the Kafka sink: the topics and client config the bus names
    "gateway": {"schemas", "formats", "bus"},
    "memory_systems": {"schemas", "formats", "sandbox", "bus", "gateway"},
    "agents": {"schemas", "formats", "sandbox", "bus", "gateway", "memory_systems"},
    "runner": {"schemas", "formats", "sandbox", *UNIT_ROOMS[:-1]},
    "packs": {"schemas", "formats", "sandbox", *UNIT_ROOMS},
    "transfer_protocol": {"schemas", "formats", "sandbox", *UNIT_ROOMS},
    "reports": {"analytics", "warehouse", "schemas", "formats"},
    "exports": {"analytics", "warehouse", "schemas", "reports"},
    "audit": {"schemas", "formats", "processors", "warehouse", "bus", "memory_systems", "transfer_protocol"},
    "viewer": {"schemas", "formats", "processors", "reports", "bus"},
    "pipeline": {"schemas", "formats", "processors", "warehouse", "sandbox", "reports", "audit", *UNIT_ROOMS,
                 "packs", "transfer_protocol"},
    "bench": {"schemas", "formats", "processors", "warehouse", "sandbox", "analytics", "audit", "pipeline",
              "viewer", *UNIT_ROOMS, "packs", "transfer_protocol"},
    "membench": {"schemas", "formats", "processors", "sandbox", "warehouse", "analytics", "reports", "exports",
                 "audit", "viewer", "pipeline", "bench", *UNIT_ROOMS, "packs", "transfer_protocol"},
}
INTERFACES = ("membench/bus/base.py", "membench/agents/base.py", "membench/memory_systems/base.py",
              "membench/agents/transcripts/base.py", "membench/sandbox/base.py", "membench/warehouse/protocol.py")

# A module's name may repeat across the rooms only where it is the same job in each:
SAME_JOB = {
    "__init__": "a package's own module",
    "base": "a room's interface: its protocols and types (INTERFACES)",
    "registry": "a room's implementations (or schemas) by name",
}
# ... or where each room does its own job on one subject, the room naming the job and the module
# the subject: the fold (membench/processors/), the report section (membench/reports/) and the command (membench/commands/)
SAME_SUBJECT = {
    "hygiene": {"membench/processors/hygiene.py", "membench/reports/hygiene.py"},
    "transfer": {"membench/processors/transfer.py", "membench/reports/transfer.py", "membench/commands/transfer.py"},
    "study": {"membench/reports/study.py", "membench/reports/html/study.py"},  # the study file; its HTML section
}
# A CLI command's module (membench/commands/) is named after its verb (membench/cli.py COMMANDS), so
# it may share the name of the module that does the work (membench/commands/rederive.py -> membench/audit/rederive.py);
# a benchmark's module (membench/bench/) may take the name of the room it measures (bench/bus.py -> bus/).


ROOMS = tuple(room for room in ALLOWED if room != "membench")


def _room_files(room: str) -> list[Path]:
    """The modules of ROOM."""
    if room == "membench":
        return sorted([*PKG.glob("*.py"), *(PKG / "commands").rglob("*.py")])
    return sorted((PKG / room).rglob("*.py"))


def _room_of(module: str) -> str | None:
    """The room a dotted import names (None: not membench's)."""
    parts = module.split(".")
    if parts[0] != "membench":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "membench"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def _modules() -> dict[str, Path]:
    """Every module of the project's packages, by dotted name (a package by its own name)."""
    out = {}
    for package in ALLOWED:
        for path in _room_files(package):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_each_package_imports_only_upstream_packages():
    broken = []
    for package, allowed in ALLOWED.items():
        for path in _room_files(package):
            for module in _imports(path):
                room = _room_of(module)
                if room is not None and room != package and room not in allowed:
                    broken.append(f"{path.relative_to(REPO)} imports {module}")
    assert not broken, "imports against the layering:\n" + "\n".join(broken)


def test_the_rooms_are_imported_through_the_one_import_name():
    """`from pipeline import x` would need a second top-level name in the user's environment (and find
    the user's own `pipeline` module first): product code, tests and tools import `membench.ROOM`."""
    bare = []
    for path in sorted([*PKG.rglob("*.py"), *(REPO / "tests").rglob("*.py"), *(REPO / "tools").rglob("*.py")]):
        if "fixtures" in path.relative_to(REPO).parts[:2] or (path.parent.name == "inside"):
            continue
        bare += [f"{path.relative_to(REPO)} imports {m}" for m in _imports(path) if m.split(".")[0] in ROOMS]
    assert not bare, "\n".join(bare)


def test_interface_modules_import_no_implementation():
    for rel in INTERFACES:
        package = rel.rsplit("/", 1)[0].replace("/", ".")
        own = {m for m in _imports(REPO / rel) if m.startswith(package + ".")}
        # an interface may use its siblings' types only through other interfaces
        assert own <= {package + ".base"}, f"{rel} imports {sorted(own)}"


def test_programs_that_run_inside_the_sandbox_use_the_standard_library_only():
    """They run on the sandbox's python3, where membench and its dependencies are not importable; a
    program may import a sibling (its own directory is first on its path)."""
    import sys

    inside = sorted((PKG / "agents" / "inside").glob("*.py"))
    assert inside
    siblings = {path.stem for path in inside}
    for path in inside:
        foreign = {m for m in _imports(path) if m.split(".")[0] not in sys.stdlib_module_names | siblings}
        assert not foreign, f"{path.relative_to(REPO)} imports {sorted(foreign)}"


def test_no_module_imports_itself_round_a_circle():
    """Imports inside functions count: deferring an import hides a circle from the interpreter, not
    from a reader (membench/agents/transcripts/base.py once imported the parsers that import it)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:  # `from package import module` imports the module
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if full in modules else node.module)
        graph[name] = {e for e in edges if e in modules and e != name}
    # Tarjan's strongly connected components, iteratively: a component of two or more is a circle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    assert not circles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_a_module_name_is_one_job():
    """No two modules share a name across the rooms unless it is the same job (SAME_JOB), one subject
    seen by each room's job (SAME_SUBJECT), or a CLI command named after its verb: five `runner.py`,
    three `replay.py` and two `log_root.py` once did different things under one name."""
    from membench.cli import COMMANDS

    verbs = {spec.partition(":")[0].rsplit(".", 1)[1] for spec in COMMANDS.values()}
    by_name: dict[str, list[str]] = {}
    for path in _modules().values():
        by_name.setdefault(path.stem, []).append(path.relative_to(REPO).as_posix())
    repeated = []
    for name, paths in sorted(by_name.items()):
        if len(paths) < 2 or name in SAME_JOB:
            continue
        others = {p for p in paths if not (p == f"membench/commands/{name}.py" and name in verbs)}
        if len(others) < 2 or others <= SAME_SUBJECT.get(name, set()):
            continue
        repeated.append(f"{name}: {', '.join(sorted(paths))}")
    for package in ALLOWED:  # nor does a module take a room's name (processors/pipeline.py beside membench/pipeline/)
        for path in by_name.get(package, []):
            if path == f"membench/commands/{package}.py" and package in verbs:
                continue
            if path == f"membench/bench/{package}.py":  # the benchmark of that room (`membench bench bus`)
                continue
            repeated.append(f"{package}: the room {package}/ and {path}")
    assert not repeated, "one name, different jobs:\n" + "\n".join(repeated)


def test_the_allow_lists_name_what_exists():
    """An allow-list entry whose modules are gone would silently allow a new repeat."""
    for name, paths in SAME_SUBJECT.items():
        for rel in paths:
            assert (REPO / rel).is_file(), f"SAME_SUBJECT[{name!r}] names {rel}, which does not exist"
    for rel in INTERFACES:
        assert (REPO / rel).is_file(), rel


def test_membench_holds_the_cli_alone():
    """The command line, its errors and exit statuses, and the Python API (the notebook frames, the run as
    a library call, re-exported); the work is done in the rooms below it."""
    entries = {p.name for p in PKG.iterdir() if p.name != "__pycache__" and p.name not in ROOMS}
    assert entries == {"__init__.py", "__main__.py", "api.py", "cli.py", "commands", "errors.py",
                       "frames.py"}, sorted(entries)


def test_every_room_is_a_package():
    """A folder of modules without __init__.py is a namespace package, which setuptools' package
    discovery (pyproject.toml) does not ship. The programs copied into the sandbox are files, not a
    package."""
    for package in ROOMS:
        assert (PKG / package / "__init__.py").is_file(), package
    for package in ALLOWED:
        for path in _room_files(package):
            folder = path.parent
            if folder.name != "inside" or folder.parent.name != "agents":
                assert (folder / "__init__.py").is_file(), f"{folder.relative_to(REPO)} has no __init__.py"


def test_pyproject_ships_every_room_under_one_import_name():
    """setuptools' own discovery, with the pyproject's include list, finds every room and nothing
    outside membench (a wheel holds these packages; the fresh-install test checks an installed one)."""
    import tomllib

    from setuptools import find_packages

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(where=str(REPO), include=include)
    assert {p.split(".")[0] for p in packages} == {"membench"}
    assert {f"membench.{room}" for room in ROOMS} <= set(packages)


def test_every_room_imports_outside_the_repository():
    """The commands the tests start run in other directories: each room must import from this
    checkout there too. An editable install made before a room existed does not know it (run
    deploy/setup-env.sh again)."""
    import os
    import subprocess
    import sys

    script = ("import importlib.util, sys\n"
              "for name in sys.argv[1:]:\n"
              "    spec = importlib.util.find_spec(name)\n"
              "    print(name, spec.submodule_search_locations[0] if spec else None)\n")
    names = ["membench", *(f"membench.{room}" for room in ROOMS)]
    proc = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True, timeout=60,
                          cwd=os.path.abspath(os.sep))
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    stale = {name: where for name, where in found.items() if where != str(REPO.joinpath(*name.split(".")))}
    assert not stale, f"rooms that do not import from {REPO}: {stale} (run deploy/setup-env.sh again)"


# Product SQL — a SELECT, INSERT or CREATE the code sends — lives in membench/warehouse/ only: the tables'
# DDL in tables.py, every read in queries.py, typed by membench/warehouse/rows.py. Elsewhere a string literal
# holds SQL only where it must:
SQL_EXCEPTIONS = {
    "membench/commands/sql.py": "`membench sql` runs the user's own SQL",
    "membench/commands/report.py": "a usage hint names a query the user may paste into `membench sql`",
    "membench/audit/run_heads.py": "its own SQLite index of the run heads on disk, not the warehouse",
}
# ... and where a read has not moved into membench/warehouse/queries.py yet. Each entry still holds SQL (the
# test below fails once a module is cleaned, so the list only shrinks); none may be added.
SQL_NOT_YET_MOVED: set[str] = set()
_SQL = re.compile(r"^\s*\(?\s*(SELECT\b|INSERT\s+INTO\b|CREATE\s+(TABLE|VIEW|DATABASE)\b|ALTER\s+TABLE\b|"
                  r"DROP\s+TABLE\b|WITH\s+\w+\s+AS\b)|\bSELECT\s.+\sFROM\s", re.S)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _sql_literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of PATH that is SQL (docstrings left out: they explain)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, placeholders as X
            text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
            for v in node.values:
                skip.add(id(v))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        else:
            continue
        if _SQL.search(text):
            out.append((node.lineno, text[:80]))
    return out


def _modules_with_sql() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for package in ALLOWED:
        if package == "warehouse":
            continue
        for path in _room_files(package):
            found = _sql_literals(path)
            if found:
                out[str(path.relative_to(REPO))] = found
    return out


def test_product_sql_lives_in_the_warehouse():
    found = _modules_with_sql()
    stray = {path: lines for path, lines in found.items() if path not in SQL_EXCEPTIONS and path not in SQL_NOT_YET_MOVED}
    assert not stray, f"SQL outside membench/warehouse/ (move the read into membench/warehouse/queries.py): {stray}"
    cleaned = sorted(path for path in (set(SQL_EXCEPTIONS) | SQL_NOT_YET_MOVED) - set(found) if (REPO / path).exists())
    assert not cleaned, f"these modules hold no SQL any more: take them off the lists {cleaned}"


def test_the_sql_check_sees_sql():
    """Not vacuous: the reads of membench/warehouse/queries.py are SQL to it, prose and docstrings are not."""
    assert len(_sql_literals(PKG / "warehouse" / "queries.py")) >= 20
    assert _SQL.search('f"SELECT run_id FROM {table} WHERE x"') and _SQL.search("INSERT INTO t VALUES")
    assert not _SQL.search("select the runs from the table") and not _SQL.search("the SELECT clause")
