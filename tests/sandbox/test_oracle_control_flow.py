"""Production exceptions that would steer the oracle's own control flow, aliases of builtin
exception classes, and installed modules a scored tree names (a review of the scoring defences).

Each defence has its control: the undefended rule, applied to the same input, lets the attack
through — so these tests fail if the defence goes."""

from __future__ import annotations

import builtins
import importlib.machinery
import sys
import types

import pytest

from membench.sandbox.harness import oracle_client
from tests.sandbox.test_harness_wire import remote  # noqa: F401  (the fixture)

STOPPER = '''
class Halt(StopIteration):
    pass

def is_valid(value):
    raise StopIteration("no more")

def solve(value):
    raise Halt("no more")

ParseError = ValueError

def parse(text):
    raise ValueError("bad amount: " + text)
'''


@pytest.fixture
def stopper():
    name = "membench_attack_stopper"
    module = types.ModuleType(name)
    exec(compile(STOPPER, f"{name}.py", "exec"), module.__dict__)
    sys.modules[name] = module
    yield oracle_client.REMOTE.request({"op": "import", "name": name})
    sys.modules.pop(name, None)


def _oracle_loops(mod) -> int:
    """What an oracle might write: every value must be valid, every answer right. Returns how many
    assertions ran."""
    ran = 0
    assert all(map(mod.is_valid, ["a", "b"]))
    for got, want in zip(map(mod.solve, ["x", "y"]), ["X", "Y"]):
        ran += 1
        assert got == want
    return ran


def test_a_production_stopiteration_cannot_end_the_oracles_loops(remote, stopper):
    with pytest.raises(RuntimeError) as caught:  # the stand-in, never StopIteration itself
        _oracle_loops(stopper)
    assert not isinstance(caught.value, StopIteration)
    with pytest.raises(RuntimeError) as caught:  # nor a production subclass of it
        list(zip(map(stopper.solve, ["x"]), ["X"]))
    assert not isinstance(caught.value, StopIteration) and type(caught.value).__name__ == "Halt"


def test_control_a_stopiteration_raised_as_itself_passes_the_loops_with_no_assertion():
    class Stub:
        def is_valid(self, value):
            raise StopIteration

        def solve(self, value):
            raise StopIteration

    assert _oracle_loops(Stub()) == 0  # all(map(...)) is True and the loop ran no assert


def test_an_alias_of_a_builtin_exception_is_that_class(remote, stopper):
    assert stopper.ParseError is ValueError
    with pytest.raises(stopper.ParseError, match="bad amount"):
        stopper.parse("12,50")


def test_control_a_stand_in_for_the_alias_misses_the_raised_builtin():
    stand_in = oracle_client._exception_class("builtins.ValueError", ["ValueError", "Exception"])
    assert stand_in is not ValueError and not isinstance(ValueError("x"), stand_in)


def test_installed_modules_are_never_proxied(capsys):
    installed = next(name for name in ("pip", "setuptools", "_distutils_hack", "wheel")
                     if name not in oracle_client.wire.reserved_module_names()
                     and importlib.machinery.PathFinder.find_spec(name) is not None
                     and name not in sys.modules)
    finder = oracle_client.ProductionFinder({installed, "membench_not_installed_pkg"})
    assert finder.names == {"membench_not_installed_pkg"}
    assert finder.find_spec(installed) is None  # the real installation answers the oracle's import
    assert installed in capsys.readouterr().err  # and the verdict's detail says so


def test_control_without_the_installed_check_the_tree_would_answer_for_an_installed_module():
    installed = next(name for name in ("pip", "setuptools", "wheel")
                     if importlib.machinery.PathFinder.find_spec(name) is not None and name not in sys.modules)
    bypassed = oracle_client.ProductionFinder(set())
    bypassed.names = {installed}  # the rule before: only reserved and already-imported names left out
    assert bypassed.find_spec(installed) is not None


def test_builtins_still_cross_as_themselves(remote):
    assert oracle_client._safe_builtin_exception("KeyError") is builtins.KeyError
    assert oracle_client._safe_builtin_exception("StopIteration") is None
    assert oracle_client._safe_builtin_exception("StopAsyncIteration") is None
    assert oracle_client._safe_builtin_exception("SystemExit") is None
