"""`--compare A:B` through the real CLI (bubblewrap oracles, chDB, the Avro log): a pair the primary
family does not ask (B1 vs B5 beside the baseline B0) is answered in one verdict line, by `run` and
by `report`, and `report` with an option that changes the report (or `--json`) leaves the run set's
files as they were; report.html's tables fit their column in a real Chromium, on screen and printed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.integration.conftest import copy_home

pytestmark = pytest.mark.integration

RUN_SET = "cmp"


@pytest.fixture(scope="module")
def compared(tmp_path_factory, bwrap_sandbox):
    """smoke under B0, B1 and B5, one seed, asked `--compare B1:B5`: (home, what `run` printed)."""
    home = tmp_path_factory.mktemp("compare") / "home"
    proc = run_cli("run", "smoke", "--conditions", "B0,B1,B5", "--seeds", "1", "--run-set", RUN_SET,
                   "--compare", "B1:B5", home=home, check=True)
    return home, proc.stdout


def _files(home: Path) -> dict[str, tuple[str, int]]:
    """Every file of the run set's directory: its SHA-256 and modification time."""
    root = home / "runs" / RUN_SET
    return {p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_answers_the_asked_comparison_in_one_verdict_line(compared):
    home, stdout = compared
    report = json.loads((home / "runs" / RUN_SET / "report.json").read_text())
    (asked,) = report["requested"]
    assert (asked["a"], asked["b"], asked["family"], asked["status"]) == ("B1", "B5", "all_pairs", "not_publishable")
    assert asked["invalidated_by"] == ["paired coverage needs ≥ 2 paired valid seeds in ≥ 3 of 3 traps (has 0); "
                                       "this run has 1 seed"]
    flat = " ".join(stdout.split())  # the terminal wraps long lines
    assert f"asked: {asked['line']}" in flat
    # one line per comparison of the primary family under the table, the rest counted
    for v in report["verdicts"]:
        if v["family"] == "primary":
            assert f"primary: {v['line']}" in flat
    assert [(v["family"], v["a"], v["b"]) for v in report["verdicts"]] == [
        ("primary", "B1", "B0"), ("primary", "B5", "B0"),
        ("all_pairs", "B1", "B0"), ("all_pairs", "B5", "B0"), ("all_pairs", "B5", "B1")]
    assert "2 more verdicts (all_pairs) in report.md" in flat
    md = (home / "runs" / RUN_SET / "report.md").read_text()
    for v in report["requested"] + report["verdicts"]:
        assert f"- {v['line']}\n" in md
    verified = run_cli("replay", str(home / "runs" / RUN_SET / "events.avro"), "--verify", home=home)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_report_answers_without_touching_the_run_sets_files(compared, tmp_path):
    home = copy_home(compared[0], tmp_path / "home")  # the control below rewrites the report
    before = _files(home)
    asked = run_cli("report", RUN_SET, "--compare", "B5:B1", home=home, check=True)
    flat = " ".join(asked.stdout.split())
    assert "asked: B5 vs B1 (all_pairs family of 3): Δ +0.0 pp" in flat and "NOT publishable" in flat
    assert "--compare changes the report: the run set's own report files are left as they are" in \
        " ".join(asked.stderr.split())
    as_json = json.loads(run_cli("report", RUN_SET, "--json", "--baseline", "B5", "--compare", "B1:B0",
                                 home=home, check=True).stdout)
    assert as_json["comparisons"]["baseline"] == "B5"
    assert [(v["a"], v["b"], v["family"]) for v in as_json["requested"]] == [("B1", "B0", "all_pairs")]
    plain_json = run_cli("report", RUN_SET, "--json", home=home, check=True)
    # stderr holds only the replay's line (the log is verified as at the run's end), no "report: …" path
    assert json.loads(plain_json.stdout)["run_set"] == RUN_SET
    assert [line for line in plain_json.stderr.splitlines() if line.strip()] == \
        [line for line in plain_json.stderr.splitlines() if line.startswith("log verified")]
    for bad, message in ((("--compare", "B7:B1"), "--compare B7:B1: condition 'B7' is not in the run set (its "
                                                  "conditions: B0, B1, B5)"),
                         (("--compare", "B1"), "--compare: expected A:B (two conditions), got 'B1'")):
        refused = run_cli("report", RUN_SET, *bad, home=home)
        assert refused.returncode == 2 and message in refused.stderr
    assert _files(home) == before  # hashes and modification times: nothing was written
    out = tmp_path / "out"
    run_cli("report", RUN_SET, "--compare", "B5:B1", "--output", str(out), home=home, check=True)
    written = json.loads((out / "report.json").read_text())
    assert [(v["a"], v["b"]) for v in written["requested"]] == [("B5", "B1")]
    assert (out / "report.md").exists() and (out / "report.html").exists()
    assert _files(home) == before
    # the control: plain `report` still rebuilds the run set's own files in place (new mtimes, and
    # without --compare no `requested` key), so the check above can fail
    run_cli("report", RUN_SET, home=home, check=True)
    after = _files(home)
    assert after["report.json"][1] != before["report.json"][1]
    assert "requested" not in json.loads((home / "runs" / RUN_SET / "report.json").read_text())
    # a run set without a report (its run's was refused: no baseline) gets its first one in place
    for name in ("report.json", "report.md", "report.html"):
        (home / "runs" / RUN_SET / name).unlink()
    run_cli("report", RUN_SET, "--baseline", "B5", home=home, check=True)
    assert json.loads((home / "runs" / RUN_SET / "report.json").read_text())["comparisons"]["baseline"] == "B5"


# ------------------------------------------------------------------------------ in a real browser

# every table's right edge against its scrolling box's and the page column's, and what a scroll box hides
OVERFLOW = """() => {
  const column = document.querySelector('main').getBoundingClientRect().right;
  const out = [];
  for (const box of document.querySelectorAll('.scroll')) {
    const table = box.querySelector('table');
    const section = box.closest('section');
    const where = (section ? section.id : '?') + ': ' + table.querySelector('th').textContent;
    if (box.scrollWidth > box.clientWidth + 1) out.push(where + ' hides ' + (box.scrollWidth - box.clientWidth) + 'px');
    if (table.getBoundingClientRect().right > column + 1) out.push(where + ' passes the column');
  }
  return out;
}"""


# a desktop window, and an A4 page's printable width at 96 dpi (210 mm less the default margins)
@pytest.mark.parametrize("media, width", [("screen", 1000), ("print", 720)])
def test_report_html_tables_fit_their_column(compared, browser, media, width):
    home, _ = compared
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto((home / "runs" / RUN_SET / "report.html").as_uri())
        page.emulate_media(media=media)
        assert page.locator("#verdicts li").count() == 6  # the asked comparison and the five of the families
        assert page.evaluate(OVERFLOW) == []
        # the control: cells that may not wrap (the page's old rule) push the wide tables past it
        page.add_style_tag(content="th, td { white-space: nowrap !important; overflow-wrap: normal !important; }")
        assert any("comparisons" in problem or "families" in problem for problem in page.evaluate(OVERFLOW))
    finally:
        page.close()
