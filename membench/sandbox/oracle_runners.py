"""Which program runs a hidden oracle in the oracle's sandbox (docs/sandbox.md, "Oracle runners").

- `fast` (the default): `harness/oracle_runner.py` calls the oracle's test functions itself, with
  `harness/pytest_standin.py` as the oracle's `pytest`; the interpreters start without `site`.
- `pytest`: `harness/oracle_client.py` runs real pytest over the oracle, as before the fast runner.

`MEMBENCH_ORACLE_RUNNER=pytest` selects the pytest runner for every scoring; `score_session`
takes `runner=` too. An oracle that uses what the fast runner does not offer
(`fast_runner_refusal` names it) is scored by pytest whatever the setting, and `membench
validate` refuses the pack's gate `oracle_runner` with the same reason, so an author learns it
before a run does.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from membench.sandbox.base import FAST_PROBE_SCRIPT, PROBE_SCRIPT
from membench.sandbox.harness.pytest_standin import BUILTIN_FIXTURES, FIXTURE_SCOPES, SUPPORTED, SUPPORTED_MARKS

RUNNER_ENV = "MEMBENCH_ORACLE_RUNNER"
FAST, PYTEST = "fast", "pytest"
RUNNERS = (FAST, PYTEST)
# xunit-style setup and teardown hooks pytest calls by name; the fast runner does not
XUNIT_MODULE = {"setup_module", "teardown_module", "setup_function", "teardown_function", "setup", "teardown"}
XUNIT_CLASS = {"setup_class", "teardown_class", "setup_method", "teardown_method", "setup", "teardown"}


def default_runner() -> str:
    """The runner `MEMBENCH_ORACLE_RUNNER` names (`fast` when unset)."""
    value = os.environ.get(RUNNER_ENV, "").strip() or FAST
    if value not in RUNNERS:
        raise ValueError(f"{RUNNER_ENV} must be one of {', '.join(RUNNERS)}, not {value!r}")
    return value


def probe_script() -> str:
    """What a backend's probe runs in its jail: what the oracle runner in use needs."""
    return FAST_PROBE_SCRIPT if default_runner() == FAST else PROBE_SCRIPT


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class _Check(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, list[str]] = {}  # a local name -> the pytest path it stands for
        self.problems: list[str] = []

    def problem(self, node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.append(f"line {line}: {what}")

    def resolve(self, node: ast.AST) -> list[str] | None:
        """`["pytest", "mark", "parametrize"]` for an expression naming something of pytest's."""
        dotted = _dotted(node)
        if dotted is None or dotted[0] not in self.aliases:
            return None
        return self.aliases[dotted[0]] + dotted[1:]

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".", 1)[0]
            if top in ("_pytest", "pluggy") or alias.name.startswith("pytest."):
                self.problem(node, f"imports {alias.name}")
            elif alias.name == "pytest":
                self.aliases[alias.asname or "pytest"] = ["pytest"]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        top = module.split(".", 1)[0]
        if top in ("_pytest", "pluggy") or module.startswith("pytest."):
            self.problem(node, f"imports from {module}")
        elif module == "pytest" and not node.level:
            for alias in node.names:
                if alias.name == "*" or alias.name not in SUPPORTED:
                    self.problem(node, f"uses pytest.{alias.name}")
                else:
                    self.aliases[alias.asname or alias.name] = ["pytest", alias.name]

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self.resolve(node)
        if path is not None:
            self._check_path(node, path)
            return  # the chain is checked whole
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        path = self.resolve(node)
        if path is not None and len(path) > 1:
            self._check_path(node, path)

    def _check_path(self, node: ast.AST, path: list[str]) -> None:
        if len(path) > 1 and path[1] not in SUPPORTED:
            self.problem(node, f"uses pytest.{path[1]}")
        elif len(path) > 2 and path[1] == "mark" and path[2] not in SUPPORTED_MARKS:
            self.problem(node, f"uses pytest.mark.{path[2]}")

    def visit_Call(self, node: ast.Call) -> None:
        path = self.resolve(node.func)
        if path == ["pytest", "fixture"]:
            for keyword in node.keywords:
                if keyword.arg in ("params", "autouse", "ids"):
                    self.problem(node, f"a fixture with {keyword.arg}=")
                elif keyword.arg == "scope" and not (isinstance(keyword.value, ast.Constant)
                                                     and keyword.value.value in FIXTURE_SCOPES):
                    self.problem(node, "a fixture scope other than function, module or session")
        elif path == ["pytest", "mark", "skipif"]:
            condition = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "condition"),
                                                            None)
            if isinstance(condition, ast.Constant) and isinstance(condition.value, str):
                self.problem(node, "pytest.mark.skipif with a string condition")
        elif path == ["pytest", "mark", "parametrize"]:
            if any(k.arg in ("indirect", "scope") for k in node.keywords):
                self.problem(node, "pytest.mark.parametrize with indirect= or scope=")
        self.generic_visit(node)


