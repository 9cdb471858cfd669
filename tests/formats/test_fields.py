"""One typed-field reader serves packs, imported task files and prediction files."""

import pytest

from membench.formats.fields import typed_field


class Bad(ValueError):
    pass


def test_missing_null_and_defaults():
    with pytest.raises(Bad, match=r"^f\.json: missing required field 'k'$"):
        typed_field({}, "k", str, "f.json", error=Bad)
    assert typed_field({"k": None}, "k", str, "w", error=Bad, default="d") == "d"
    with pytest.raises(Bad, match="field 'k' must be str, got NoneType"):  # a manifest's null is a wrong type
        typed_field({"k": None}, "k", str, "w", error=Bad, none_is_missing=False)


def test_types_bool_is_not_int_and_unions_are_named():
    assert typed_field({"k": 3}, "k", int, "w", error=Bad) == 3
    with pytest.raises(Bad, match="must be int, got bool"):
        typed_field({"k": True}, "k", int, "w", error=Bad)
    with pytest.raises(Bad, match="must be str or dict, got int"):
        typed_field({"k": 1}, "k", (str, dict), "w", error=Bad)
