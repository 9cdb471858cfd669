"""A plug-in's admission is pinned to its code, end to end through the CLI: a real installed
distribution (tests/memory_systems/vendor_distribution.py) passes `membench memory check`,
`run` measures it (it carries the smoke pack's secrets: 3/3, B0 0/3) and the log verifies; its module
is then edited so that `read` returns nothing, and `run` exits 2 before any unit naming the module
and both digests — without the pin, it was admitted and measured 0/3 (the unit-level control in
tests/memory_systems/test_admission.py shows the old lookup admitting it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.memory_systems.vendor_distribution import break_read, write_vendor_distribution

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]


def test_a_checked_plugin_runs_and_once_edited_is_refused_before_any_unit(cli, home: Path, tmp_path: Path) -> None:
    store = write_vendor_distribution(tmp_path / "site")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    checked = cli("memory", "check", "vendor", env=env, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]

    args = ("--conditions", "B0,vendor", "--seeds", "1", "--agent", "scripted:memory-literal")
    admitted = cli("run", "smoke", *args, "--run-set", "pinned", env=env)
    assert admitted.returncode == 0, admitted.stderr[-3000:]
    report = json.loads((home / "runs" / "pinned" / "report.json").read_text())
    assert {c["condition"]: c["passed"] for c in report["conditions"]} == {"B0": 0, "vendor": 3}
    verified = cli("replay", str(home / "runs" / "pinned" / "events.avro"), "--verify", env=env)
    assert verified.returncode == 0, verified.stderr[-2000:]

    break_read(store)
    refused = cli("run", "smoke", *args, "--run-set", "edited", env=env)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "plug-in vendor: module vendor_mem/store.py changed (sha256 " in refused.stderr
    assert "re-run `membench memory check vendor`" in refused.stderr
    assert not (home / "runs" / "edited").exists()  # before any unit: nothing of it written
