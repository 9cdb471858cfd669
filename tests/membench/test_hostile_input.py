"""Hostile names and bytes through the real CLI: run-set ids are confined, pack
paths stay inside the pack, oversized and non-UTF-8 inputs are one line with exit status 2, and a
failed command leaves nothing written in MEMBENCH_HOME or beside its output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.commands.cli_helpers import validate_run_set_id
from membench.errors import UsageError
from membench.formats.fields import MAX_INPUT_BYTES
from tests.packs.hygiene_helpers import FIXTURES
from tests.packs.test_finalize_secrets import break_mid_fill
from tests.packs.test_remem_import import LATER

BAD_IDS = ["../escape", "a/b", "/abs", ".hidden", "-rf", "a..b", "x" * 129, "tab\there", "ünïcode"]


def one_line_exit_2(proc) -> str:
    """The error line of a usage error: exit status 2, one line on stderr, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*")) if path.exists() else []


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    dest = tmp_path / "skeleton"
    shutil.copytree(FIXTURES / "smoke", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


# -- run-set ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["smoke-memory-literal-1a2b3c4d", "A", "run.1_x-2", "x" * 128, None])
def test_valid_run_set_ids_pass(value):
    assert validate_run_set_id(value) == value


@pytest.mark.parametrize("value", BAD_IDS + [""])
def test_invalid_run_set_ids_are_usage_errors(value):
    with pytest.raises(UsageError) as info:
        validate_run_set_id(value, "--run-set")
    assert info.value.exit_code == 2
    assert info.value.format_message().startswith(f"--run-set: invalid run-set id {value!r}")


@pytest.mark.parametrize("value", BAD_IDS)
def test_score_refuses_a_hostile_run_set_id_before_writing(cli_inproc, home, tmp_path, value):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"unit": "smoke-currency", "condition": "B0", "seed": 1, "patch": ""}) + "\n")
    line = one_line_exit_2(cli_inproc("score", "smoke", "--predictions", str(predictions), "--run-set", value))
    assert line.startswith("Error: --run-set: invalid run-set id")
    assert not home.exists() and tree(tmp_path) == ["p.jsonl"]


def test_run_refuses_a_hostile_run_set_id(cli, home, tmp_path):
    # --agent is bad too: the id is checked first, so the error names the id
    line = one_line_exit_2(cli("run", "smoke", "--run-set", "../escape", "--agent", "bogus:x"))
    assert "--run-set: invalid run-set id '../escape'" in line and not home.exists()


def test_report_refuses_a_hostile_run_set_id(cli, home):
    line = one_line_exit_2(cli("report", "../../escape"))
    assert "RUN_SET: invalid run-set id '../../escape'" in line and not home.exists()


# replay.py is not this change's to edit: the test passes once `validate_run_set_id(...)` is called
# for `warehouse:RUN_SET` there. Until then it is an expected
# failure, and strict, so that adding the call makes it fail with "XPASS(strict)": then remove the
# marker.
def test_replay_refuses_a_hostile_warehouse_run_set_id(cli, home):
    line = one_line_exit_2(cli("replay", "warehouse:../escape"))
    assert "warehouse:RUN_SET: invalid run-set id '../escape'" in line and not home.exists()


# -- packs: paths stay inside, bytes are UTF-8, sizes are bounded --------------------------------------


def test_run_and_validate_refuse_a_pack_with_a_link_out_of_it(cli_inproc, home, smoke, tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    link = smoke / "hidden" / "smoke-currency" / "key.txt"
    link.symlink_to(secret)
    for args in (("run", str(smoke), "--conditions", "B0", "--seeds", "1"), ("validate", str(smoke))):
        line = one_line_exit_2(cli_inproc(*args))
        assert f"{link}: symbolic link to '{secret}' points outside the pack" in line
    assert not home.exists()


def test_run_refuses_a_repository_path_out_of_the_pack(cli_inproc, home, smoke):
    manifest = json.loads((smoke / "manifest.json").read_text())
    manifest["sequences"][1]["sessions"][0]["visible_files"] = ["../../../../etc/shadow"]
    (smoke / "manifest.json").write_text(json.dumps(manifest))
    line = one_line_exit_2(cli_inproc("run", str(smoke), "--conditions", "B0", "--seeds", "1"))
    assert "sequence smoke-currency: sessions[0]: field 'visible_files'" in line and "leaves its directory" in line
    assert not home.exists()


def test_finalize_refuses_a_non_utf8_manifest(cli_inproc, smoke, tmp_path):
    manifest = smoke / "manifest.json"
    data = manifest.read_bytes()
    manifest.write_bytes(data[:40] + b"\x92" + data[40:])  # a Windows-1252 quote
    line_number = data[:40].count(b"\n") + 1
    line = one_line_exit_2(cli_inproc("pack", "finalize", str(smoke), str(tmp_path / "out")))
    assert line == f"Error: {manifest}: not UTF-8: invalid byte 0x92 at byte offset 40 (line {line_number})"
    assert not (tmp_path / "out").exists()


def test_a_failed_forced_finalize_keeps_the_existing_output(cli, cli_inproc, smoke, tmp_path):
    out = tmp_path / "out"
    cli("pack", "finalize", str(smoke), str(out), check=True)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    oracle = break_mid_fill(smoke)
    line = one_line_exit_2(cli_inproc("pack", "finalize", str(smoke), str(out), "--force"))
    assert line.startswith(f"Error: {oracle}: not UTF-8: invalid byte 0xff")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "skeleton"]  # no staging directory left


