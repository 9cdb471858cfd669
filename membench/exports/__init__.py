"""Exports: a run set from the warehouse into the formats other tools read (docs/exports/)."""
