"""hygiene-v1 end to end: a run of B0 and four memory conditions that separates the conditions,
secrets that never leave their trap, and memory that never crosses namespaces; every validity gate
has a verdict and every hygiene rate a non-zero denominator. That every trap is admitted
live is tests/integration/test_hygiene_admission.py (a module of its own, so the two long runs go to
different test workers).

This test runs one trap per construct on two seeds (10 traps × 5 conditions × 2 seeds, 100 units)
to stay lean: two seeds are what the paired-coverage gate needs (a trap counts with ≥ 2 paired
seeds); the full pack is `membench run hygiene-v1 --conditions … --seeds 1,2,3`. It is also the
user path `membench run <pack dir>` under `scripted:memory-literal` with memory conditions: it exits 0
and `membench report` rebuilds its three reports byte for byte (test_user_paths runs the other
agents and grids)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from membench.packs.finalize import finalize_pack
from membench.formats.pack_format import pack_digest
from tests.packs.hygiene_helpers import FIXTURES, subset_pack

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]

SUBSET = ["c1-http-partner-key", "c2-http-webhook-signing", "c3-taskq-backoff-profile", "c4-taskq-failure-tag",
          "c5-taskq-log-prefix", "c6-taskq-queue-depth", "c7-tab-export-filename", "c8-tab-dialects",
          "c9-http-upload-header", "c10-taskq-settlement-marker"]
# B1 (raw episodic) left this grid: it runs end to end under memory-literal in
# test_user_paths' memory grid (smoke) and under refsol there on hygiene traps; B2, B4, B5 and the
# curated file run end to end only here
CONDITIONS = ["B0", "B2", "B4", "B5", "curated_file"]
SEEDS = (1, 2)


def _scrub(payload: str) -> str:
    """The payload's text without hashes, digests, ids and measured times: a 4-digit `int` secret
    occurs by chance inside hex digests and as a wall-clock figure (an oracle's `duration_ms` of
    2499 failed CI once), neither of which carries a secret."""
    def walk(value):
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()
                    if not re.search(r"sha256|hash|digest|(^|_)ids?$|_ms$", k)}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value
    return json.dumps(walk(json.loads(payload)))


def _occurs(secret: str, text: str) -> bool:
    """Whether a secret value occurs in the text. A short all-digit secret (a 4-digit `int`)
    must stand as a number of its own: inside a longer number (a p-value 0.0703125, a duration)
    it occurs by chance and carries nothing."""
    if secret.isdigit() and len(secret) < 8:
        return re.search(rf"(?<![0-9.]){secret}(?![0-9])", text) is not None
    return secret in text


def test_memory_conditions_run_separates_conditions_and_contains_secrets(cli, home: Path, tmp_path: Path) -> None:
    skeleton = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "hygiene-sub", SUBSET, name="hygiene-sub")
    values: dict[str, dict[str, str]] = {}
    finalized = home / "packs" / f"{skeleton.name}-{pack_digest(skeleton)[:12]}"
    finalize_pack(skeleton, finalized, reveal=values)  # the run reuses this finalization
    proc = cli("run", str(skeleton), "--conditions", ",".join(CONDITIONS), "--seeds", ",".join(map(str, SEEDS)),
               "--agent", "scripted:memory-literal", "--run-set", "hyg", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = home / "runs" / "hyg"
    report = json.loads((run_dir / "report.json").read_text())
    rates = {c["condition"]: c["pass_rate"] for c in report["conditions"]}
    assert set(rates) == set(CONDITIONS) and all(c["excluded"] == 0 for c in report["conditions"])
    assert rates["B0"] <= 0.25 and rates["B0"] == min(rates.values())
    assert len({round(rates[c], 3) for c in CONDITIONS if c != "B0"}) >= 3  # not every memory condition equal
    assert report["ladder"][-1]["pass_rate"] == rates["B0"] and report["ladder"][0]["pass_rate"] > rates["B0"]
    assert set(report["strata"]["constructs"]) == {f"C{i}" for i in range(1, 11)}
    manifest = json.loads((skeleton / "manifest.json").read_text())
    assert report["strata"]["clean_start"]["traps"] == sum(s["clean_start_s3"] for s in manifest["sequences"]) >= 3
    gates = report["validity_gates"]
    assert gates["b0_headroom"]["overall"]["passed"]
    # The reversed traps (B0 passes them, as validate requires) are gated apart,
    # not failed as headroom; with them every gate has a verdict and the study is valid
    assert gates["b0_headroom"]["failing_constructs"] == [] and set(gates["b0_headroom"]["by_construct"]) == {
        f"C{i}" for i in range(1, 9)}
    assert {k: (g["numerator"], g["denominator"], g["passed"]) for k, g in gates["b0_headroom"]["reversed"].items()} \
        == {"C9": (len(SEEDS), len(SEEDS), True), "C10": (len(SEEDS), len(SEEDS), True)}
    assert all(g["passed"] for g in gates["paired_coverage"].values())
    assert all(entry["by_construct"]["C9"]["cells"] == len(SEEDS) for entry in report["conditions"])
    assert set(gates["stratum_validity"]) == {f"C{i}" for i in range(1, 11)}
    assert gates["stratum_validity"]["C9"]["reversed"] and gates["stratum_validity"]["C9"]["b0_rate"]["passed"]
    assert gates["warmup"]["denominator"] == len(SUBSET) * len(SEEDS) * 2 and gates["warmup"]["passed"]  # S1, S2 of B0
    audit = gates["continuation_audit"]
    units = len(CONDITIONS) * len(SEEDS) * len(SUBSET)
    assert (audit["numerator"], audit["denominator"], audit["findings"]) == (units, units, [])
    assert audit["continuation_cells"] == len(CONDITIONS) * len(SEEDS) * (
        len(SUBSET) - report["strata"]["clean_start"]["traps"])
    expected = {"b0_headroom", "warmup", "continuation_audit"} | {f"exclusions {c}" for c in CONDITIONS} | {
        f"paired_coverage {c} vs B0" for c in CONDITIONS if c != "B0"} | {
        f"exclusion_balance {c} vs B0" for c in CONDITIONS if c != "B0"} | {
        f"stratum_validity C{i}" for i in range(1, 11)}
    assert set(gates["verdicts"]) == expected
    assert gates["passed"] is True and all(gates["verdicts"].values()), gates["verdicts"]
    # Every hygiene rate is observed (a non-zero denominator) on the built-in pack
    panel = report["hygiene_panel"]
    assert not [m for m, r in panel.items() if r["denominator"] == 0], panel
    assert {"stale_use", "stale_activation", "overscope", "contradiction_repair", "repeated_error",
            "human_feedback_use", "harmful_retrieval", "useful_memory_precision", "scope_accuracy",
            "memory_bloat", "commission_trip", "omission_trip"} <= set(panel)
    assert panel["overscope"]["conditions"]["B5"]["denominator"] > 0  # B5 memories carry their event's scope
    md = (run_dir / "report.md").read_text()
    written = {name: (run_dir / name).read_bytes() for name in ("report.json", "report.md", "report.html")}
    rebuilt = cli("report", "hyg", "--pack", str(skeleton))
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    for name, content in written.items():
        assert content and (run_dir / name).read_bytes() == content, f"membench report changed {name}"
    assert "## Hygiene rates" in md and "continuation audit" in md and "B0 passes reversed C9" in md

    every = {v: seq for seq, secrets in values.items() for v in secrets.values()}
    for name in ("report.json", "report.md"):
        text = (run_dir / name).read_text()
        text = _scrub(text) if name.endswith(".json") else re.sub(r"[0-9a-f]{16,}", "", text)
        assert not [v for v in every if _occurs(v, text)], name

    from membench.pipeline.settings import load_settings
    from membench.warehouse.client import connect

    warehouse = connect(load_settings().warehouse)
    try:
        rows = warehouse.query_dicts(
            "SELECT run_id, unit_id, seq, kind, visibility, payload FROM trajectory_events "
            "WHERE run_set = 'hyg' ORDER BY run_id, seq LIMIT 1 BY event_id")
    finally:
        warehouse.close()
    assert rows
    delivered: dict[str, str] = {}
    for row in rows:
        trap, condition = row["unit_id"].split("/")[1:3]
        text = _scrub(row["payload"])
        found = {v for v in every if _occurs(v, text)}
        leaked = {v for v in found if every[v] != trap}
        assert not leaked, (row["unit_id"], row["kind"], leaked)  # no secret outside its own trap
        if row["kind"] == "Turn" and row["visibility"] == "agent":
            delivered[row["run_id"]] = delivered.get(row["run_id"], "") + text
        if row["kind"] == "MemoryRead" and condition != "curated_file":
            # a memory shows only what this run itself delivered earlier: nothing from another
            # condition's, seed's or trap's namespace, nothing from later sessions
            context = json.loads(row["payload"])["context"]["text"]
            for value in found:
                assert value in delivered.get(row["run_id"], ""), (row["unit_id"], value)
            assert not re.search(r"\{\{SECRET", context)
