"""Importers: external benchmark formats converted into native membench packs (docs/design.md §4)."""
