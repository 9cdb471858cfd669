"""The agent's workspace has a size cap, and the harness never reads a workspace into memory
whole: the cap is a tmpfs where membench may mount, and the diff is streamed."""

from __future__ import annotations

import errno
import os

import pytest

from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import (
    WorkspaceTooLarge,
    capped_directory,
    diff_trees,
    diff_workspace,
    snapshot,
    write_tree,
)
from tests.conftest import skip_or_fail


def test_diff_workspace_equals_the_full_snapshot_diff(tmp_path):
    before = {"a.py": b"one\n", "gone.py": b"x\n", "tests/t.py": b"t\n", "same.py": b"s\n"}
    write_tree({"a.py": b"two\n", "new.py": b"n\n", "tests/t.py": b"u\n", "same.py": b"s\n"}, tmp_path / "ws")
    streamed, full = diff_workspace(before, tmp_path / "ws"), diff_trees(before, snapshot(tmp_path / "ws"))
    assert streamed == full
    assert sorted(streamed.changed) == ["a.py", "gone.py", "new.py", "tests/t.py"]  # unchanged files not kept


def test_an_oversized_workspace_is_refused_before_anything_is_read(tmp_path):
    (tmp_path / "ws").mkdir()
    with open(tmp_path / "ws" / "junk.bin", "wb") as handle:  # 8 GiB, sparse: reading it would take 8 GiB
        handle.truncate(8 << 30)
    with pytest.raises(WorkspaceTooLarge, match="more than 512 MiB"):
        diff_workspace({}, tmp_path / "ws", limit_bytes=512 << 20)


@pytest.mark.integration
def test_scoring_an_oversized_workspace_is_a_failed_session(bwrap_sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_WORKSPACE_MB", "1")
    base = {"pkg/__init__.py": b""}
    write_tree({**base, "pkg/blob.py": b"#" * (2 << 20)}, tmp_path / "ws")
    oracle = tmp_path / "test_oracle.py"
    oracle.write_text("def test_x():\n    assert True\n")
    result = score_session(bwrap_sandbox, base, tmp_path / "ws", oracle, timeout_s=30)
    assert result.outcome == "workspace_too_large"


def test_a_capped_directory_refuses_writes_past_its_size(tmp_path):
    with capped_directory(tmp_path / "ws", size_mb=4) as ws:
        if not os.path.ismount(ws):
            skip_or_fail("capped_directory falls back to a plain directory here (membench is not root or may "
                         "not mount); the cap is then enforced only when the harness reads the workspace")
        with pytest.raises(OSError) as raised:
            (ws / "junk.bin").write_bytes(b"\0" * (8 << 20))
        assert raised.value.errno == errno.ENOSPC
    assert not os.path.ismount(tmp_path / "ws")  # unmounted again
