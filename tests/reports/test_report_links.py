"""report.html's failure counts and exclusion-gate examples link to their units in the viewer: the
units table filtered to the condition and reason (app.js reads its filters from the hash), or the
example's unit; names and agent-written text stay escaped."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import parse_qs, unquote, urljoin

import pytest

from tests.reports.test_html import make_report, render_html, typed

REPORT_AT = "http://127.0.0.1:8000/runs/rs-%3C1%3E/report.html"  # where `membench view` serves it
AGENT_WORDS = 'HTTP 401 <img src=x onerror="alert(1)"> & more'


class Links(HTMLParser):
    """(href, class, text) of every <a> inside the element with id SECTION."""

    def __init__(self, section: str) -> None:
        super().__init__()
        self.section, self.depth, self.links, self.open = section, 0, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if self.depth or attrs.get("id") == self.section:
            self.depth += 1
        if self.depth and tag == "a":
            self.open = [attrs.get("href"), attrs.get("class"), ""]

    def handle_endtag(self, tag):
        if self.depth and tag == "a" and self.open:
            self.links.append(tuple(self.open))
            self.open = None
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.open:
            self.open[2] += data


def links(html: str, section: str) -> list[tuple[str, str, str]]:
    parser = Links(section)
    parser.feed(html)
    return parser.links


def units_filter(href: str) -> tuple[str, dict[str, str]]:
    """The viewer route and filters an href opens, as app.js's route() and hashParams() read them."""
    resolved = urljoin(REPORT_AT, href)
    assert resolved.startswith("http://127.0.0.1:8000/index.html#/"), resolved
    fragment = resolved.split("#/", 1)[1]
    path, _, query = fragment.partition("?")
    return "/".join(unquote(p) for p in path.split("/")), {k: v[0] for k, v in parse_qs(query).items()}


def gated_report() -> dict:
    report = make_report()
    report["validity_gates"]["exclusions"] = {"B5": {
        "name": "exclusions", "value": 0.25, "threshold": 0.05, "direction": "max", "passed": False,
        "numerator": 2, "denominator": 8, "reasons": {"model_misconfigured": 2},
        "examples": {"model_misconfigured": AGENT_WORDS},
        "example_units": {"model_misconfigured": "smoke/t<1>/B5/2"}}}
    report["validity_gates"]["exclusion_balance"] = {}
    for c in report["conditions"]:
        c["excluded"] = 2 if c["condition"] == "B5" else 0
    return report


def test_every_failure_count_links_to_the_units_table_filtered_to_its_condition_and_reason():
    html = render_html(gated_report())
    found = links(html, "failures")
    expected = {(c["condition"], reason) for c in gated_report()["conditions"]
                for key in ("failure_counts", "memory_failure_counts") for reason, n in c[key].items() if n}
    opened = set()
    for href, cls, text in found:
        assert cls == "units"
        route, params = units_filter(href.replace("&amp;", "&"))
        assert route == "rs/rs-<1>" and set(params) == {"condition", "reason"}
        opened.add((params["condition"], params["reason"]))
        c = next(c for c in gated_report()["conditions"] if c["condition"] == params["condition"])
        assert text == str({**c["failure_counts"], **c["memory_failure_counts"]}[params["reason"]])
    assert opened == expected
    # the names the pack and the agent choose reach the page percent-encoded inside an escaped attribute
    assert ("<b>evil&co</b>", "<script>x</script>") in opened
    assert "<script>x" not in html and "<b>evil" not in html


def test_a_gate_example_links_to_its_unit_and_its_counts_to_the_filtered_table():
    html = render_html(gated_report())
    gate_links = links(html, "gates")
    example = [(href, text) for href, cls, text in gate_links if cls == "example"]
    assert len(example) == 1
    assert units_filter(example[0][0]) == ("unit/rs-<1>/smoke/t<1>/B5/2", {})
    assert example[0][1] == AGENT_WORDS  # the agent's words, as text
    count = [href for href, cls, _ in gate_links if cls == "units"]
    assert [units_filter(h.replace("&amp;", "&")) for h in count] == [
        ("rs/rs-<1>", {"condition": "B5", "reason": "model_misconfigured"})]
    # the exclusions-by-reason table's counts lead to the same filter
    assert [units_filter(h) for h, cls, _ in links(html, "exclusions") if cls == "units"] == [
        ("rs/rs-<1>", {"condition": "B5", "reason": "model_misconfigured"})]


def test_without_example_units_a_gate_example_links_to_its_reason():
    """A report.json written before `example_units`: the example leads to the filtered table."""
    report = gated_report()
    del report["validity_gates"]["exclusions"]["B5"]["example_units"]
    example = [href for href, cls, _ in links(render_html(report), "gates") if cls == "example"]
    assert [units_filter(h) for h in example] == [("rs/rs-<1>", {"condition": "B5", "reason": "model_misconfigured"})]


def test_agent_text_in_a_gate_example_stays_inert(monkeypatch):
    """The example is the run's own words (a model's error message): escaped into the page. Control:
    with escaping bypassed the same words would open an element."""
    html = render_html(gated_report())
    assert "<img" not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    import membench.reports.html.table_markup as markup

    monkeypatch.setattr(markup, "esc", lambda value: str(value))
    assert "<img src=x" in render_html(gated_report())


@pytest.mark.parametrize("count", [0, "0"])
def test_a_zero_count_is_not_a_link(count):
    from membench.reports.html.table_markup import reason_count

    assert reason_count(typed(make_report(run_set="rs")), "B0", "test_failure", count) == "0"
