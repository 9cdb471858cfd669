"""The `pytest` an oracle imports under the fast oracle runner (`oracle_runner.py`).

Importing pytest costs about three quarters of a scored session's CPU, and an oracle uses a handful
of its names. This module offers those names with pytest's behaviour, so an oracle stays a plain
pytest file that its author runs with real pytest: `raises` (context manager and call form, with
`match`), `approx` (numbers and lists, tuples and dicts of them), `fail`, `skip`, `importorskip`,
`param`, `fixture` (function, module or session scope; `yield` fixtures; no `params`, no
`autouse`) and the marks `parametrize`, `skip` and `skipif` (with a boolean condition).

`SUPPORTED` and `SUPPORTED_MARKS` are what `membench.sandbox.oracle_runners.fast_runner_refusal` checks an
oracle against before it is run this way: an oracle that uses anything else is scored by real
pytest (`membench validate` says which and why). Only the standard library is used here.
"""

from __future__ import annotations

import math
import types

TYPE_CHECKING = False  # typing costs start-up CPU in the sandbox: annotations only (mypy takes this as True)
if TYPE_CHECKING:
    from typing import TypeGuard

SUPPORTED = frozenset({"raises", "approx", "fail", "skip", "importorskip", "param", "fixture", "mark"})
SUPPORTED_MARKS = frozenset({"parametrize", "skip", "skipif"})
FIXTURE_SCOPES = ("function", "module", "session")
# pytest's own fixtures the fast runner provides (`oracle_runner.BUILTIN_FIXTURES`)
BUILTIN_FIXTURES = frozenset({"tmp_path", "monkeypatch", "capsys"})


class OutcomeException(BaseException):
    """Ends a test with an outcome other than a failed assertion (pytest's own are BaseExceptions
    too, so `except Exception` in a test does not swallow them)."""

    def __init__(self, msg: str = ""):
        super().__init__(msg)
        self.msg = msg


class Failed(OutcomeException):
    pass


class Skipped(OutcomeException):
    pass


def fail(reason: str = "", pytrace: bool = True) -> None:
    raise Failed(reason)


def skip(reason: str = "", *, allow_module_level: bool = False) -> None:
    raise Skipped(reason)


fail.Exception = Failed  # type: ignore[attr-defined]  # pytest's API: the outcome's class on its function
skip.Exception = Skipped  # type: ignore[attr-defined]  # pytest's API: the outcome's class on its function


def importorskip(modname: str, minversion: str | None = None, reason: str | None = None, *,
                 exc_type: type | None = None) -> object:
    import importlib

    try:
        module = importlib.import_module(modname)
    except ImportError as exc:
        raise Skipped(reason or f"could not import {modname!r}: {exc}") from None
    if minversion is not None:
        version = str(getattr(module, "__version__", ""))
        if _version_key(version) < _version_key(minversion):
            raise Skipped(f"module {modname!r} has __version__ {version!r}, required is: {minversion!r}")
    return module


def _version_key(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in text.replace("+", ".").replace("-", ".").split("."))


# ---------------------------------------------------------------------------------------- raises
class ExceptionInfo:
    """What `raises` caught: `.value`, `.type`, `.typename`, `.match(pattern)`."""

    def __init__(self) -> None:
        self.value: BaseException | None = None
        self.type: type | None = None
        self.tb = None

    @property
    def typename(self) -> str:
        return self.type.__name__ if self.type is not None else ""

    def match(self, regexp) -> bool:
        import re  # only when a test matches: `re` and `enum` are a tenth of the fast runner's start

        text = str(self.value)
        if not re.search(regexp, text):
            raise AssertionError(f"Regex pattern did not match.\n Regex: {regexp!r}\n Input: {text!r}")
        return True

    def errisinstance(self, exc: type | tuple) -> bool:
        return isinstance(self.value, exc)

    def __repr__(self) -> str:
        return f"<ExceptionInfo {self.value!r}>"


class RaisesContext:
    def __init__(self, expected: type | tuple, match):
        self.expected, self.match_expr = expected, match
        self.excinfo = ExceptionInfo()

    def __enter__(self) -> ExceptionInfo:
        return self.excinfo

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            raise Failed(f"DID NOT RAISE {_names(self.expected)}")
        if not issubclass(exc_type, self.expected):
            return False  # not what was expected: it propagates, as with pytest
        self.excinfo.value, self.excinfo.type, self.excinfo.tb = exc, exc_type, tb
        if self.match_expr is not None:
            self.excinfo.match(self.match_expr)
        return True


def _names(expected: type | tuple) -> str:
    if isinstance(expected, tuple):
        return "any of (" + ", ".join(e.__name__ for e in expected) + ")"
    return f"<class '{expected.__name__}'>"


