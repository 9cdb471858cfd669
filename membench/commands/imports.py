"""`membench import FORMAT SOURCE OUT_DIR`: convert an external benchmark pack into a native pack."""

from __future__ import annotations

from pathlib import Path

import click

from membench.errors import UsageError


@click.group("import")
def import_() -> None:
    """Convert an external benchmark's task pack into a native membench pack."""


@import_.command("remem")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default=None, help="pack name (default: remem-<source file stem>)")
def remem(source: Path, out_dir: Path, name: str | None) -> None:
    """Import a coding-agent A/B benchmark `tasks.json` (version 1) as a native pack in OUT_DIR.

    Run it afterwards with e.g. `membench run OUT_DIR --conditions no_memory,curated_file,B5`,
    or score patches produced elsewhere with `membench score OUT_DIR --predictions FILE.jsonl`."""
    from producers.importers.remem import import_remem
    from schemas.pack_format import PackError, load_pack

    try:
        out = import_remem(source, out_dir, name)
        pack = load_pack(out)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"imported {len(pack.sequences)} tasks from {source.name} into {out} "
               f"(pack '{pack.name}', conditions {', '.join(pack.conditions)})")
