"""Always-equal values: production code that returns an object whose `__eq__`
answers "equal" must not pass the oracle's `assert value == expected`, and the oracle's expected
value must never reach production code as the operand of a comparison.

Each attack is a memory-blind patch (it does not know the secrets), scored in the sandbox; the units
below are the controls: the same objects pass when production answers the comparison (the old
proxy path), and the stealthy one then sees the secret."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from membench.sandbox.harness import oracle_client
from membench.sandbox.harness.production_server import Server
from membench.sandbox.scoring import score_session
from membench.sandbox.workspace import write_tree
from tests.sandbox.test_harness_wire import remote  # noqa: F401  (the fixture)

PREFIX, CLIENT, REGION = "AUD-7f3a9c21/", "5e0c9a1b2d3f", "KQZMWTRB"  # a prefix, 12 hex digits, 8 capitals
EXPECTED = {"export_prefix": PREFIX, "client_id": CLIENT, "region": REGION, "retries": 7, "limits": {"burst": 7}}
ORACLE = f'''from vault import keys


def test_export_prefix():
    assert keys.export_prefix() == "{PREFIX}"


def test_client_id():
    assert keys.client_id() == "{CLIENT}"


def test_region():
    assert keys.region() == "{REGION}"


def test_retries():
    assert keys.retries() == 7


def test_limits():
    assert keys.limits() == {{"burst": 7}}
'''
BASE = {"vault/__init__.py": b"", "vault/keys.py": b'"""Keys."""\n'}
FUNCTIONS = "".join(f"\n\ndef {name}():\n    return VALUE\n" for name in EXPECTED)

ATTACKS = {
    "str_subclass": '''
class Key(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


VALUE = Key("guess")
''',
    "int_subclass": '''
class Count(int):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


VALUE = Count(0)
''',
    "dict_subclass": '''
class Table(dict):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


VALUE = Table()
''',
    "any_like_object": '''
class _Any:  # what unittest.mock.ANY does
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


VALUE = _Any()
''',
    # equal only to what looks like a secret (so a naive "is it always equal?" probe sees False),
    # and it writes down every operand it is shown: the oracle's literal must never be one
    "stealthy_shape_match": '''
import re
import sys

SEEN = []
SHAPE = re.compile(r"[A-Z]{8}|[0-9a-f]{12}|AUD-[0-9a-f]{8}/")


class Shape:
    def __eq__(self, other):
        SEEN.append(other)
        sys.stderr.write(f"STEALTH-SAW:{other!r}\\n")
        sys.stderr.flush()
        return isinstance(other, (int, dict)) or (isinstance(other, str) and SHAPE.fullmatch(other) is not None)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__


VALUE = Shape()
sys.stderr.write("STEALTH-READY\\n")
sys.stderr.flush()
''',
}
HONEST = f'''
class Prefix(str):  # an honest subclass of str: its content is what counts
    pass


ANSWERS = {EXPECTED!r}
ANSWERS["export_prefix"] = Prefix(ANSWERS["export_prefix"])
''' + "".join(f"\n\ndef {name}():\n    return ANSWERS[{name!r}]\n" for name in EXPECTED)
SECRETS = (PREFIX, CLIENT, REGION)


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source + FUNCTIONS, f"{name}.py", "exec"), module.__dict__)
    return module


@pytest.fixture
def production_module():
    """An attack's module registered in this process, where the `remote` fixture's server runs."""
    names = []

    def install(attack: str) -> str:
        name = f"membench_attack_{attack}"
        sys.modules[name] = _module(ATTACKS[attack], name)
        names.append(name)
        return name

    yield install
    for name in names:
        sys.modules.pop(name, None)


def _fetch(module: str, function: str) -> object:
    target = oracle_client.REMOTE.request({"op": "import", "name": module})
    assert isinstance(target, oracle_client.ProductionModule)
    return getattr(target, function)()


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_always_equal_values_cannot_answer_the_oracles_comparison(remote, production_module, attack):
    name = production_module(attack)
    for function, expected in EXPECTED.items():
        value = _fetch(name, function)
        if isinstance(value, oracle_client.Proxy):  # a plain class: a reference, and no comparison is asked of it
            with pytest.raises(TypeError, match="equality of a production object .* is not answered"):
                assert value == expected
            with pytest.raises(TypeError, match="equality"):
                assert value != expected
            with pytest.raises(TypeError, match="equality"):
                assert expected == value  # the reflected comparison lands on the proxy too
            with pytest.raises(TypeError, match="equality"):
                assert [value] == [expected]
        else:  # a subclass of a built-in type: its base type's content, as that exact type
            assert type(value) in (str, int, dict), type(value)
            assert value != expected
    assert getattr(sys.modules[name], "SEEN", []) == []  # the stealthy one never saw an operand


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_control_the_attack_passes_when_production_answers_the_comparison(remote, production_module, attack):
    """The undefended path: production code evaluating `value == expected` (as the old proxy's
    `__eq__` asked it to, with the oracle's literal as the operand) says equal to every secret."""
    name = production_module(attack)
    module = sys.modules[name]
    for function, expected in EXPECTED.items():
        value = getattr(module, function)()  # the object as production holds it
        assert value == expected  # answered by the code under test: the forge works
        target = _fetch(name, function)
        if isinstance(target, oracle_client.Proxy):  # over the real channel, asking production as before
            equal = oracle_client.REMOTE.request({"op": "getattr", "target": oracle_client.encode(target),
                                                  "name": "__eq__"})
            assert equal(expected) is True
    if attack == "stealthy_shape_match":  # and the oracle's literals travelled to production
        assert set(SECRETS) <= {v for v in module.SEEN if isinstance(v, str)}


def test_subclass_content_is_read_with_the_base_types_methods():
    """A subclass that lies through every method it can override still crosses as its content."""
    class Liar(str):
        def __str__(self):
            return "forged"

        def __iter__(self):
            return iter("forged")

    class LyingList(list):
        def __iter__(self):
            return iter(["forged"])

        def __len__(self):
            return 99

    class LyingDict(dict):
        def items(self):
            return [("forged", 1)]

        def __iter__(self):
            return iter(["forged"])

    server = Server()
    assert server.encode(Liar("real")) == "real" and type(server.encode(Liar("real"))) is str
    assert server.encode(LyingList([1, 2])) == {"t": "list", "v": [1, 2]}
    assert server.encode(LyingDict(a=1)) == {"t": "dict", "v": [["a", 1]]}
    assert server.encode(type("B", (bytes,), {"hex": lambda self: "00"})(b"\x01")) == {"t": "bytes", "v": "01"}
    assert server.encode(type("F", (float,), {"__float__": lambda self: 0.0})(1.5)) == 1.5


def test_references_refuse_every_verdict_operation(remote):
    queue = oracle_client.REMOTE.request({"op": "getattr", "target": {"t": "module", "name": "collections"},
                                          "name": "deque"})([1, 2])
    for operation in (lambda q: q < 1, lambda q: q >= 1, bool, len, lambda q: 1 in q, iter, list, sorted, str,
                      lambda q: f"{q}", int, float, reversed, lambda q: q == 1, lambda q: q != [1, 2]):
        with pytest.raises(TypeError, match="production object .*collections.deque.* membench_oracle.plain"):
            operation(queue)
    assert re.fullmatch(r"<production object collections\.deque #\d+>", repr(queue))


def test_plain_converts_explicitly_and_checks_the_answers_type(remote, production_module):
    name = production_module("any_like_object")
    value = _fetch(name, "client_id")
    with pytest.raises(TypeError, match="plain\\(\\) converts to one of"):
        oracle_client.plain(value, object)
    with pytest.raises(TypeError):  # production's list() of an object that is no iterable
        oracle_client.plain(value, list)
    assert oracle_client.plain((1, 2), list) == [1, 2]  # a local value is converted here


def _score(sandbox, tmp_path: Path, production: str, oracle: str = ORACLE, timeout_s: float = 60):
    oracle_file = tmp_path / "hidden" / "s3_keys.py"
    oracle_file.parent.mkdir(parents=True, exist_ok=True)
    oracle_file.write_text(oracle)
    workspace = tmp_path / "workspace"
    write_tree({**BASE, "vault/keys.py": production.encode()}, workspace)
    return score_session(sandbox, BASE, workspace, oracle_file, timeout_s=timeout_s)


@pytest.mark.integration
def test_an_honest_solution_passes_with_a_str_subclass(any_sandbox, tmp_path):
    result = _score(any_sandbox, tmp_path, HONEST)
    assert result.outcome == "pass", result.detail
    assert {c["case_id"] for c in result.cases} == {f"test_{name}" for name in EXPECTED}


@pytest.mark.integration
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_always_equal_value_fails_every_case(bwrap_sandbox, tmp_path, attack):
    """On one backend: what defeats these objects is the harness's protocol (the oracle's side never
    sends a comparison to production), the same code inside either backend's sandbox; that scoring
    through the proxy works on each backend, and fails an always-equal patch end to end, is the
    honest-solution and `membench score` tests, which run on both."""
    result = _score(bwrap_sandbox, tmp_path, ATTACKS[attack] + FUNCTIONS)
    assert result.outcome == "fail", result.detail
    assert {c["case_id"]: c["outcome"] for c in result.cases} == {f"test_{name}": "fail" for name in EXPECTED}
    production_log = result.detail.partition("[production]")[2]
    if attack == "stealthy_shape_match":
        assert "STEALTH-READY" in production_log, result.detail  # its log reaches us: silence means something
    assert "STEALTH-SAW" not in production_log and not any(secret in production_log for secret in SECRETS)


AUDIT_BASE = '"""Audit trail helpers."""\n'
AUDIT_ATTACKS = {  # smoke-audit-prefix S3: `export_lines(...) == [PREFIX + "pay:5", ...]`
    1: ATTACKS["str_subclass"] + "\n\ndef export_lines(entries):\n    return VALUE\n",
    2: ATTACKS["any_like_object"] + "\n\ndef export_lines(entries):\n    return VALUE\n",
}


@pytest.mark.integration
def test_always_equal_predictions_fail_through_membench_score(any_sandbox, cli, home, tmp_path):
    import difflib
    import json

    predictions = tmp_path / "always-equal.jsonl"
    predictions.write_text("".join(json.dumps({
        "unit": "smoke-audit-prefix", "condition": "B0", "seed": seed, "session": 3,
        "patch": "".join(difflib.unified_diff(AUDIT_BASE.splitlines(True), (AUDIT_BASE + text).splitlines(True),
                                              "a/ledger/audit.py", "b/ledger/audit.py"))}) + "\n"
        for seed, text in AUDIT_ATTACKS.items()))
    cli("score", "smoke", "--predictions", str(predictions), "--run-set", "always-equal", "--sandbox",
        any_sandbox.name, check=True, timeout=600)
    rows = cli("sql", "SELECT seed, passed FROM session_results WHERE run_set = 'always-equal' AND scored "
                      "ORDER BY seed", check=True).stdout.split()
    assert rows == ["1", "false", "2", "false"], rows
    (b0,) = json.loads((home / "runs" / "always-equal" / "report.json").read_text())["conditions"]
    assert b0["excluded"] == 0 and b0["pass_rate"] == 0
