"""`membench bench viewer` on a tiny synthetic run set: every unit is read, the search finds the
failing runs' literal, and a poll that names the answer's ETag comes back empty."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from membench.bench.viewer_api import bench_viewer, format_lines
from membench.commands.bench import bench
from tests.conftest import skip_or_fail

CHROMIUM = "/usr/bin/chromium"


def test_the_figures_cover_every_unit_and_a_repeated_poll_is_not_modified():
    result = bench_viewer(units=30, repeats=1)
    assert result["units"] == 30 and result["events"] > 30 * 20
    assert result["first_answer"]["bytes"] == result["poll"]["bytes"] > 30 * 500
    assert result["poll"]["etag"] and result["poll_not_modified"] == {
        "status": 304, "seconds": result["poll_not_modified"]["seconds"], "bytes": 0}
    assert result["search"]["units_hit"] == 10  # every third unit fails, and only its agent turn says it
    assert result["unit"]["bytes"] > 1000 and result["page"] is None
    assert len(format_lines(result)) == 6


def test_the_command_prints_json_with_the_machine_and_refuses_no_units():
    runner = CliRunner()
    out = runner.invoke(bench, ["viewer", "--units", "12", "--repeats", "1", "--json"])
    assert out.exit_code == 0, out.output
    figures = json.loads(out.stdout)
    assert figures["units"] == 12 and figures["machine"]["nproc"] >= 1
    refused = runner.invoke(bench, ["viewer", "--units", "0"])
    assert refused.exit_code == 2 and "--units" in refused.output
    no_browser = runner.invoke(bench, ["viewer", "--units", "2", "--browser", "/nonexistent/chromium"])
    assert no_browser.exit_code == 2 and "no Chromium at /nonexistent/chromium" in no_browser.output


@pytest.mark.integration
def test_the_page_figures_in_a_real_chromium():
    """With --browser every step of the page is timed: each wait ends on what the page shows."""
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    page = bench_viewer(units=20, repeats=1, chromium=CHROMIUM)["page"]
    assert set(page) == {"first_render", "filter", "sort", "sort_again", "search_in_page", "search_trajectories"}
    assert all(0 < seconds < 60 for seconds in page.values())
