"""`membench pack finalize`: CSPRNG fills consistent per trap, refusals, provenance without values."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.packs.finalize import finalize_pack, scan_placeholders
from membench.packs.pack_resolver import finalized_copy
from membench.formats.pack_format import PackError, load_pack
from tests.packs.hygiene_helpers import FIXTURES, edit_manifest


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    dest = tmp_path / "skeleton"
    shutil.copytree(FIXTURES / "smoke", dest)
    return dest


def _all_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="ignore") for p in sorted(root.rglob("*")) if p.is_file())


def test_values_consistent_across_events_oracles_solutions(smoke: Path, tmp_path: Path) -> None:
    values: dict = {}
    provenance = finalize_pack(smoke, tmp_path / "out", reveal=values)
    pack = load_pack(tmp_path / "out")
    for seq in pack.sequences:
        (value,) = values[seq.seq_id].values()
        assert any(value in e.content for e in seq.events)
        assert value in pack.oracle_path(seq, seq.scored_session).read_text()
        assert any(value in t for t in pack.solution(seq, seq.scored_session).reference().values())
        assert all(value in lit for lit in seq.decisive_literals)
    every_value = [v for seq_values in values.values() for v in seq_values.values()]
    assert len(set(every_value)) == len(every_value)
    prov_text = (tmp_path / "out" / "provenance.json").read_text()
    assert not any(v in prov_text for v in every_value)  # classes and places, never a value
    assert provenance["generator_sha256"] and provenance["sequences"]["smoke-currency"]["secrets"]["currency"]["class"] == "word"
    assert "{{SECRET" not in _all_text(tmp_path / "out")


def test_two_finalizations_draw_fresh_values(smoke: Path, tmp_path: Path) -> None:
    a, b = {}, {}
    finalize_pack(smoke, tmp_path / "a", reveal=a)
    finalize_pack(smoke, tmp_path / "b", reveal=b)
    assert a != b


def test_hygiene_pack_secrets_stay_in_their_own_trap(tmp_path: Path) -> None:
    values: dict = {}
    finalize_pack(FIXTURES / "hygiene-v1", tmp_path / "h", reveal=values)
    out = tmp_path / "h"
    manifest = json.loads((out / "manifest.json").read_text())
    entries = {s["seq_id"]: json.dumps(s) for s in manifest["sequences"]}
    rest = json.dumps({k: v for k, v in manifest.items() if k != "sequences"})
    files = {p: p.read_text(errors="ignore") for p in out.rglob("*") if p.is_file() and p.name != "manifest.json"}
    for seq_id, secrets in values.items():
        for value in secrets.values():
            if len(value) < 8:  # 4-digit `int` secrets occur by chance in hex digests and numbers elsewhere
                continue
            assert value not in rest
            for other, text in entries.items():
                assert (value in text) == (other == seq_id) or other == seq_id, (seq_id, other)
            for path, text in files.items():
                if value in text:
                    assert path.relative_to(out).parts[:2] == ("hidden", seq_id), path


@pytest.mark.parametrize("mutate, message", [
    (lambda root: edit_manifest(root, lambda m: m["sequences"][0].__setitem__("secrets", {})), "undeclared placeholder"),
    (lambda root: edit_manifest(root, lambda m: m["sequences"][0].__setitem__("secrets", {"client_id": "hex12", "spare": "hex8"})), "unused placeholder"),
    (lambda root: edit_manifest(root, lambda m: m["sequences"][0].__setitem__("secrets", {"client_id": "hex8"})), "declares class hex8"),
    (lambda root: edit_manifest(root, lambda m: m["sequences"][1]["events"][0].__setitem__(
        "content", m["sequences"][1]["events"][0]["content"] + " Client {{SECRET:client_id:hex12}}.")), "cross-trap-shared"),
    (lambda root: (root / "repos" / "ledger" / "ledger" / "money.py").write_text("X = '{{SECRET:x:hex8}}'\n"), "shared across traps"),
    (lambda root: edit_manifest(root, lambda m: m.__setitem__("description", "{{SECRET:d:hex8}}")), "pack-level field"),
    (lambda root: edit_manifest(root, lambda m: m["sequences"][2]["events"][0].__setitem__("content", "prefix {{SECRET:tenant}}")), "malformed secret placeholder"),
    (lambda root: edit_manifest(root, lambda m: m["sequences"][2]["events"][0].__setitem__("content", "prefix {{SECRET:tenant:uuid}}")), "unknown class"),
])
def test_refusals_name_file_sequence_and_problem(smoke: Path, tmp_path: Path, mutate, message: str) -> None:
    mutate(smoke)
    with pytest.raises(PackError, match=message) as err:
        finalize_pack(smoke, tmp_path / "out")
    assert str(smoke) in str(err.value)


def test_non_strict_finalize_records_problems_per_trap(smoke: Path, tmp_path: Path) -> None:
    edit_manifest(smoke, lambda m: m["sequences"][2]["events"][0].__setitem__("content", "prefix {{SECRET:tenant}}"))
    assert scan_placeholders(smoke)["sequences"]["smoke-audit-prefix"]["problems"]
    provenance = finalize_pack(smoke, tmp_path / "out", strict=False)
    assert provenance["sequences"]["smoke-audit-prefix"]["problems"]
    assert not provenance["sequences"]["smoke-currency"]["problems"]


def test_cli_finalize(cli, cli_inproc, tmp_path: Path) -> None:
    out = tmp_path / "final"
    proc = cli("pack", "finalize", "smoke", str(out), check=True)
    assert "3 sequences, 3 secrets" in proc.stdout
    assert json.loads((out / "provenance.json").read_text())["generator"].startswith("python secrets")
    again = cli_inproc("pack", "finalize", "smoke", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr


# -- nothing half-written --------------------------------------------------------


def break_mid_fill(skeleton: Path) -> Path:
    """Make finalizing fail after the copy, while filling: an oracle of the second trap holds a
    placeholder next to a byte that is not UTF-8 (the scan skips the byte, the fill refuses it)."""
    oracle = skeleton / "hidden" / "smoke-currency" / "s3_make_invoice.py"
    oracle.write_bytes(oracle.read_bytes() + b"\n# \xff {{SECRET:currency:word}}\n")
    return oracle


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_a_failed_finalize_leaves_nothing_behind(smoke: Path, tmp_path: Path) -> None:
    oracle = break_mid_fill(smoke)
    before = entries(tmp_path)
    with pytest.raises(PackError, match=f"^{oracle}: not UTF-8: invalid byte 0xff at byte offset"):
        finalize_pack(smoke, tmp_path / "out" / "final")
    assert entries(tmp_path) == before  # no OUT, no staging directory, no parent made for it


def test_a_failed_finalize_keeps_an_existing_out(smoke: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("earlier pack\n")
    break_mid_fill(smoke)
    with pytest.raises(PackError):
        finalize_pack(smoke, out)
    assert entries(out) == ["keep.txt"] and (out / "keep.txt").read_text() == "earlier pack\n"
    assert entries(tmp_path) == ["out", "skeleton"]


def test_a_finalize_replaces_out_only_when_complete(smoke: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("earlier pack\n")
    finalize_pack(smoke, out)
    assert "keep.txt" not in entries(out) and (out / "provenance.json").is_file()
    assert entries(tmp_path) == ["out", "skeleton"]
    with pytest.raises(FileExistsError):  # without replace, a finished OUT is never touched
        finalize_pack(smoke, out, replace=False)
    assert load_pack(out).name == "smoke"


def test_a_failed_finalize_leaves_no_partial_copy_in_the_cache(smoke: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    break_mid_fill(smoke)
    with pytest.raises(PackError):
        finalized_copy(smoke, home)
    assert not (home / "packs").exists() or entries(home / "packs") == []


def test_the_cache_is_made_once_and_debris_is_replaced(smoke: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = finalized_copy(smoke, home)
    assert entries(home / "packs") == [target.name] and (target / "provenance.json").is_file()
    provenance = (target / "provenance.json").read_text()
    assert finalized_copy(smoke, home) == target and (target / "provenance.json").read_text() == provenance
    shutil.rmtree(target)
    target.mkdir()
    (target / "manifest.json").write_text("{")  # debris: an interrupted copy of an older version
    assert finalized_copy(smoke, home) == target
    assert load_pack(target).name == "smoke" and entries(home / "packs") == [target.name]