def raises(expected, *args, match=None, **kwargs):
    kinds = expected if isinstance(expected, tuple) else (expected,)
    if not kinds or not all(isinstance(k, type) and issubclass(k, BaseException) for k in kinds):
        raise TypeError(f"expected exception must be a BaseException type, not {expected!r}")
    context = RaisesContext(expected, match)
    if not args:
        return context
    with context:
        args[0](*args[1:], **kwargs)
    return context.excinfo


# ---------------------------------------------------------------------------------------- approx
DEFAULT_REL, DEFAULT_ABS = 1e-6, 1e-12


def _is_number(value: object) -> TypeGuard[int | float | complex]:
    return isinstance(value, (int, float, complex)) and not isinstance(value, bool)


class ApproxBase:
    def __init__(self, expected, rel=None, abs=None, nan_ok=False):
        self.expected, self.rel, self.abs, self.nan_ok = expected, rel, abs, nan_ok

    def _scalar_eq(self, actual: object, expected: object) -> bool:
        if not (_is_number(expected) and _is_number(actual)):
            return actual == expected
        if actual == expected:
            return True
        if isinstance(expected, complex) or isinstance(actual, complex):
            diff = abs(expected - actual)
        else:
            if math.isnan(expected) or math.isnan(actual):
                return self.nan_ok and math.isnan(expected) and math.isnan(actual)
            if math.isinf(expected) or math.isinf(actual):
                return False
            diff = abs(expected - actual)
        absolute = DEFAULT_ABS if self.abs is None else self.abs
        relative = DEFAULT_REL if self.rel is None else self.rel
        if self.rel is not None and self.abs is None:
            tolerance = relative * abs(expected)
            tolerance = max(tolerance, 0.0)
        elif self.abs is not None and self.rel is None:
            tolerance = absolute
        else:
            tolerance = max(relative * abs(expected), absolute)
        return diff <= tolerance

    def __eq__(self, actual: object) -> bool:
        expected = self.expected
        if isinstance(expected, dict):
            return (isinstance(actual, dict) and set(actual) == set(expected)
                    and all(self._scalar_eq(actual[k], v) for k, v in expected.items()))
        if isinstance(expected, (list, tuple)):
            return (isinstance(actual, (list, tuple)) and len(actual) == len(expected)
                    and all(self._scalar_eq(a, e) for a, e in zip(actual, expected)))
        if isinstance(actual, (list, tuple)) and _is_number(expected):
            return all(self._scalar_eq(a, expected) for a in actual)
        return self._scalar_eq(actual, expected)

    def __ne__(self, actual: object) -> bool:
        return not self == actual

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"approx({self.expected!r})"


def approx(expected, rel=None, abs=None, nan_ok=False) -> ApproxBase:
    return ApproxBase(expected, rel, abs, nan_ok)


# ---------------------------------------------------------------------------------------- marks
class Mark:
    def __init__(self, name: str, args: tuple, kwargs: dict):
        self.name, self.args, self.kwargs = name, args, kwargs


class MarkDecorator:
    def __init__(self, mark: Mark):
        self.mark = mark

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], types.FunctionType):
            func = args[0]
            func.pytestmark = [*getattr(func, "pytestmark", []), self.mark]  # type: ignore[attr-defined]  # pytest keeps marks on the function
            return func
        if len(args) == 1 and not kwargs and isinstance(args[0], type):
            cls = args[0]
            cls.pytestmark = [*cls.__dict__.get("pytestmark", []), self.mark]  # type: ignore[attr-defined]  # pytest keeps marks on the class
            return cls
        return MarkDecorator(Mark(self.mark.name, self.mark.args + args, {**self.mark.kwargs, **kwargs}))


class MarkGenerator:
    def __getattr__(self, name: str) -> MarkDecorator:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in SUPPORTED_MARKS:
            raise AttributeError(f"pytest.mark.{name} is not offered by membench's fast oracle runner")
        return MarkDecorator(Mark(name, (), {}))


mark = MarkGenerator()


class ParameterSet:
    def __init__(self, values: tuple, marks: tuple, id: str | None):
        self.values, self.marks, self.id = values, marks, id


def param(*values, marks=(), id=None) -> ParameterSet:
    if isinstance(marks, MarkDecorator):
        marks = (marks,)
    return ParameterSet(values, tuple(marks), id)


# -------------------------------------------------------------------------------------- fixtures
class FixtureDefinition:
    def __init__(self, func, scope: str, name: str | None):
        self.func, self.scope, self.name = func, scope, name or func.__name__


def fixture(fixture_function=None, *, scope: str = "function", params=None, autouse: bool = False,
            ids=None, name: str | None = None):
    if params is not None or autouse or scope not in FIXTURE_SCOPES:
        raise TypeError("membench's fast oracle runner offers fixtures of function, module or session scope "
                        "without params or autouse")

    def register(func):
        func._membench_fixture = FixtureDefinition(func, scope, name)
        return func

    return register(fixture_function) if fixture_function is not None else register


__all__ = sorted(SUPPORTED)
