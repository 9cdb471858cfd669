"""A vendor's memory system as a real installed distribution, written into a directory: the package
`vendor_mem` (`vendor_mem/store.py`, a per-namespace store that returns the newest memories within
the budget, as docs/memory-systems.md's worked example) and `vendor_mem-0.1.dist-info` registering
it as the entry point `vendor` of `membench.memory_systems`. Put the directory on the path
(PYTHONPATH for a subprocess) and `importlib.metadata` finds it as `pip install` would leave it;
`break_read` edits the module so that `read` returns nothing."""

from __future__ import annotations

from pathlib import Path

STORE = '''from membench.memory_systems.base import MemoryContext, MemoryItem, admit_newest
from membench.memory_systems.text import pieces


class VendorMemory:
    condition = "vendor"
    uses_memory = True

    def __init__(self, namespace):
        self.items = []

    def write(self, events):
        new = [MemoryItem(f"vendor:{p.event_id}", "vendor", p.text, (p.event_id,)) for p in pieces(events)]
        self.items += new
        return new

    def read(self, query, budget_tokens):
        kept = admit_newest(self.items, budget_tokens)
        return MemoryContext(tuple(kept), tuple(i.memory_id for i in kept), budget_tokens)
'''
GOOD_READ = "        kept = admit_newest(self.items, budget_tokens)\n"
BROKEN_READ = "        kept = []  # broken after its check: reads return nothing\n"


def write_vendor_distribution(site: Path) -> Path:
    """The distribution under SITE; returns the path of its module `vendor_mem/store.py`."""
    package = site / "vendor_mem"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store.py").write_text(STORE)
    info = site / "vendor_mem-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vendor-mem\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[membench.memory_systems]\nvendor = vendor_mem.store:VendorMemory\n")
    (info / "RECORD").write_text("vendor_mem/__init__.py,,\nvendor_mem/store.py,,\n")
    return package / "store.py"


def break_read(store: Path) -> None:
    text = store.read_text()
    assert GOOD_READ in text
    store.write_text(text.replace(GOOD_READ, BROKEN_READ))


def repair_read(store: Path) -> None:
    store.write_text(store.read_text().replace(BROKEN_READ, GOOD_READ))
