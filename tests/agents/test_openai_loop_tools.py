"""The built-in loop's tools (membench/agents/inside/openai_loop.py), run on the host against a
temporary workspace: paths stay inside it, `run` output is cut with a marker, and a tool error is
returned to the model rather than ending the session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

LOOP = Path(__file__).resolve().parents[2] / "membench" / "agents" / "inside" / "openai_loop.py"


@pytest.fixture
def loop(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_WORKSPACE", str(tmp_path))
    spec = importlib.util.spec_from_file_location("openai_loop_under_test", LOOP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("openai_loop_under_test", None)


def test_files_are_read_written_and_listed_inside_the_workspace_only(loop, tmp_path):
    assert loop.tool("write_file", {"path": "pkg/a.py", "content": "x = 1\n"}) == ("wrote pkg/a.py (6 characters)", 0)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    assert loop.tool("read_file", {"path": "pkg/a.py"}) == ("x = 1\n", 0)
    assert loop.tool("list_files", {"path": "."}) == ("pkg/a.py", 0)
    for path in ("../outside.txt", "/etc/passwd", "pkg/../../x"):
        with pytest.raises(ValueError, match="outside the repository"):
            loop.tool("read_file", {"path": path})
    assert not (tmp_path.parent / "outside.txt").exists()


def test_run_returns_output_and_exit_code_and_cuts_long_output_with_a_marker(loop):
    assert loop.tool("run", {"command": "echo hi; exit 3"}) == ("hi\n", 3)
    output, code = loop.tool("run", {"command": "python3 -c \"print('y' * 25000)\""})
    assert code == 0 and len(output) == 25001
    cut = loop.cut(output)
    assert cut.startswith("y" * loop.OUTPUT_LIMIT) and cut.endswith("[... output truncated: 15001 more characters]")
    assert loop.cut("short") == "short"


def test_an_unknown_tool_is_an_error_the_model_sees(loop):
    with pytest.raises(KeyError):
        loop.tool("delete_everything", {})
