"""Only the CLI ends the process and draws the terminal (docs/design.md §1, the import rule): in the
rooms below the CLI a run returns its outcome or raises a typed error, shows itself on the `RunDisplay` its
caller passes, and imports no `rich`. The exits that remain are separate programs' own mains."""

from __future__ import annotations

import ast

from tests.test_architecture import PKG, REPO, ROOMS, _imports


# programs run as processes of their own (a sandbox's, a code generator's, a benchmark's worker): their
# exit status is their answer to the process that started them
PROGRAMS = {
    "membench/agents/inside/launch.py": "the agent's launcher in the sandbox: exits with the agent's status",
    "membench/agents/inside/openai_loop.py": "the built-in agent loop, a program in the sandbox",
    "membench/transfer_protocol/inside/evaluator_runner.py": "the hidden evaluator's case runner, in its sandbox",
    "membench/schemas/payload_types.py": "the code generator of membench/schemas/payloads.py (python -m)",
    "membench/warehouse/row_types.py": "the code generator of membench/warehouse/rows.py (python -m)",
    "membench/bench/floor.py": "the faust worker process the floor benchmark starts; it ends once its figure is written",
}


def _exits(source: str) -> list[int]:
    """Lines that end the process: sys.exit, os._exit, exit, quit, or a raised SystemExit."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
            if (owner, name) in (("sys", "exit"), ("os", "_exit")) or (not owner and name in ("exit", "quit")):
                found.append(node.lineno)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id == "SystemExit":
                found.append(node.lineno)
    return found


def test_no_room_below_the_cli_ends_the_process():
    stray = {}
    for room in ROOMS:
        for path in sorted((PKG / room).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            lines = _exits(path.read_text(encoding="utf-8"))
            if lines and rel not in PROGRAMS:
                stray[rel] = lines
    assert not stray, f"process exits below membench/ (return an outcome or raise a typed error): {stray}"


def test_the_programs_listed_exist_and_exit():
    """An entry whose module is gone, or exits no more, would silently allow a new exit."""
    for rel in PROGRAMS:
        assert _exits((REPO / rel).read_text(encoding="utf-8")), rel


def test_the_exit_check_sees_exits():
    """Not vacuous: each way of ending the process is found; a status, a name alone or a comment is not."""
    for code in ("import sys\nsys.exit(2)\n", "import os\nos._exit(130)\n", "raise SystemExit(4)\n",
                 "raise SystemExit\n", "exit(1)\n"):
        assert _exits(code) == [code.count("\n")], code
    assert _exits("EXIT_STOPPED = 130  # sys.exit(130)\nstatus = stop_exit_status(None)\n") == []


def test_no_room_below_the_cli_draws_the_terminal():
    drawing = {str(path.relative_to(REPO)): sorted(m for m in _imports(path) if m.split(".")[0] == "rich")
               for room in ROOMS for path in sorted((PKG / room).rglob("*.py"))}
    drawing = {rel: modules for rel, modules in drawing.items() if modules}
    assert not drawing, f"rich imported below membench/ (show it on the caller's RunDisplay): {drawing}"


# modules run as `python -m` programs of their own: their command line is theirs to read
ARGV_READERS = {
    "membench/bench/sink_bytes.py": "python -m membench.bench.sink_bytes N",
    "membench/bench/worker_memory.py": "the worker-memory benchmark's own process",
    "membench/bench/replay_rates.py": "python -m membench.bench.replay_rates N | rss LOG | log LOG",
    "membench/bench/floor.py": "the faust worker process the floor benchmark starts",
}


def _argv_reads(source: str) -> list[int]:
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and node.attr == "argv"
            and isinstance(node.value, ast.Name) and node.value.id == "sys"]


def test_no_room_below_the_cli_reads_the_command_line():
    """A library call has no command line: what the CLI was asked (a run's resume command) is passed in."""
    stray = {}
    for room in ROOMS:
        for path in sorted((PKG / room).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            lines = _argv_reads(path.read_text(encoding="utf-8"))
            if lines and rel not in ARGV_READERS and rel not in PROGRAMS:
                stray[rel] = lines
    assert not stray, f"sys.argv read below membench/ (take it as a parameter from the CLI): {stray}"
    assert all(_argv_reads((REPO / rel).read_text(encoding="utf-8")) for rel in ARGV_READERS)
    assert _argv_reads("import sys\nargs = sys.argv[1:]\n") == [2]
