"""`membench validate`: live admission gates, the funnel, and refusals counted in it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from membench.sandbox.bwrap import BwrapSandbox
from tests.packs.hygiene_helpers import FIXTURES, edit_manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def broken_pack(tmp_path: Path) -> Path:
    """smoke plus a copy of smoke-currency; three of the four traps carry one defect each."""
    root = tmp_path / "broken"
    shutil.copytree(FIXTURES / "smoke", root)
    src = root / "hidden" / "smoke-currency"
    dst = root / "hidden" / "smoke-currency-bad-ref"
    shutil.copytree(src, dst)
    for path in dst.iterdir():
        path.write_text(path.read_text().replace("{{SECRET:currency:word}}", "{{SECRET:currency2:word}}"))
    solution = json.loads((dst / "s1.solution.json").read_text())
    solution["files"]["ledger/money.py"] = "def parse_amount(text):\n    return 0\n"  # a failing reference solution
    (dst / "s1.solution.json").write_text(json.dumps(solution))
    (root / "hidden" / "smoke-client-header" / "s3_build_request.py").unlink()  # a missing oracle

    def edit(m):
        copy = json.loads(json.dumps(m["sequences"][1]).replace("smoke-currency", "smoke-currency-bad-ref")
                          .replace("{{SECRET:currency:word}}", "{{SECRET:currency2:word}}"))
        m["sequences"].append(copy)
        event = m["sequences"][2]["events"][0]
        event["content"] = event["content"].replace("{{SECRET:tenant:hex8}}", "{{SECRET:tenant}}")  # a leftover
    edit_manifest(root, edit)
    return root


@pytest.mark.usefixtures("bwrap_sandbox")
def test_refused_traps_are_counted_with_clear_errors(cli, broken_pack: Path) -> None:
    proc = cli("validate", str(broken_pack), "--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert {k: report[k] for k in ("authored", "admitted")} == {"authored": 4, "admitted": 1}
    assert report["by_construct"] == {"C1": {"authored": 4, "valid": 2, "admitted": 1}}
    failures = {t["seq_id"]: t["first_failure"] for t in report["traps"]}
    assert failures["smoke-currency"] is None
    assert failures["smoke-audit-prefix"].startswith("secrets:") and "{{SECRET:tenant}}" in failures["smoke-audit-prefix"]
    assert failures["smoke-client-header"].startswith("hidden_material:") and "missing oracle" in failures["smoke-client-header"]
    assert failures["smoke-currency-bad-ref"].startswith("reference_passes:") and "S1: fail" in failures["smoke-currency-bad-ref"]
    markdown = cli("validate", str(broken_pack))
    assert markdown.returncode == 1
    assert "Total: 4 authored -> 2 valid -> 1 admitted" in markdown.stdout
    assert "smoke-client-header" in markdown.stdout and "missing oracle" in markdown.stdout


@pytest.mark.usefixtures("bwrap_sandbox")
def test_the_funnel_is_found_by_the_reports_of_the_pack_the_user_runs(cli, cli_inproc, home: Path, broken_pack: Path,
                                                                     tmp_path: Path) -> None:
    """A trap with broken placeholders makes `run` refuse the pack and validation check a temporary
    copy: before the fix the funnel was recorded under that copy's digest, which no run carries, so
    every report said not_validated. Now nothing is recorded under it, and --admitted writes the pack
    of the admitted traps, records the funnel under the digest its runs carry, and its report shows it."""
    refused = cli("validate", str(broken_pack), "--json")
    assert refused.returncode == 1 and "--admitted DIR writes the pack of its admitted traps" in refused.stderr
    assert not (home / "validations").exists() or not any((home / "validations").iterdir())
    assert cli_inproc("run", str(broken_pack), "--conditions", "B0", "--seeds", "1").returncode == 2  # run refuses it

    admitted = tmp_path / "admitted"
    proc = cli("validate", str(broken_pack), "--admitted", str(admitted), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    digest = data["admitted_pack"]["pack_digest"]
    assert [s["seq_id"] for s in json.loads((admitted / "manifest.json").read_text())["sequences"]] == ["smoke-currency"]
    assert sorted(p.name for p in (admitted / "hidden").iterdir()) == ["smoke-currency"]
    assert json.loads((home / "validations" / f"{digest}.json").read_text())["admitted"] == 1
    cli("run", str(admitted), "--conditions", "B0,B5", "--seeds", "1", "--run-set", "adm", check=True)
    report = json.loads((home / "runs" / "adm" / "report.json").read_text())
    assert report["inputs"]["pack_digest"] == digest
    assert report["admission"] == {"status": "validated", "source": f"validations/{digest}.json", "authored": 4,
                                   "valid": 2, "admitted": 1}
    again = cli("validate", str(broken_pack), "--admitted", str(admitted))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_malformed_manifest_refuses_the_whole_pack(cli_inproc, tmp_path: Path) -> None:
    root = tmp_path / "bad"
    shutil.copytree(FIXTURES / "smoke", root)
    edit_manifest(root, lambda m: m["sequences"][0].__setitem__("construct", "C11"))
    proc = cli_inproc("validate", str(root))
    assert proc.returncode == 2
    assert "sequence smoke-client-header" in proc.stderr and "'construct'" in proc.stderr


def test_packs_without_injected_secrets_are_refused(tmp_path: Path, home: Path) -> None:
    from membench.packs.finalize import finalize_pack
    from membench.packs.validate import static_gates
    from membench.sandbox.workspace import snapshot
    from membench.formats.pack_format import load_pack

    finalize_pack(FIXTURES / "smoke", tmp_path / "final")
    (tmp_path / "final" / "provenance.json").unlink()  # hand-written literals: nothing proves injection
    pack = load_pack(tmp_path / "final")
    verdict = static_gates(pack, pack.sequences[0], None, snapshot(pack.repos["ledger"]))
    assert not verdict.gates["secrets"]["passed"] and "no CSPRNG secret" in verdict.gates["secrets"]["detail"]


@pytest.mark.usefixtures("bwrap_sandbox")
def test_skill_bank_digest_recorded_in_run_started(tmp_path: Path, home: Path) -> None:
    from membench.memory_systems.skill_bank import verify_bank
    from membench.packs.pack_resolver import open_pack
    from membench.runner.grid import RunConfig, RunUnit, run_unit
    from tests.packs.hygiene_helpers import subset_pack

    skeleton = subset_pack(FIXTURES / "hygiene-v1", tmp_path / "one", ["c8-taskq-states"], name="one")
    pack = open_pack(str(skeleton), home)
    events = []
    run_unit(pack, RunUnit("one", "c8-taskq-states", "skill_bank", 1), RunConfig("rs", "scripted:memory-literal"),
             BwrapSandbox(), lambda e, d: events.append(e))
    started = next(e for e in events if e.kind == "RunStarted")
    assert started.payload["skill_bank_digest"] == verify_bank(pack.skill_bank)[0]
    reads = [e for e in events if e.kind == "MemoryRead"]
    assert reads and all(i.startswith("skill:") for r in reads for i in r.payload["admitted_ids"])
    assert all(r.payload["tokens_admitted"] <= r.payload["token_budget"] for r in reads)
    assert next(e for e in events if e.kind == "RunEnded").payload["status"] == "completed"
    # a tampered bank fails closed: the run ends as an error before any session
    (pack.skill_bank / "csv-export-conventions" / "SKILL.md").write_text("tampered\n")
    events.clear()
    run_unit(pack, RunUnit("one", "c8-taskq-states", "skill_bank", 2), RunConfig("rs", "scripted:memory-literal"),
             BwrapSandbox(), lambda e, d: events.append(e))
    ended = next(e for e in events if e.kind == "RunEnded").payload
    assert ended == {"status": "error", "error_type": "memory_setup:SkillBankError"}
    assert not [e for e in events if e.kind == "SessionStarted"]
