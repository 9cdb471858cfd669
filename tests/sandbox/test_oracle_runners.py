"""Which oracles the fast oracle runner takes (`membench.sandbox.oracle_runners`), and how a pack author
hears about one it does not: `membench validate`'s `oracle_runner` gate. Static (no sandbox)."""

from __future__ import annotations

import pytest

from membench.packs.finalize import finalize_pack
from membench.packs.validate import static_gates
from membench.sandbox.oracle_runners import RUNNER_ENV, default_runner, refusal_of_source
from membench.sandbox.workspace import snapshot
from membench.formats.pack_format import load_pack
from tests.formats.test_authoring_guide import write_example

SUPPORTED = '''import pytest
from pytest import approx, raises
from app.tags import slug


@pytest.fixture
def words():
    yield ["a b", "c"]


@pytest.fixture(scope="module")
def prefix(tmp_path_factory=None):
    return "t-"


@pytest.mark.parametrize("text, want", [("a b", "a-b"), pytest.param("C", "c", id="upper")])
def test_slug(text, want, words, prefix, tmp_path, monkeypatch, capsys):
    assert slug(text) == want


@pytest.mark.skipif(False, reason="never")
def test_errors():
    with raises(ValueError, match="empty"):
        slug("")
    assert 0.1 + 0.2 == approx(0.3)


class TestTags:
    @pytest.mark.skip(reason="later")
    def test_later(self):
        pytest.fail("not yet")
'''

UNSUPPORTED = {
    "pytest.warns": "def test_x():\n    with pytest.warns(UserWarning):\n        pass\n",
    "pytest.mark.xfail": "@pytest.mark.xfail\ndef test_x():\n    pass\n",
    "fixture 'request'": "def test_x(request):\n    pass\n",
    "fixture 'capfd'": "def test_x(capfd):\n    pass\n",
    "a fixture with params=": "@pytest.fixture(params=[1, 2])\ndef n(request):\n    return 1\n",
    "a fixture with autouse=": "@pytest.fixture(autouse=True)\ndef n():\n    return 1\n",
    "a module-level pytestmark": "pytestmark = pytest.mark.skip\n",
    "the xunit hook setup_module()": "def setup_module():\n    pass\n",
    "the xunit hook TestA.setup_method()": "class TestA:\n    def setup_method(self):\n        pass\n",
    "the async test test_x": "async def test_x():\n    pass\n",
    "a string condition": "@pytest.mark.skipif('sys.platform == \"x\"', reason='r')\ndef test_x():\n    pass\n",
    "imports _pytest.monkeypatch": "import _pytest.monkeypatch\n",
    "uses pytest.MonkeyPatch": "from pytest import MonkeyPatch\n",
    "parametrize argnames that are not a literal":
        "NAMES = 'a'\n@pytest.mark.parametrize(NAMES, [1])\ndef test_x(a):\n    pass\n",
    "indirect=": "@pytest.mark.parametrize('a', [1], indirect=True)\ndef test_x(a):\n    pass\n",
}


def test_a_plain_pytest_oracle_with_the_offered_facilities_is_taken():
    assert refusal_of_source(SUPPORTED) == ""
    assert refusal_of_source("from app import f\n\n\ndef test_f():\n    assert f() == 1\n") == ""


@pytest.mark.parametrize("what", sorted(UNSUPPORTED))
def test_an_oracle_using_what_the_fast_runner_lacks_is_refused_with_the_reason(what):
    reason = refusal_of_source("import pytest\n\n" + UNSUPPORTED[what])
    assert what in reason and "line " in reason, reason


def test_the_runner_setting(monkeypatch):
    monkeypatch.delenv(RUNNER_ENV, raising=False)
    assert default_runner() == "fast"
    monkeypatch.setenv(RUNNER_ENV, "pytest")
    assert default_runner() == "pytest"
    monkeypatch.setenv(RUNNER_ENV, "nose")
    with pytest.raises(ValueError, match="MEMBENCH_ORACLE_RUNNER must be one of fast, pytest, not 'nose'"):
        default_runner()


def _gates(tmp_path, extra: str = ""):
    skeleton = write_example(tmp_path / "tiny")
    oracle = skeleton / "hidden" / "tiny-tag-prefix" / "s2_tag.py"
    oracle.write_text(oracle.read_text(encoding="utf-8") + extra, encoding="utf-8")
    provenance = finalize_pack(skeleton, tmp_path / "final")
    pack = load_pack(tmp_path / "final")
    seq = pack.sequence("tiny-tag-prefix")
    return static_gates(pack, seq, provenance, snapshot(pack.repos["app"])).gates


def test_validate_refuses_an_oracle_the_fast_runner_cannot_run(tmp_path):
    gates = _gates(tmp_path, "\n\nimport pytest\n\n\ndef test_warns():\n    with pytest.warns(UserWarning):\n"
                             "        pass\n")
    gate = gates["oracle_runner"]
    assert not gate["passed"]
    assert "session 2 (hidden/tiny-tag-prefix/s2_tag.py)" in gate["detail"] and "uses pytest.warns" in gate["detail"]
    assert "not offered by the fast oracle runner" in gate["detail"]
    assert all(g["passed"] for name, g in gates.items() if name != "oracle_runner")


def test_control_the_guides_own_oracle_passes_the_gate(tmp_path):
    assert _gates(tmp_path)["oracle_runner"]["passed"]
