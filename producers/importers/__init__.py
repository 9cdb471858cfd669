"""Importers: external benchmark formats converted into native membench packs (DESIGN.md §4)."""