def test_run_refuses_an_oversized_manifest_without_reading_it(cli_inproc, home, smoke):
    with (smoke / "manifest.json").open("r+b") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)
    line = one_line_exit_2(cli_inproc("run", str(smoke)))
    assert line == f"Error: {smoke / 'manifest.json'}: larger than the 16 MiB input limit (refused unread)"
    assert not home.exists()


def test_import_refuses_non_utf8_and_writes_nothing(cli_inproc, tmp_path):
    source = tmp_path / "tasks.json"
    text = json.dumps(LATER).encode()
    source.write_bytes(text[:100] + b"\xfe" + text[100:])
    line = one_line_exit_2(cli_inproc("import", "remem", str(source), str(tmp_path / "packs" / "imported")))
    assert line == f"Error: {source}: not UTF-8: invalid byte 0xfe at byte offset 100 (line 1)"
    assert not (tmp_path / "packs").exists()


# -- predictions ---------------------------------------------------------------------------------------


def test_score_refuses_non_utf8_predictions_before_writing(cli_inproc, home, tmp_path):
    predictions = tmp_path / "p.jsonl"
    good = json.dumps({"unit": "smoke-currency", "condition": "B0", "seed": 1, "patch": ""}).encode()
    predictions.write_bytes(good + b"\n" + good[:10] + b"\xff" + good[10:] + b"\n")
    line = one_line_exit_2(cli_inproc("score", "smoke", "--predictions", str(predictions)))
    assert line == f"Error: {predictions}: not UTF-8: invalid byte 0xff at byte offset {len(good) + 11} (line 2)"
    assert not home.exists()  # not even the finalized-pack cache


@pytest.mark.parametrize("patch", [
    "--- a/../../outside.py\n+++ b/../../outside.py\n@@ -0,0 +1 @@\n+x\n",
    "--- /dev/null\n+++ /etc/cron.d/job\n@@ -0,0 +1 @@\n+x\n",
    "diff --git a/x b/y\nrename from ledger/money.py\nrename to ../money.py\n",
])
def test_score_refuses_a_patch_out_of_the_workspace(cli_inproc, home, tmp_path, patch):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"unit": "smoke-currency", "condition": "B0", "seed": 1, "patch": patch}) + "\n")
    line = one_line_exit_2(cli_inproc("score", "smoke", "--predictions", str(predictions)))
    assert line.startswith(f"Error: {predictions}:1: field 'patch': diff line ")
    assert "a patch must stay inside the workspace" in line and not home.exists()


def test_a_patch_whose_content_looks_like_headers_is_accepted(tmp_path):
    from membench.runner.predictions import patch_path_problem

    patch = ("diff --git a/notes.sql b/notes.sql\n--- a/notes.sql\n+++ b/notes.sql\n@@ -1,2 +1,2 @@\n"
             "--- /etc/passwd is a comment here\n+++ ../ also just content\n")
    assert patch_path_problem(patch) is None
    quoted = '--- "a/\\056\\056/x"\n+++ "b/\\056\\056/x"\n'  # git's C-quoting of '..'
    assert patch_path_problem(quoted) == (1, "'a/../x' leaves its directory ('..')")


def test_score_refuses_oversized_predictions(cli_inproc, home, tmp_path):
    predictions = tmp_path / "p.jsonl"
    with predictions.open("wb") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)
    line = one_line_exit_2(cli_inproc("score", "smoke", "--predictions", str(predictions)))
    assert line == f"Error: {predictions}: larger than the 16 MiB input limit (refused unread)"
    assert not home.exists()


# -- statistics inputs ---------------------------------------------------------------------------------


def test_stats_compare_refuses_non_utf8_cells(cli_inproc, tmp_path):
    cells = tmp_path / "cells.csv"
    head = b"unit,seed,condition,passed\nt1,1,A,1\nt1,1,B,0\n"
    cells.write_bytes(head + b"t2,1,\xc0A,1\n")  # 0xc0 never occurs in UTF-8
    line = one_line_exit_2(cli_inproc("stats", "compare", "--cells", str(cells), "--pair", "A:B"))
    assert line == f"Error: {cells}, line 4: not UTF-8: invalid byte 0xc0 at byte offset {len(head) + 5}"


def test_stats_ccpf_refuses_a_non_utf8_manifest(cli_inproc, tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text("run,task,case,status\nr,toy,A-01,passed\n")
    manifest = tmp_path / "toy.manifest.v2.json"
    manifest.write_bytes(b'{"taskId": "toy", "cases": [{"id": "A-01", "dimension": "\xe4"}]}')
    line = one_line_exit_2(cli_inproc("stats", "ccpf", "--cases", str(cases), "--manifest", str(manifest)))
    assert line == f"Error: {manifest}, line 1: not UTF-8: invalid byte 0xe4 at byte offset 57"
