"""The static export's writer (membench/viewer/site.py, `membench export site`) over a synthetic log (no
sandbox): the files it writes hold the live viewer's answers, agent-controlled text cannot end a
script element, and the command refuses what it must not overwrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_cli_inprocess
from tests.viewer.test_view_logs import write_log
from tests.viewer.test_view_paired import RUNS, XSS
from membench.viewer.http_server import ViewApp
from membench.viewer.site import MARKER, PAGE_CSP, STATIC_REPORT_CSP, SiteError, data_file, script_json, write_site
from membench.viewer.state import LiveRunSet

BREAKOUT = "</script><script>document.title='owned'</script>\u2028"
REPORT = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>r</title></head><body>'
          '<table id="matrix"><tr><td><a href="../../index.html#/unit/rs/suite%2Ft1%2FB5%2F1">pass</a></td></tr>'
          '</table></body></html>')


@pytest.fixture
def home(tmp_path: Path) -> Path:
    runs = [*RUNS, dict(run_set="rs", task="t2", condition="B5", seed=1, agent_text=BREAKOUT, memory_text=BREAKOUT)]
    write_log(tmp_path / "home" / "runs" / "rs" / "events.avro", runs).close()
    (tmp_path / "home" / "runs" / "rs" / "report.html").write_text(REPORT, encoding="utf-8")
    return tmp_path / "home"


def read_data(out: Path, name: str) -> object:
    """The answer a data file hands the page (the JSON after its assignment)."""
    text = (out / name).read_text(encoding="utf-8")
    prefix = f"(window.MEMBENCH_DATA = window.MEMBENCH_DATA || {{}})[{json.dumps(name)}] = "
    assert text.startswith(prefix) and text.endswith(";\n"), text[:200]
    return json.loads(text[len(prefix):-2])


def export(home: Path, out: Path) -> dict:
    return write_site(LiveRunSet("rs", home / "runs" / "rs" / "events.avro"), home / "runs" / "rs", out)


def test_the_site_holds_the_live_viewers_answers(home, tmp_path):
    out = tmp_path / "site"
    written = export(home, out)
    assert (written["units"], written["runs"], written["pairs"], written["report"]) == (5, 5, 2, True)
    app = ViewApp(home / "runs")
    site = read_data(out, "data/site.js")
    assert site["run_set"] == "rs" and site["search"] == "data/search.js"
    live = app.run_set("rs")
    exported = read_data(out, "data/run_set.js")
    assert exported["units"] == live["units"] and exported["ladder"] == live["ladder"] and exported["live"] is False
    assert read_data(out, "data/run_sets.js")["run_sets"][0]["run_set"] == "rs"
    for unit in live["units"]:
        run = read_data(out, site["runs"][site["units"][unit["unit_id"]]])
        expected = app.unit("rs", unit["unit_id"])
        assert [s["events"] for s in run["sessions"]] == [s["events"] for s in expected["sessions"]]
        assert run["unit_id"] == unit["unit_id"] and run["chain"] == expected["chain"]
    # the paired view: every two conditions in ladder order diffed as the live viewer diffs them
    pair = read_data(out, site["pairs"]["t1\u00001"])
    assert pair["available"] == ["B0", "B5", "B5-x"] and pair["patched"] == ["B0", "B5", "B5-x"]
    for a, b in (("B0", "B5"), ("B0", "B5-x")):
        (live_diff,) = app.pair("rs", "t1", "1", [a, b])["patch_diffs"]
        assert next(d for d in pair["patch_diffs"] if (d["a"], d["b"]) == (a, b)) == live_diff
    assert [(d["a"], d["b"]) for d in pair["patch_diffs"]] == [("B0", "B5"), ("B0", "B5-x"), ("B5", "B5-x")]
    b5 = read_data(out, site["runs"][pair["columns"]["B5"]["run_id"]])
    assert b5["sessions"][1]["memory_items"] == app.pair("rs", "t1", "1", ["B5"])["columns"][0]["run"]["sessions"][1]["memory_items"]
    # the search corpus holds the texts the server searches
    corpus = read_data(out, "data/search.js")["corpus"]
    assert {row[0] for row in corpus if "x-test header" in row[6].lower()} == set(app.search("rs", "x-test header")["units"])
    # the page: relative assets, the static marker, the live viewer's CSP as <meta>; the report keeps its links
    index = (out / "index.html").read_text(encoding="utf-8")
    assert 'src="static/app.js"' in index and 'name="membench-static" content="data/site.js"' in index
    assert f'content="{PAGE_CSP}"' in index and "script-src" not in PAGE_CSP and "default-src 'self'" in PAGE_CSP
    assert (out / "static" / "app.js").is_file() and (out / "static" / "style.css").is_file()
    report = (out / "runs" / "rs" / "report.html").read_text(encoding="utf-8")
    assert f'<meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="{STATIC_REPORT_CSP}">' in report
    assert 'href="../../index.html#/unit/rs/suite%2Ft1%2FB5%2F1"' in report


def test_agent_text_cannot_end_a_script_in_the_data_files(home, tmp_path):
    """Markup and a closing </script> in an agent turn and a memory item reach the data files only
    escaped: no `<` at all, and the text decodes back unchanged. Control: plain JSON carries it."""
    out = tmp_path / "site"
    export(home, out)
    texts = [p.read_text(encoding="utf-8") for p in (out / "data").rglob("*.js")]
    assert len(texts) == 11  # 5 runs, 2 pairs, run_sets, run_set, search, site
    for text in texts:
        assert "<" not in text and ">" not in text and "\u2028" not in text and text.isascii()
    corpus = read_data(out, "data/search.js")["corpus"]
    assert any(BREAKOUT in row[6] for row in corpus) and any(XSS in row[6] for row in corpus)
    assert "</script>" in json.dumps({"t": BREAKOUT})  # control: unescaped JSON would end the element
    assert json.loads(script_json(BREAKOUT)) == BREAKOUT
    assert data_file("x.js", BREAKOUT).count("<") == 0


def test_a_second_export_replaces_the_first_and_other_directories_are_refused(home, tmp_path):
    out = tmp_path / "site"
    export(home, out)
    (out / "data" / "runs" / "stale.js").write_text("old", encoding="utf-8")
    export(home, out)
    assert not (out / "data" / "runs" / "stale.js").exists() and (out / MARKER).is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(SiteError, match="not empty"):
        export(home, other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_the_command_writes_the_site_and_refuses_bad_input(home, tmp_path):
    proc = run_cli("export", "site", "rs", str(tmp_path / "site"), home=home, check=True)
    assert "5 units, 5 runs, 2 trap-seed pairs" in proc.stdout and "runs/rs/report.html" in proc.stdout
    assert (tmp_path / "site" / "index.html").is_file()
    unknown = run_cli_inprocess("export", "site", "nope", str(tmp_path / "x"), home=home)
    assert unknown.returncode == 2 and "unknown run set 'nope'" in unknown.stderr
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "f").write_text("x", encoding="utf-8")
    busy = run_cli_inprocess("export", "site", "rs", str(tmp_path / "busy"), home=home)
    assert busy.returncode == 2 and "not empty" in busy.stderr
    bad = run_cli_inprocess("export", "site", "../rs", str(tmp_path / "y"), home=home)
    assert bad.returncode == 2 and not (tmp_path / "y").exists()
