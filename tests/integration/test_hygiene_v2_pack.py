"""hygiene-v2 live: a small subset of its new traps admitted by `membench validate`, for
real in the sandbox. The whole pack (62 traps) is validated by hand and its funnel recorded in
docs/benchmarks.md; CI checks the generator's output byte for byte (tests/tools/
test_author_hygiene_v2.py) and these three, one per new repository shape: a generator-vs-artefact
trap on the CLI tool, an authority-order trap on the configuration system, and a reversed
(disconfirmed-lesson) trap on the plugin registry, whose admission also needs B5 to fail it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.packs.hygiene_helpers import FIXTURES, subset_pack

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]

SUBSET = ["c8-note-commands", "c6-cfg-max-layers", "c9-plug-load-guard"]


def test_validate_admits_a_subset_of_the_new_traps_live(cli, tmp_path: Path) -> None:
    pack = subset_pack(FIXTURES / "hygiene-v2", tmp_path / "hygiene-v2-sub", SUBSET, name="hygiene-v2-sub")
    proc = cli("validate", str(pack), "--json", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["authored"] == report["valid"] == report["admitted"] == len(SUBSET)
    gates = {t["seq_id"]: t["gates"] for t in report["traps"]}
    assert gates["c9-plug-load-guard"]["verbatim_trap"]["passed"]  # reversed: B5's verbatim memory fails it
    assert all(g["b0_headroom"]["passed"] and g["reference_passes"]["passed"] for g in gates.values())
