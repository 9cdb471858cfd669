"""hygiene-v1 admitted live: `membench validate hygiene-v1` runs every trap's live gates (the
reference passes every session, B0 fails the scored session where it must, the verbatim traps) in
the scoring sandbox and admits every one of its 34 traps. Kept apart from test_hygiene_pack.py so that the two longest
runs of the suite go to different test workers (`--dist loadfile`)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]


def test_validate_admits_every_hygiene_trap(cli) -> None:
    proc = cli("validate", "hygiene-v1", "--json", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["authored"] == report["admitted"] >= 30
    assert set(report["by_construct"]) == {f"C{i}" for i in range(1, 11)}
    assert all(row["admitted"] == row["authored"] >= 2 for row in report["by_construct"].values())
