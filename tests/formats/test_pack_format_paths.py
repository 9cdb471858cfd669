"""The pack loader confines a hostile pack: names that become path components are plain, every
field naming a file stays inside its directory, no symbolic link leaves the pack, the manifest
has a size limit, and bad bytes are one error naming the byte offset."""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from membench.formats.fields import MAX_INPUT_BYTES, is_plain_name
from membench.formats.pack_format import PackError, load_pack
from tests.packs.hygiene_helpers import FIXTURES, edit_manifest


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    dest = tmp_path / "pack"
    shutil.copytree(FIXTURES / "smoke", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def refused(root: Path) -> str:
    with pytest.raises(PackError) as info:
        load_pack(root)
    message = str(info.value)
    assert "\n" not in message
    return message


def first_seq(manifest: dict) -> dict:
    return manifest["sequences"][0]


def test_the_built_in_packs_still_load() -> None:
    assert load_pack(FIXTURES / "smoke").sequences
    assert load_pack(FIXTURES / "hygiene-v1").skill_bank is not None


@pytest.mark.parametrize("value", ["a/b", "..", "../x", ".hidden", "-x", "a..b", "", "x" * 129, "a b", "a\\b"])
def test_plain_names_refuse_path_material(value: str) -> None:
    assert not is_plain_name(value)


@pytest.mark.parametrize("value", ["smoke", "hygiene-v1", "a.b_c-1", "x" * 128, "0"])
def test_plain_names_accept_ordinary_ids(value: str) -> None:
    assert is_plain_name(value)


@pytest.mark.parametrize(("edit", "fragment"), [
    (lambda m: m.update(pack="../evil"), "field 'pack' must be a plain name"),
    (lambda m: first_seq(m).update(seq_id="../../evil"), "sequences[0]: field 'seq_id' must be a plain name"),
    (lambda m: first_seq(m)["sessions"][2].update(oracle_id="../../../tmp/x"),
     "sequence smoke-client-header: sessions[2]: field 'oracle_id' must be a plain name"),
    (lambda m: m["repos"].update(ledger="/etc"), "field 'repos.ledger' names '/etc', which is absolute"),
    (lambda m: m["repos"].update(ledger="../.."), "field 'repos.ledger' names '../..', which leaves its directory"),
    (lambda m: first_seq(m)["sessions"][0].update(visible_files=["../../manifest.json"]),
     "sequence smoke-client-header: sessions[0]: field 'visible_files' names '../../manifest.json', which leaves"),
    (lambda m: first_seq(m)["sessions"][1].update(visible_files=["/etc/passwd"]),
     "sequence smoke-client-header: sessions[1]: field 'visible_files' names '/etc/passwd', which is absolute"),
    (lambda m: first_seq(m)["events"][0]["scope"].update(files=["/root/.ssh/id_rsa"]),
     "sequence smoke-client-header: events[0]: field 'scope.files' names '/root/.ssh/id_rsa', which is absolute"),
    (lambda m: first_seq(m)["sessions"][2].update(scoring={"commands": [["true"]], "hidden_files": ["../../../x"]}),
     "sessions[2]: scoring: field 'hidden_files' names '../../../x', which leaves its directory"),
    (lambda m: m.update(skill_bank="../"), "field 'skill_bank' names '../', which leaves its directory"),
])
def test_fields_naming_files_stay_inside(smoke: Path, edit, fragment: str) -> None:
    edit_manifest(smoke, edit)
    message = refused(smoke)
    assert fragment in message and str(smoke / "manifest.json") in message


def test_a_symbolic_link_out_of_the_pack_is_refused(smoke: Path, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("private key\n")
    link = smoke / "hidden" / "smoke-currency" / "notes.txt"
    link.symlink_to(secret)
    message = refused(smoke)
    assert f"{link}: symbolic link to '{secret}' points outside the pack" in message


def test_a_dangling_link_out_of_the_pack_and_a_linked_directory_are_refused(smoke: Path, tmp_path: Path) -> None:
    link = smoke / "repos" / "ledger" / "ledger" / "elsewhere"
    link.symlink_to(tmp_path / "does-not-exist")
    assert "points outside the pack" in refused(smoke)
    link.unlink()
    (tmp_path / "outside").mkdir()
    (smoke / "repos" / "outside").symlink_to(tmp_path / "outside")
    assert f"{smoke / 'repos' / 'outside'}: symbolic link" in refused(smoke)


def test_a_symbolic_link_loop_is_one_error(smoke: Path) -> None:
    (smoke / "repos" / "ledger" / "a").symlink_to("b")
    (smoke / "repos" / "ledger" / "b").symlink_to("a")
    message = refused(smoke)
    assert message.startswith(f"{smoke / 'repos' / 'ledger'}/") and "cannot resolve" in message


def test_a_link_inside_the_pack_still_cannot_carry_a_path_out_of_its_repository(smoke: Path) -> None:
    # repos/ledger/docs -> ../../hidden stays in the pack, but a visible file through it is not in the repo
    (smoke / "repos" / "ledger" / "docs").symlink_to(Path("..") / ".." / "hidden")
    load_pack(smoke)  # the link alone is fine
    edit_manifest(smoke, lambda m: first_seq(m)["sessions"][0].update(visible_files=["docs/smoke-currency"]))
    message = refused(smoke)
    assert "field 'visible_files' names 'docs/smoke-currency', which resolves outside repository 'ledger'" in message


def test_a_solution_file_path_must_stay_in_the_workspace(smoke: Path) -> None:
    solution = smoke / "hidden" / "smoke-currency" / "s1.solution.json"
    data = json.loads(solution.read_text())
    data["files"]["../../outside.py"] = "x = 1\n"
    solution.write_text(json.dumps(data))
    message = refused(smoke)
    assert f"{solution}: sequence smoke-currency: field 'files' names '../../outside.py', which leaves" in message


def test_non_utf8_manifest_names_the_byte_offset_and_line(smoke: Path) -> None:
    text = (smoke / "manifest.json").read_bytes()
    offset = text.index(b"\n") + 3  # a byte on line 2
    (smoke / "manifest.json").write_bytes(text[:offset] + b"\xff" + text[offset:])
    message = refused(smoke)
    assert message == (f"{smoke / 'manifest.json'}: not UTF-8: invalid byte 0xff at byte offset {offset} "
                       f"(line 2)")


def test_non_utf8_solution_names_the_byte_offset(smoke: Path) -> None:
    solution = smoke / "hidden" / "smoke-audit-prefix" / "s2.solution.json"
    solution.write_bytes(b'{"files": {"a.py": "caf\xc3"}, "slots": {}}')
    assert refused(smoke) == f"{solution}: not UTF-8: invalid byte 0xc3 at byte offset 23 (line 1)"


def test_a_manifest_over_the_limit_is_refused_without_being_loaded(smoke: Path) -> None:
    manifest = smoke / "manifest.json"
    with manifest.open("r+b") as handle:  # sparse: four times the limit, cheap on disk
        handle.truncate(4 * MAX_INPUT_BYTES)
    tracemalloc.start()
    try:
        message = refused(smoke)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == f"{manifest}: larger than the 16 MiB input limit (refused unread)"
    assert peak < 2 * MAX_INPUT_BYTES  # at most limit + 1 bytes were read


def test_a_manifest_at_the_limit_is_read(smoke: Path) -> None:
    manifest = smoke / "manifest.json"
    text = manifest.read_bytes()
    manifest.write_bytes(text + b" " * (MAX_INPUT_BYTES - len(text)))
    assert os.path.getsize(manifest) == MAX_INPUT_BYTES
    assert load_pack(smoke).name == "smoke"
