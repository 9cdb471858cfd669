"""Reading a public pack's source records (ReMem, DreamBench): a field of the declared type, or a
`PackError` that names the record and the field."""

from __future__ import annotations

from typing import Any

from membench.formats.fields import REQUIRED, typed_field
from membench.formats.pack_format import PackError


def source_field(obj: Any, key: str, typ: type | tuple[type, ...], where: str, default: Any = REQUIRED) -> Any:
    """OBJ[KEY] when it is a TYP; DEFAULT when absent (unless required); WHERE names the record."""
    if not isinstance(obj, dict):
        raise PackError(f"{where}: must be an object")
    return typed_field(obj, key, typ, where, error=PackError, default=default)


def source_strings(obj: dict[str, Any], key: str, where: str) -> list[str]:
    """OBJ[KEY] as a list of strings (absent: empty)."""
    value = source_field(obj, key, list, where, [])
    if not all(isinstance(v, str) for v in value):
        raise PackError(f"{where}: field '{key}' must be a list of strings")
    return value
