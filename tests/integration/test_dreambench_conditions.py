"""B3, B6, B7 and the DF family end to end: the real CLI runs hygiene-v1 traps under every new
condition and B0 (embedded bus, bubblewrap, chDB); every unit completes, the report lists every
condition, and the log shows what each system wrote (B6 at most three items a session, B7 one
tracker, provenance the processors resolve to the pack's events).

One trap of two constructs (C1, and the reversed C9) and one seed (26 units) keep it lean: every
assertion is per condition, not per construct (five constructs and 65 units at first;
three and 39 units until stop 36);
the full pack under the same conditions is `membench run hygiene-v1 --conditions … --seeds 1`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.packs.hygiene_helpers import FIXTURES, subset_pack

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("bwrap_sandbox")]

TRAPS = ["c1-http-partner-key", "c9-http-upload-header"]
NEW = ["B3", "B6", "B7", "DF", "DF-raw-only", "DF-hybrid", "DF-strict", "DF-strict-hybrid", "A0", "A2", "A5", "A6"]
CONDITIONS = ["B0", *NEW]


def _sql(cli, query: str) -> list[list[str]]:
    proc = cli("sql", query)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line.split("\t") for line in proc.stdout.splitlines() if line]


def test_new_conditions_run_through_the_cli(cli, home: Path, tmp_path: Path) -> None:
    pack = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "hygiene-v1", TRAPS, name="hygiene-v1")
    proc = cli("run", str(pack), "--conditions", ",".join(CONDITIONS), "--seeds", "1",
               "--agent", "scripted:memory-literal", "--run-set", "dbc", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_dir = home / "runs" / "dbc"
    report = json.loads((run_dir / "report.json").read_text())
    by_condition = {c["condition"]: c for c in report["conditions"]}
    assert set(by_condition) == set(CONDITIONS)
    for condition, entry in by_condition.items():
        assert entry["cells"] == len(TRAPS) and entry["excluded"] == 0, (condition, entry)
    markdown = (run_dir / "report.md").read_text()
    assert all(f"\n| {c} | {len(TRAPS)} |" in markdown for c in CONDITIONS)  # a row in the conditions table

    status = _sql(cli, "SELECT condition, status, count() FROM run_results WHERE run_set = 'dbc' "
                       "GROUP BY condition, status ORDER BY condition")
    assert {(c, s, int(n)) for c, s, n in status} == {(c, "completed", len(TRAPS)) for c in CONDITIONS}

    writes = _sql(cli, "SELECT r.condition, e.run_id, e.session_index, JSONExtractString(e.payload, 'memory_id'), "
                       "length(JSONExtractArrayRaw(e.payload, 'provenance_event_ids')), "
                       "length(JSONExtractArrayRaw(e.payload, 'scope')) "
                       "FROM trajectory_events AS e INNER JOIN (SELECT DISTINCT run_id, condition FROM run_results "
                       "WHERE run_set = 'dbc') AS r ON e.run_id = r.run_id "
                       "WHERE e.run_set = 'dbc' AND e.kind = 'MemoryWrite'")
    written = {c for c, *_ in writes}
    assert written == set(NEW)  # B0 writes nothing; every new system writes
    assert all(int(prov) > 0 for *_, prov, _ in writes)  # provenance on every memory
    assert all(int(scope) > 0 for *_, scope in writes)  # and scope: declared, or files the text names
    per_session: dict[tuple[str, str], int] = {}
    for c, run, session, memory_id, _, _ in writes:
        if c == "B6":
            per_session[(run, session)] = per_session.get((run, session), 0) + 1
        if c == "B7":
            assert memory_id == "B7:tracker"
    assert per_session and max(per_session.values()) <= 3

    # the contract processor resolves DF's provenance to the pack's events: relevant memories found
    relevant = _sql(cli, "SELECT condition, countIf(length(relevant_memory_ids) > 0) FROM memory_contracts "
                         "WHERE run_set = 'dbc' AND scored GROUP BY condition")
    counts = {c: int(n) for c, n in relevant}
    assert counts["DF-hybrid"] > 0 and counts["B3"] > 0 and counts["B0"] == 0
