"""A trap `membench validate` refused is measured by `run` only with --include-refused, and the
report then says so above every number; the admission funnel stands beside the ladder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.packs.hygiene_helpers import FIXTURES, edit_manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def leaky_pack(tmp_path: Path) -> Path:
    """smoke, with smoke-currency's S3 instruction naming its decisive literal (a public leak)."""
    root = tmp_path / "leaky"
    shutil.copytree(FIXTURES / "smoke", root)

    def edit(m):
        seq = next(s for s in m["sequences"] if s["seq_id"] == "smoke-currency")
        seq["sessions"][2]["instruction"] += " The currency is {{SECRET:currency:word}}."
    edit_manifest(root, edit)
    return root


@pytest.mark.usefixtures("bwrap_sandbox")
def test_a_refused_trap_is_measured_only_when_asked_and_the_report_says_so(cli, home: Path, leaky_pack: Path):
    validated = cli("validate", str(leaky_pack), "--json")
    assert validated.returncode == 1, validated.stderr
    failures = {t["seq_id"]: t["first_failure"] for t in json.loads(validated.stdout)["traps"]}
    assert failures["smoke-currency"].startswith("no_public_leak:")
    assert [s for s, f in failures.items() if f] == ["smoke-currency"]
    assert "progress: 3/3 traps (100%) · refused 1 · " in validated.stderr  # a redirected validate reports counts

    refused = cli("run", str(leaky_pack), "--conditions", "B0,B5", "--seeds", "1", "--run-set", "leaky")
    assert refused.returncode == 2
    assert "smoke-currency (no_public_leak:" in refused.stderr
    assert f"membench validate {leaky_pack} --admitted DIR" in refused.stderr and "--include-refused" in refused.stderr
    assert not (home / "runs" / "leaky").exists()  # nothing ran, nothing written

    ran = cli("run", str(leaky_pack), "--conditions", "B0,B5", "--seeds", "1", "--run-set", "leaky",
              "--include-refused", check=True)
    assert "--include-refused: measuring 1 trap(s)" in ran.stderr
    out = home / "runs" / "leaky"
    report = json.loads((out / "report.json").read_text())
    assert report["admission"]["admitted"] == 2 and report["admission"]["authored"] == 3
    assert [t["seq_id"] for t in report["admission"]["refused_measured"]] == ["smoke-currency"]
    markdown = (out / "report.md").read_text()
    head = markdown.split("| condition |")[0]  # above the first number
    assert "**Refused traps measured**: this run set measures 1 trap that `membench validate` refused" in head
    assert "smoke-currency (no_public_leak:" in head
    assert "- admission funnel: 3 authored → 2 valid → 2 admitted" in head
    ladder = markdown.split("## Ladder")[1].split("##")[0]
    assert "Traps: admission funnel 3 authored → 2 valid → 2 admitted" in ladder
    html = (out / "report.html").read_text()
    assert html.index("Refused traps measured") < html.index('<section id="ladder">')
    assert "Traps: admission funnel 3 authored" in html.split('<section id="ladder">')[1].split("</section>")[0]
    cli("replay", str(out / "events.avro"), "--verify", check=True)


@pytest.mark.usefixtures("bwrap_sandbox")
def test_a_pack_whose_traps_were_all_admitted_runs_without_the_flag_or_a_notice(cli, home: Path):
    """The control: the same steps on the untouched pack admit every trap, and nothing is said."""
    pack = home.parent / "smoke"
    shutil.copytree(FIXTURES / "smoke", pack)
    assert cli("validate", str(pack)).returncode == 0
    cli("run", str(pack), "--conditions", "B0,B5", "--seeds", "1", "--run-set", "clean", check=True)
    report = json.loads((home / "runs" / "clean" / "report.json").read_text())
    assert "refused_measured" not in report["admission"]
    assert "Refused traps measured" not in (home / "runs" / "clean" / "report.md").read_text()
