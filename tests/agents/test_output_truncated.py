"""Agent stdout past the sandbox's limit (STDOUT_LIMIT, 4 MiB) is cut; a harness Turn says how much
was dropped, so a cut transcript is never read as the agent's whole output. Real bubblewrap, the
real command agent; the podman backend counts what it drops too."""

from __future__ import annotations

from pathlib import Path

import pytest

from membench.agents.base import OUTPUT_TRUNCATED, AgentTask
from membench.agents.command import CommandAgent
from membench.bus.emitter import RunEmitter
from membench.memory_systems.base import MemoryContext
from membench.sandbox.bwrap import STDOUT_LIMIT
from membench.sandbox.docker_backend import _read_capped

FLOOD = STDOUT_LIMIT + 300_000


def _act(sandbox, tmp_path: Path, size: int):
    program = tmp_path / "flood.py"
    program.write_text("import sys\n"
                       "sys.stdout.write('{\"type\": \"turn\", \"text\": \"flooding\"}\\n')\n"
                       f"sys.stdout.write('x' * {size})\n")
    program.chmod(0o644)
    workspace = tmp_path / f"workspace-{size}"
    workspace.mkdir()
    events = []
    emitter = RunEmitter("rs", "run-1", "smoke/t/B0/1", lambda event, datum: events.append(event))
    emitter.session_index = 1
    CommandAgent([str(program)]).act(AgentTask("flood", workspace, MemoryContext((), (), 0), None, sandbox=sandbox),
                                      emitter)
    return [e for e in events if e.kind == "Turn" and e.payload["source_kind"] == OUTPUT_TRUNCATED]


def test_stdout_past_the_limit_leaves_a_harness_event_saying_how_much_was_dropped(bwrap_sandbox, tmp_path):
    (cut,) = _act(bwrap_sandbox, tmp_path, FLOOD)
    assert cut.visibility == "harness" and cut.payload["role"] == "system"
    printed = len('{"type": "turn", "text": "flooding"}\n') + FLOOD
    assert cut.payload["text"]["text"] == (f"agent stdout cut at the sandbox's limit: kept {STDOUT_LIMIT} bytes, "
                                           f"dropped {printed - STDOUT_LIMIT} bytes")
    assert _act(bwrap_sandbox, tmp_path, 1000) == []  # the control: under the limit nothing is said


@pytest.mark.docker
def test_the_podman_backend_counts_the_stdout_it_drops(docker_sandbox, tmp_path):
    from membench.sandbox.base import SandboxSpec

    spec = SandboxSpec(workspace=tmp_path, ro_mounts={}, rw_mounts={}, wall_time_s=60, cpu_time_s=60, memory_mb=512,
                       max_processes=64)
    result = docker_sandbox.run(["python3", "-c", f"import sys; sys.stdout.write('x' * {FLOOD})"], spec)
    assert (len(result.stdout), result.stdout_dropped) == (STDOUT_LIMIT, FLOOD - STDOUT_LIMIT)


def test_the_podman_backends_reader_counts_what_it_drops():
    chunks = [b"a" * 1000] * 10
    assert _read_capped(iter(chunks), 2500, "head") == ("a" * 2500, 7500)
    assert _read_capped(iter(chunks), 20_000, "head") == ("a" * 10_000, 0)
    tail, dropped = _read_capped(iter([b"x" * 1000, b"y" * 1000]), 1500, "tail")
    assert (tail, dropped) == ("x" * 500 + "y" * 1000, 500)
