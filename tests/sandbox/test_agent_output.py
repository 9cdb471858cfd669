"""What an agent leaves behind can fail its session, never crash the unit (which would
exclude the cell), and never cost the host more than a bound. Each defence has its control: the
undefended path still breaks the way the attack needs."""

from __future__ import annotations

import hashlib
import os
import tracemalloc
from pathlib import Path

import pytest

from membench.bus.emitter import RunEmitter
from membench.sandbox.scoring import production_change
from membench.sandbox.workspace import (
    DIFF_STORE_LIMIT,
    TRUNCATION_MARK,
    PatchTooLarge,
    UnencodableWorkspacePath,
    diff_trees,
    diff_workspace,
    render_patch_bounded,
    snapshot,
    tree_digest,
)
from membench.schemas.events import bounded_text, text_sanitized


def _turn(text: dict) -> dict:
    return {"role": "agent", "text": text, "source_event_id": None, "source_kind": None, "input_tokens": 0,
            "cached_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0, "latency_ms": 0}


def test_lone_surrogate_text_is_recorded_sanitized_with_the_digest_of_what_was_written():
    emitter = RunEmitter("rs", "run", "unit", lambda event, datum: None)
    raw = "agent said \ud800 and \udce9"
    # control: the encoder refuses the raw text — before, this exception ended the unit as excluded
    unsanitized = {"text": raw, "sha256": "0" * 64, "length": len(raw), "truncated": False}
    with pytest.raises(ValueError, match="UnicodeEncodeError"):
        emitter.emit("Turn", _turn(unsanitized))
    record = bounded_text(raw)
    event = emitter.emit("Turn", _turn(record))
    assert event.seq == 0  # the refused emit consumed no seq: the chain has no gap
    assert record["text"] == "agent said \ufffd and \ufffd" and record["length"] == len(raw)
    assert record["sha256"] == hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
    assert text_sanitized(record) is True and text_sanitized(bounded_text("plain é")) is False
    assert bounded_text("plain é")["sha256"] == hashlib.sha256("plain é".encode()).hexdigest()  # unchanged


def _non_utf8_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("X = 1\n")
    with open(os.path.join(os.fsencode(workspace), b"caf\xe9.py"), "wb") as handle:
        handle.write(b"Y = 2\n")
    return workspace


def test_a_non_utf8_file_name_fails_the_session_by_name(tmp_path):
    workspace = _non_utf8_workspace(tmp_path)
    start = {"app.py": b"X = 1\n"}
    # control: the undefended path (snapshot, then any digest or event of its names) raises — the
    # unit's crash that excluded the cell
    with pytest.raises(UnicodeEncodeError):
        tree_digest(snapshot(workspace))
    with pytest.raises(UnicodeEncodeError):
        diff_trees(start, snapshot(workspace))
    with pytest.raises(UnencodableWorkspacePath, match=r"caf\\\\xe9\.py"):
        diff_workspace(start, workspace)
    diff, scored, rejected = production_change(start, workspace)
    assert rejected is not None and rejected.outcome == "unencodable_workspace_path"
    assert scored == start and diff.files == []  # nothing of the agent's tree goes on


def test_a_symlink_to_a_non_utf8_target_is_compared_by_its_bytes(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.symlink(b"caf\xe9", os.path.join(os.fsencode(workspace), b"link"))
    # control: the target read as text, as before, cannot be encoded
    with pytest.raises(UnicodeEncodeError):
        str((workspace / "link").readlink()).encode()
    diff = diff_workspace({}, workspace)
    assert diff.changed == {"link": b"symlink:caf\xe9"}


def test_the_stored_diff_is_capped_and_the_cut_recorded(tmp_path):
    before = {f"pkg/m{i}.py": b"" for i in range(8)}
    after = {rel: b"".join(b"value_%07d = %d\n" % (n, n) for n in range(40_000)) for rel in before}  # ~0.9 MiB each
    diff = diff_trees(before, after)
    whole = render_patch_bounded(before, diff, diff.production, limit=1 << 30)  # control: no cap
    assert not whole.truncated and len(whole.text.encode()) == whole.full_bytes > DIFF_STORE_LIMIT
    capped = render_patch_bounded(before, diff, diff.production)
    kept = len(capped.text.encode())
    assert capped.truncated and capped.full_bytes == whole.full_bytes
    assert kept <= DIFF_STORE_LIMIT + 200 and whole.text.startswith(capped.text.rsplit("\\ membench:", 1)[0])
    assert capped.text.endswith(TRUNCATION_MARK.format(kept=capped.text.rsplit("\\ membench:", 1)[0].encode().__len__(),
                                                       full=whole.full_bytes))
    assert diff.added_lines == 8 * 40_000


def test_a_huge_file_is_named_by_digest_not_line_diffed():
    before = {"data.txt": b""}
    after = {"data.txt": b"line\n" * 400_000}  # 2 MB: over RENDER_FILE_LIMIT
    diff = diff_trees(before, after)
    text = render_patch_bounded(before, diff, diff.production).text
    assert text.startswith("Large files a/data.txt") and hashlib.sha256(after["data.txt"]).hexdigest() in text
    assert (diff.added_lines, diff.removed_lines) == (400_000, 0)


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 — the outcome is part of what is measured
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_harness_memory_does_not_grow_with_a_512_mib_workspace(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "app.py").write_text("X = 2\n")
    with open(workspace / "blob.bin", "wb") as handle:  # sparse: 511 MiB of size, no disk
        handle.truncate((512 << 20) - (1 << 20))
    out, peak = _peak(lambda: diff_workspace({"app.py": b"X = 1\n"}, workspace))
    assert isinstance(out, PatchTooLarge), out  # over MEMBENCH_PATCH_MB: refused before any read
    assert peak < 4 << 20, peak
    diff, scored, rejected = production_change({"app.py": b"X = 1\n"}, workspace)
    assert rejected is not None and rejected.outcome == "patch_too_large" and scored == {"app.py": b"X = 1\n"}
    # control: without the patch limit the harness holds the whole change (what cost 1.96 GB before)
    os.truncate(workspace / "blob.bin", 48 << 20)
    out, peak = _peak(lambda: diff_workspace({"app.py": b"X = 1\n"}, workspace, patch_bytes=1 << 30))
    assert peak >= 48 << 20, peak


def test_unchanged_files_are_compared_chunk_by_chunk(tmp_path):
    content = os.urandom(8 << 20)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.bin").write_bytes(content)
    (workspace / "app.py").write_text("X = 2\n")
    out, peak = _peak(lambda: diff_workspace({"big.bin": content, "app.py": b"X = 1\n"}, workspace))
    assert out.production == ["app.py"], out
    assert peak < 4 << 20, peak  # never the 8 MiB file read whole (a whole read would peak at ≥ 8 MiB)
