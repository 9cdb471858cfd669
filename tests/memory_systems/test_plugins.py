"""Entry-point plug-ins (group `membench.memory_systems`): a vendor's factory is registered
under its entry point's name by an explicit call, is not built in (it needs a conformance record),
and a plug-in that cannot be loaded is an error naming it. Real `importlib.metadata.EntryPoint`
objects, loaded by their own `load()`."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from membench.memory_systems.base import MemoryContext, Namespace
from membench.memory_systems.registry import (MEMORY_SYSTEMS, configuration, make_memory, needs_conformance,
                                               register_plugins)


class VendorMemory:
    condition = "vendor-test"
    uses_memory = True

    def __init__(self, namespace):
        self.namespace = namespace

    def write(self, events):
        return []

    def read(self, query, budget_tokens):
        return MemoryContext((), (), budget_tokens)


@pytest.fixture
def clean():
    before = set(MEMORY_SYSTEMS)
    yield
    for name in set(MEMORY_SYSTEMS) - before:
        MEMORY_SYSTEMS.pop(name)


def test_a_plugin_is_registered_by_name_and_needs_conformance(clean) -> None:
    point = EntryPoint("vendor-test", f"{__name__}:VendorMemory", "membench.memory_systems")
    shadow = EntryPoint("B5", f"{__name__}:VendorMemory", "membench.memory_systems")
    assert register_plugins([point, shadow]) == ["vendor-test"]  # a built-in name keeps its system
    assert MEMORY_SYSTEMS["B5"] is not VendorMemory
    memory = make_memory("vendor-test", Namespace("rs", "vendor-test", 1, "s"))
    assert isinstance(memory, VendorMemory)
    assert needs_conformance("vendor-test") and not needs_conformance("B5")  # control: a built-in needs none
    assert configuration("vendor-test")["kind"] == "plugin"


def test_a_plugin_that_cannot_load_is_named(clean) -> None:
    broken = EntryPoint("broken-test", "no_such_vendor_module:Memory", "membench.memory_systems")
    with pytest.raises(ValueError, match="broken-test.*no_such_vendor_module"):
        register_plugins([broken])
