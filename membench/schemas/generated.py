"""Writing a generated module (membench/schemas/payloads.py, membench/warehouse/rows.py): the file is
rewritten only when its text changed, and the generator says which it did; each generator's test
renders the text again and compares it with the file."""

from __future__ import annotations

from pathlib import Path


def write_generated(target: Path, text: str) -> int:
    """Write TEXT to TARGET unless it holds it already; the exit status of the generator's main (0)."""
    if target.exists() and target.read_text(encoding="utf-8") == text:
        print(f"{target.name} is up to date")
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target.name}")
    return 0
