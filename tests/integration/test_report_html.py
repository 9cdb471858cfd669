"""`membench run` writes report.json with comparisons and resources, report.md and report.html."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.integration


def test_run_writes_comparisons_and_html(smoke_run_set):
    """The reports `membench run` wrote for the session's shared smoke run set (B0, B5 × seeds 1, 2)."""
    home = smoke_run_set.home
    out = home / "runs" / smoke_run_set.run_set
    report = json.loads((out / "report.json").read_text())
    family = report["comparisons"]
    assert family["baseline"] == "B0" and family["family_size"] == 1
    (b5,) = family["comparisons"]
    assert (b5["a"], b5["b"], b5["D"], b5["discordant_a"], b5["discordant_b"]) == ("B5", "B0", 6, 6, 0)
    assert b5["units"] == 3 and b5["paired_cells"] == 6 and b5["p_holm"] == b5["p_clustered"]
    resources = report["resources"]["conditions"]
    assert resources["B5"]["successes"] == 6 and resources["B0"]["cost_per_success"]["value"] is None
    assert resources["B5"]["mean"]["total_tokens"] > 0

    md = (out / "report.md").read_text()
    assert "## Comparisons vs B0" in md and "| B5 | B0 | 6 | 6 | 0 |" in md

    html = (out / "report.html").read_text()
    assert '<svg id="ladder-plot"' in html and '<svg id="frontier-plot"' in html
    assert "scripted reference agent" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert str(home) not in html
