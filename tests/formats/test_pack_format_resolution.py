"""The pack-level resolution policy and declared conditions: defaults, and refusals
that name the manifest and the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from membench.formats.pack_format import RESOLUTION_POLICIES, PackError, load_pack
from tests.packs.hygiene_helpers import FIXTURES, edit_manifest


@pytest.fixture
def smoke(tmp_path: Path) -> Path:
    dest = tmp_path / "pack"
    shutil.copytree(FIXTURES / "smoke", dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_a_native_pack_scores_the_patch_as_submitted_by_default(smoke):
    assert load_pack(smoke).resolution_policy == "patch_as_submitted" == RESOLUTION_POLICIES[0]


def test_a_declared_policy_is_kept(smoke):
    edit_manifest(smoke, lambda m: m.update(resolution_policy="agent_must_finish"))
    assert load_pack(smoke).resolution_policy == "agent_must_finish"


@pytest.mark.parametrize("key,value,message", [
    ("resolution_policy", "lenient", "field 'resolution_policy' must be one of patch_as_submitted, agent_must_finish"),
    ("resolution_policy", None, "field 'resolution_policy' must be one of"),
    ("conditions", "remem", "field 'conditions' must be a list of plain names"),
    ("conditions", ["no_memory", "../x"], "field 'conditions' must be a list of plain names"),
])
def test_a_bad_value_is_refused_naming_the_manifest_and_field(smoke, key, value, message):
    edit_manifest(smoke, lambda m: m.update({key: value}))
    with pytest.raises(PackError) as info:
        load_pack(smoke)
    assert "manifest.json" in str(info.value) and message in str(info.value)
