"""Reading one typed field from parsed JSON, with an error that names where it was read.

Loaders of packs, imported task files and prediction files all check fields the same way; the
error class (and so the exit status and message prefix) is theirs.
"""

from __future__ import annotations

from typing import Any

REQUIRED: Any = ...  # the default of a field that must be present


def typed_field(obj: dict[str, Any], key: str, typ: type | tuple[type, ...], where: str, *,
                error: type[Exception], default: Any = REQUIRED, none_is_missing: bool = True) -> Any:
    """obj[key] if it is a `typ` (a bool is not an int); `default` if the key is absent — or
    null, when `none_is_missing` — and a default is given; otherwise raises `error` naming
    `where` and the field."""
    if key not in obj or (none_is_missing and obj[key] is None):
        if default is REQUIRED:
            raise error(f"{where}: missing required field '{key}'")
        return default
    value = obj[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        name = typ.__name__ if isinstance(typ, type) else " or ".join(t.__name__ for t in typ)
        raise error(f"{where}: field '{key}' must be {name}, got {type(value).__name__}")
    return value
