"""Packs as a user hands them in: resolving a built-in or a directory, finalizing, the admission
gates of `membench validate`, the skeleton `membench pack new` writes, importers of foreign
formats."""
