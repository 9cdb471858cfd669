"""What was scored is readable from the log: PatchProduced carries the production and stripped
diffs, inline up to INLINE_DIFF_LIMIT, else content-addressed beside the log."""

from __future__ import annotations

import hashlib

from membench.runner.grid import INLINE_DIFF_LIMIT, patch_fields
from membench.sandbox.workspace import diff_trees, render_patch


def test_a_small_diff_is_inline_with_its_digest(tmp_path):
    fields = patch_fields("production_diff", "--- a/x\n+++ b/x\n", tmp_path / "blobs")
    assert fields == {"production_diff": "--- a/x\n+++ b/x\n",
                      "production_diff_sha256": hashlib.sha256(b"--- a/x\n+++ b/x\n").hexdigest()}
    assert not (tmp_path / "blobs").exists()


def test_a_large_diff_is_stored_by_digest_and_the_event_names_it(tmp_path):
    text = "+" + "x" * INLINE_DIFF_LIMIT + "\n"
    fields = patch_fields("stripped_diff", text, tmp_path / "blobs")
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert fields == {"stripped_diff": None, "stripped_diff_sha256": digest}
    assert (tmp_path / "blobs" / digest).read_text() == text
    assert [p.name for p in (tmp_path / "blobs").iterdir()] == [digest]  # no staging file left


def test_render_patch_shows_additions_deletions_and_binary_files():
    before = {"a.py": b"one\ntwo\n", "gone.py": b"bye\n", "img.bin": b"\xff\x00"}
    after = {"a.py": b"one\nTWO\n", "new.py": b"hello", "img.bin": b"\xfe\x00"}
    diff = diff_trees(before, after)
    text = render_patch(before, diff, diff.production)
    assert "--- a/a.py\n+++ b/a.py\n" in text and "-two\n+TWO\n" in text
    assert "--- a/gone.py\n+++ /dev/null\n" in text and "-bye\n" in text
    assert "--- /dev/null\n+++ b/new.py\n" in text and "+hello\n\\ No newline at end of file\n" in text
    assert "Binary files a/img.bin (" in text and hashlib.sha256(b"\xfe\x00").hexdigest() in text
