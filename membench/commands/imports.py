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
    from membench.packs.importers.remem import import_remem
    from membench.formats.pack_format import PackError, load_pack

    try:
        out = import_remem(source, out_dir, name)
        pack = load_pack(out)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"imported {len(pack.sequences)} tasks from {source.name} into {out} "
               f"(pack '{pack.name}', conditions {', '.join(pack.conditions)})")


@import_.command("dreambench")
@click.argument("source", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--repos", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="directory holding each record's fixture repository as <repo>/, checked out at its initial_commit")
@click.option("--hidden", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="directory holding the unpublished hidden parts: <seq_id>/<oracle_id>.py and <seq_id>/s<i>.solution.json")
@click.option("--construct", "constructs", multiple=True, metavar="SEQ_ID=Cn",
              help="the construct of a record that carries no construct_label (v1-shaped records); repeatable")
@click.option("--name", default=None, help="pack name (default: dreambench-<source file stem>)")
def dreambench(source: Path, out_dir: Path, repos: Path | None, hidden: Path | None, constructs: tuple[str, ...],
               name: str | None) -> None:
    """Import DreamBench-SWE sequence records (JSON lines) as a native pack in OUT_DIR.

    The records publish sessions, events and labels, not hidden oracles, reference solutions or
    fixture repositories: supply them with --hidden and --repos, or afterwards at the paths the
    pack's SUPPLY.md lists; `membench validate OUT_DIR` refuses the pack until they are there."""
    from membench.packs.importers.dreambench import import_dreambench, parse_constructs
    from membench.formats.pack_format import PackError

    try:
        result = import_dreambench(source, out_dir, repos=repos, hidden=hidden,
                                   constructs=parse_constructs(constructs), name=name)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    click.echo(f"imported {result.sequences} sequences from {source.name} into {result.out_dir}")
    if result.fields_not_used:
        click.echo(f"fields of the records not carried into the pack ({len(result.fields_not_used)}; also in "
                   "manifest.json's source.fields_not_used):")
        for entry in result.fields_not_used:
            count = len(entry["records"])
            click.echo(f"  {entry['field']} ({count} record{'s' if count > 1 else ''}: {', '.join(entry['records'])}): "
                       f"{entry['why']}")
    if result.missing:
        click.echo(f"not runnable yet: {len(result.missing)} files to supply, listed in {result.out_dir / 'SUPPLY.md'} "
                   "(hidden oracles and fixture repositories are not published)")
