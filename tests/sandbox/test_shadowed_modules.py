"""Shadowed standard-library and test-runner modules: a patch that adds a
top-level `xml/`, `unittest/`, `json.py` or `pytest.py` is never what the oracle's process imports.

The attack: the oracle builds its expected value with a standard module (`json.loads`,
`ElementTree`, `unittest.mock`, `pytest.approx`). If the patch's module of that name were proxied,
production code would compute the expected value (seeing the oracle's literal as its argument)
and return the same thing from the function under test. Each class runs on both backends; the
units are the controls (the forge and the leak work when the name is proxied)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from membench.sandbox.harness import oracle_client
from membench.sandbox.scoring import production_modules, score_session
from membench.sandbox.workspace import write_tree
from tests.sandbox.test_harness_wire import remote  # noqa: F401  (the fixture)

ORACLE = '''import json
import xml.etree.ElementTree as ET
from unittest import mock

import pytest

from vault import keys


def test_limits():
    assert keys.limits() == json.loads('{"burst": 7}')


def test_region():
    assert keys.region() == ET.fromstring('<key region="KQZMWTRB"/>').get("region")


def test_client_id():
    assert keys.client_id() == mock.Mock(return_value="5e0c9a1b2d3f")()


def test_retries():
    assert keys.retries() == pytest.approx(7)
'''
SECRETS = ('"burst": 7', "KQZMWTRB", "5e0c9a1b2d3f")
BASE = {"vault/__init__.py": b"", "vault/keys.py": b'"""Keys."""\n'}
LOG = 'import sys\n\n\ndef _log(*args):\n    sys.stderr.write(f"SHADOW-SAW:{args!r}\\n")\n    sys.stderr.flush()\n'
# what the memory-blind patch returns: exactly what its shadow modules would answer the oracle
BLIND = ('def limits():\n    return {"forged": 1}\n\n\ndef region():\n    return "FORGED"\n\n\n'
         'def client_id():\n    return "FORGED"\n\n\ndef retries():\n    return 0\n')
HONEST = ('def limits():\n    return {"burst": 7}\n\n\ndef region():\n    return "KQZMWTRB"\n\n\n'
          'def client_id():\n    return "5e0c9a1b2d3f"\n\n\ndef retries():\n    return 7\n')
SHADOWS = {  # class -> (files the patch adds, the oracle's case that uses that module)
    "json": ({"json.py": LOG + '\n\ndef loads(text, *args, **kwargs):\n    _log(text)\n    return {"forged": 1}\n\n\n'
                         'def dumps(*args, **kwargs):\n    return "{}"\n'}, "test_limits"),
    "xml": ({"xml/__init__.py": "", "xml/etree/__init__.py": "",
             "xml/etree/ElementTree.py": LOG + '\n\nclass _Element:\n    def get(self, key, default=None):\n'
                                               '        return "FORGED"\n\n\ndef fromstring(text):\n'
                                               '    _log(text)\n    return _Element()\n'}, "test_region"),
    "unittest": ({"unittest/__init__.py": "",
                  "unittest/mock.py": LOG + '\n\nclass Mock:\n    def __init__(self, **kwargs):\n'
                                            '        _log(kwargs)\n\n'
                                            '    def __call__(self, *args, **kwargs):\n        return "FORGED"\n'},
                 "test_client_id"),
    "pytest": ({"pytest.py": LOG + '\n\ndef approx(expected, *args, **kwargs):\n    _log(expected)\n    return 0\n'},
               "test_retries"),
}
# names that broke the harness itself when proxied (pytest imports them)
BREAKERS = {"re.py": 'raise ImportError("a shadowed re")\n', "_pytest/__init__.py": 'raise ImportError("shadow")\n',
            "pluggy.py": 'raise ImportError("shadow")\n'}


def test_production_modules_leave_out_reserved_names():
    tree = {rel: b"" for rel in ["vault/__init__.py", "json.py", "re.py", "pytest.py", "xml/__init__.py",
                                 "unittest/mock.py", "_pytest/__init__.py", "membench_oracle.py", "tools/gen.py"]}
    assert production_modules(tree) == ["tools", "vault"]


def test_the_oracles_finder_refuses_reserved_names_whatever_it_is_given():
    finder = oracle_client.ProductionFinder({"json", "xml", "unittest", "pytest", "re", "vault"})
    assert finder.names == {"vault"}
    assert finder.find_spec("xml.etree.ElementTree") is None and finder.find_spec("vault.keys") is not None


def test_control_a_proxied_shadow_forges_the_expected_value_and_sees_the_literal(remote, capsys):
    """The defence bypassed: a finder given `json` as the harness used to give it claims the name,
    and the shadow's `loads`, answered by production, returns what the blind patch returns."""
    bypassed = oracle_client.ProductionFinder(set())
    bypassed.names = {"json"}
    assert bypassed.find_spec("json") is not None  # the oracle's `import json` would be a proxy
    name = "membench_shadow_json"
    module = types.ModuleType(name)
    exec(compile(SHADOWS["json"][0]["json.py"], "json.py", "exec"), module.__dict__)
    sys.modules[name] = module
    try:
        shadow = oracle_client.REMOTE.request({"op": "import", "name": name})
        blind = {}
        exec(compile(BLIND, "keys.py", "exec"), blind)
        assert blind["limits"]() == shadow.loads('{"burst": 7}')  # the forge passes test_limits
        assert '"burst": 7' in capsys.readouterr().err  # and production saw the oracle's literal
    finally:
        sys.modules.pop(name, None)


def _score(sandbox, tmp_path: Path, files: dict[str, str]):
    oracle = tmp_path / "hidden" / "s3_keys.py"
    oracle.parent.mkdir(parents=True, exist_ok=True)
    oracle.write_text(ORACLE)
    workspace = tmp_path / "workspace"
    write_tree({**BASE, **{rel: text.encode() for rel, text in files.items()}}, workspace)
    return score_session(sandbox, BASE, workspace, oracle, timeout_s=60)


@pytest.mark.integration
@pytest.mark.parametrize("shadow", sorted(SHADOWS))
def test_a_shadowed_module_is_never_the_oracles(any_sandbox, tmp_path, shadow):
    files, case = SHADOWS[shadow]
    result = _score(any_sandbox, tmp_path, {**files, "vault/keys.py": BLIND})
    assert result.outcome == "fail", result.detail
    outcomes = {c["case_id"]: c["outcome"] for c in result.cases}
    assert outcomes[case] == "fail" and set(outcomes) == {"test_limits", "test_region", "test_client_id",
                                                          "test_retries"}, result.detail
    production_log = result.detail.partition("[production]")[2]
    assert "SHADOW-SAW" not in production_log and not any(s in production_log for s in SECRETS)


@pytest.mark.integration
def test_an_honest_solution_with_every_shadow_still_passes(any_sandbox, tmp_path):
    """The documented rule: shadows are ignored by the oracle (they stay in the production tree,
    where only the code under test imports them), so they neither break the harness nor fail an
    honest patch."""
    files = {rel: text for shadow in SHADOWS.values() for rel, text in shadow[0].items()}
    result = _score(any_sandbox, tmp_path, {**files, **BREAKERS, "vault/keys.py": HONEST})
    assert result.outcome == "pass", result.detail