def _parametrized(decorators: list[ast.expr], check: _Check) -> set[str] | None:
    """The argnames the `parametrize` decorators give; None when one is not a literal."""
    names: set[str] = set()
    for decorator in decorators:
        if isinstance(decorator, ast.Call) and check.resolve(decorator.func) == ["pytest", "mark", "parametrize"]:
            first = decorator.args[0] if decorator.args else next(
                (k.value for k in decorator.keywords if k.arg == "argnames"), None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names |= {n.strip() for n in first.value.split(",") if n.strip()}
            elif isinstance(first, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first.elts):
                names |= {e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}  # all are
            else:
                return None
    return names


def _fixture_name(func: ast.FunctionDef, check: _Check) -> str | None:
    for decorator in func.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if check.resolve(target) == ["pytest", "fixture"]:
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                        return str(keyword.value.value)
            return func.name
    return None


def _required(func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> list[str]:
    args = func.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if method and positional:
        positional = positional[1:]
    if args.defaults:
        positional = positional[:-len(args.defaults)]
    kwonly = [a.arg for a, default in zip(args.kwonlyargs, args.kw_defaults) if default is None]
    return positional + kwonly


def refusal_of_source(source: str) -> str:
    """Why the fast runner cannot run this oracle as pytest would ("" when it can)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""  # a collection error on either runner: the fast one reports it the same way
    check = _Check()
    check.visit(tree)
    fixtures = set(BUILTIN_FIXTURES)
    functions: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.expr], bool]] = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
                check.problem(node, "a module-level pytestmark")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = _fixture_name(node, check) if isinstance(node, ast.FunctionDef) else None
            if node.name in XUNIT_MODULE:
                check.problem(node, f"the xunit hook {node.name}()")
            if name is not None:
                fixtures.add(name)
                functions.append((node, [], False))
            elif node.name.startswith("test"):
                if isinstance(node, ast.AsyncFunctionDef):
                    check.problem(node, f"the async test {node.name}")
                functions.append((node, node.decorator_list, False))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            if node.bases or node.keywords:
                check.problem(node, f"the test class {node.name} has base classes")
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if item.name in XUNIT_CLASS:
                        check.problem(item, f"the xunit hook {node.name}.{item.name}()")
                    elif isinstance(item, ast.FunctionDef) and _fixture_name(item, check) is not None:
                        check.problem(item, f"the fixture {node.name}.{item.name} in a class")
                    elif item.name.startswith("test"):
                        if isinstance(item, ast.AsyncFunctionDef):
                            check.problem(item, f"the async test {node.name}.{item.name}")
                        functions.append((item, item.decorator_list + node.decorator_list, True))
    for func, decorators, method in functions:
        given = _parametrized(decorators, check)
        if given is None:
            check.problem(func, f"{func.name}: parametrize argnames that are not a literal")
            continue
        for arg in _required(func, method):
            if arg not in fixtures and arg not in given:
                check.problem(func, f"{func.name} asks for the fixture '{arg}'")
    return "; ".join(dict.fromkeys(check.problems))


def fast_runner_refusal(oracle_file: Path) -> str:
    """Why the fast runner cannot run ORACLE_FILE as pytest would, or "" when it can: the pytest
    names, marks, fixtures or hooks it uses that `harness/pytest_standin.py` does not offer."""
    try:
        source = Path(oracle_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    return refusal_of_source(source)
