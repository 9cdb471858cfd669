"""Writes `membench/schemas/payloads.py`: the event payloads as `TypedDict`s, from the newest event schema.

Processors read payloads as plain dicts (no object per event on the hot path); this module gives
those dicts their declared shape, generated from the Avro records so the two cannot drift
(docs/design.md §3, "Typed payloads"): one `TypedDict` per record of the newest `event.v*.avsc`
(the payload kinds and the records nested in them), in schema order; a field the schema gives a
default is `NotRequired` (an event built in-process may omit it; a decoded one always has it), and
`DEFAULTS` holds those defaults as Python values (what a missing field means). `tests/schemas/test_payloads.py`
regenerates the module and compares, and `tests/processors/test_payload_reads.py` checks every
payload read of the processors against it.

    python -m membench.schemas.payload_types          # rewrite membench/schemas/payloads.py after adding a schema version
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from membench.schemas.generated import write_generated
from membench.schemas.registry import Registry, default_registry

TARGET = Path(__file__).with_name("payloads.py")
_PRIMITIVES = {"string": "str", "int": "int", "long": "int", "boolean": "bool", "double": "float", "float": "float",
               "bytes": "bytes", "null": "None"}
_NO_DEFAULT = object()


class _Renderer:
    def __init__(self) -> None:
        self.classes: list[str] = []  # rendered class bodies, nested records first
        self.defaults: dict[str, dict[str, Any]] = {}
        self.seen: set[str] = set()

    def type_of(self, schema: Any) -> str:
        if isinstance(schema, list):
            return " | ".join(self.type_of(branch) for branch in schema)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema]
            return schema.rsplit(".", 1)[-1]  # a named type defined earlier (membench.BoundedText)
        kind = schema["type"]
        if kind == "record":
            self.record(schema)
            return schema["name"]
        if kind == "array":
            return f"list[{self.type_of(schema['items'])}]"
        if kind == "map":
            return f"dict[str, {self.type_of(schema['values'])}]"
        if kind == "enum":
            return "Literal[" + ", ".join(repr(s) for s in schema["symbols"]) + "]"
        if kind == "fixed":
            return "bytes"
        return self.type_of(kind)  # {"type": "long", "logicalType": ...}

    def record(self, schema: dict[str, Any]) -> None:
        name = schema["name"]
        if name in self.seen:
            return
        self.seen.add(name)
        lines, defaults = [], {}
        for f in schema["fields"]:
            annotation = self.type_of(f["type"])  # nested records are rendered (appended) first
            default = f.get("default", _NO_DEFAULT)
            if default is _NO_DEFAULT:
                lines.append(f"    {f['name']}: {annotation}")
            else:
                defaults[f["name"]] = default
                lines.append(f"    {f['name']}: NotRequired[{annotation}]  # default {default!r}")
        self.defaults[name] = defaults
        self.classes.append(f"class {name}(TypedDict):\n" + "\n".join(lines) + "\n")


_EMIT_HEADER = '''Event_co = TypeVar("Event_co", covariant=True)


class Emit(Protocol[Event_co]):
    """`emit(kind, payload, visibility)` typed per kind: a type checker refuses a payload key the
    kind's record does not declare, a missing required key and a value of the wrong type at the
    call site (at run time the encoder refuses an undeclared key, membench/schemas/fastcodec.py). A key left
    out that is `NotRequired` takes the schema's default (DEFAULTS)."""
'''
_EMIT_OVERLOAD = '''
    @overload
    def __call__(self, kind: Literal[{kind!r}], payload: {kind}, visibility: str = ...) -> Event_co: ...
'''


def render(registry: Registry | None = None) -> str:
    """The text of `membench/schemas/payloads.py` for the newest event schema of `registry`."""
    latest = (registry or default_registry()).latest("event")
    payload = next(f for f in latest.schema_json["fields"] if f["name"] == "payload")
    renderer = _Renderer()
    kinds = []
    for branch in payload["type"]:
        renderer.type_of(branch)
        kinds.append(branch["name"] if isinstance(branch, dict) else branch.rsplit(".", 1)[-1])
    defaults = "".join(f"    {name!r}: {{\n" + "".join(f"        {k!r}: {v!r},\n" for k, v in fields.items())
                       + "    },\n" for name, fields in sorted(renderer.defaults.items()) if fields)
    return (
        f'"""Event payloads as TypedDicts: GENERATED from schemas/avsc/event.v{latest.version}.avsc by\n'
        '`python -m membench.schemas.payload_types` (see that module); do not edit by hand."""\n\n'
        "from typing import Any, Literal, NotRequired, Protocol, TypedDict, TypeVar, overload  # noqa: F401\n\n"
        f"SCHEMA_VERSION = {latest.version}\n\n\n"
        + "\n\n".join(renderer.classes)
        + "\n\n# the payload record of each event kind\n"
        + "PAYLOADS: dict[str, type] = {\n" + "".join(f"    {k!r}: {k},\n" for k in kinds) + "}\n\n"
        + _EMIT_HEADER + "".join(_EMIT_OVERLOAD.format(kind=k) for k in kinds) + "\n\n"
        + "# record -> field -> the schema's default (a field missing from an in-process payload reads as this)\n"
        + "DEFAULTS: dict[str, dict[str, Any]] = {\n" + defaults + "}\n"
    )


def main() -> int:
    return write_generated(TARGET, render())


if __name__ == "__main__":
    sys.exit(main())
