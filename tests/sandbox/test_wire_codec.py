"""The harness's JSON codec (`wire.dumps`, `wire.loads`): the `json` module's C encoder and scanner
driven directly, so the sandboxed processes need not import `json` (and `re`, `enum`). It must read
and write exactly what `json` does, refuse what `json` refuses, and fall back to `json` itself
where the accelerator is missing."""

from __future__ import annotations

import builtins
import json
import math

import pytest

from membench.sandbox.harness import wire

VALUES = [None, True, 0, -7, 10 ** 40, 1.5, -0.0, 1e-300, "plain", "é \u2028 \"quoted\" \\ \n\t\x00", [],
          {"t": "list", "v": [1, "a", None]}, {"t": "dict", "v": [[1, 2], ["k", {"t": "ref", "id": 3}]]},
          {"error": {"type": "KeyError", "module": "builtins", "message": "x", "bases": ["LookupError"]}},
          [float("inf"), float("-inf")]]
MALFORMED = ["", "   ", "{", '{"a": 1} x', "[1,]", "nul", '"\x01"', "{'a': 1}", "[1] [2]"]


def _codecs():
    fast = (wire.dumps, wire.loads)
    real_import = builtins.__import__

    def without_accelerator(name, *args, **kwargs):
        if name == "_json":
            raise ImportError("no accelerator")
        return real_import(name, *args, **kwargs)

    builtins.__import__ = without_accelerator
    try:
        fallback = wire._json_codec()
    finally:
        builtins.__import__ = real_import
    return {"accelerated": fast, "json module": fallback}


@pytest.mark.parametrize("codec", ["accelerated", "json module"])
def test_the_codec_writes_and_reads_what_json_does(codec):
    dumps, loads = _codecs()[codec]
    for value in VALUES:
        text = dumps(value)
        assert text == json.dumps(value, separators=(",", ":"))
        assert json.dumps(loads(text)) == json.dumps(value)
    assert math.isnan(loads("NaN")) and loads(' {"a": [1, 2]}\n') == {"a": [1, 2]}


@pytest.mark.parametrize("codec", ["accelerated", "json module"])
def test_the_codec_refuses_what_json_refuses(codec):
    dumps, loads = _codecs()[codec]
    for text in MALFORMED:
        with pytest.raises(ValueError):
            json.loads(text)  # control: json refuses it too
        with pytest.raises(ValueError):
            loads(text)
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"a": object()})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError):
        dumps(loop)


def test_the_fallback_is_the_json_module():
    fast, fallback = _codecs()["accelerated"], _codecs()["json module"]
    assert fallback[1] is json.loads and fast[1] is not json.loads
