"""`membench pack new NAME DIR`, `membench pack finalize SKELETON OUT` and `membench validate PACK`."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console

from membench.commands.cli_helpers import require_scoring
from membench.errors import UsageError
from membench.pipeline.settings import load_settings
from membench.sandbox.registry import BACKENDS


@click.group()
def pack() -> None:
    """Task packs: write a new skeleton, finalize a skeleton's secrets."""


@pack.command("new")
@click.argument("name")
@click.argument("out", type=click.Path(path_type=Path))
def new(name: str, out: Path) -> None:
    """Write a runnable skeleton pack NAME into OUT: docs/authoring.md's minimal example (one C1 trap).

    Edit it from there (docs/authoring.md explains every field), then `membench validate OUT` and
    `membench run OUT`."""
    from membench.packs.skeletons import write_example_pack
    from membench.formats.pack_format import PackError

    try:
        write_example_pack(name, out)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the skeleton ({exc.strerror or exc})") from None
    click.echo(f"wrote skeleton pack {name} to {out}: one C1 trap (docs/authoring.md); next: "
               f"membench validate {out}, then membench run {out}")


@pack.command()
@click.argument("skeleton")
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="replace OUT if it exists")
def finalize(skeleton: str, out: Path, force: bool) -> None:
    """Fill SKELETON's {{SECRET:name:class}} placeholders from a CSPRNG into OUT.

    Writes OUT/provenance.json (generator hash, format classes, where each secret was placed —
    never a value). Refuses undeclared, unused, cross-trap-shared and leftover placeholders.
    OUT appears whole or not at all: a failure leaves nothing behind and an existing OUT intact."""
    from membench.packs.finalize import finalize_pack
    from membench.packs.pack_resolver import resolve_pack_dir
    from membench.formats.pack_format import PackError, load_pack

    try:
        root = resolve_pack_dir(skeleton)
        load_pack(root, check_hidden=True)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    if out.exists() and any(out.iterdir()) if out.is_dir() else out.exists():
        if not force:
            raise UsageError(f"{out}: already exists (use --force to replace it)")
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise UsageError(f"{out}: must not be the skeleton or inside it")
    try:  # staged next to OUT and renamed at the end: a failure leaves OUT as it was
        provenance = finalize_pack(root, out, replace=force)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the finalized pack ({exc.strerror or exc})") from None
    count = sum(len(s["secrets"]) for s in provenance["sequences"].values())
    click.echo(f"finalized {root.name} -> {out}: {len(provenance['sequences'])} sequences, {count} secrets "
               f"(generator sha256 {provenance['generator_sha256'][:16]}…); provenance: {out / 'provenance.json'}")


@click.command()
@click.argument("pack_spec", metavar="PACK")
@click.option("--json", "as_json", is_flag=True, help="print the funnel as JSON")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--sandbox", "sandbox_name", default="bwrap", show_default=True, type=click.Choice(list(BACKENDS)))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="also write the JSON report here")
@click.option("--admitted", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="when traps are refused, write PACK without them to DIR (a new pack, the one to run) and "
              "record the funnel under the digest its runs carry")
def validate(pack_spec: str, as_json: bool, workers: int, sandbox_name: str, out: Path | None,
             admitted: Path | None) -> None:
    """Run PACK's admission gates live in the sandbox and print the admission funnel.

    Exit status 1 when a trap is refused, 2 when the pack itself is malformed or the scoring
    pre-flight fails (the oracle harness cannot score in SANDBOX here: no trap is judged)."""
    from membench.packs.pack_resolver import open_pack
    from membench.packs.validate import validate_pack, write_admitted_pack
    from membench.sandbox.registry import get_sandbox
    from membench.formats.pack_format import PackError

    console = Console(stderr=True)
    settings = load_settings()
    if admitted is not None and admitted.exists():  # refused before the (long) live gates
        raise UsageError(f"--admitted: {admitted} already exists (the admitted pack is written to a new directory)")
    done = [0]
    from membench.commands.terminal_display import plain_progress
    from membench.packs.pack_resolver import resolve_pack_dir
    from membench.formats.pack_format import load_pack

    try:
        traps = len(load_pack(resolve_pack_dir(pack_spec), check_hidden=False).sequences)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    # a redirected validate reports counts and an ETA between the per-trap lines
    lines = plain_progress(console, traps, what="traps", passes=False)

    def progress(verdict) -> None:
        done[0] += 1
        lines.add(excluded=not verdict.admitted)
        mark = "admitted" if verdict.admitted else f"refused ({verdict.first_failure})"
        console.print(f"[{done[0]}] {verdict.seq_id} ({verdict.construct}): {mark}", highlight=False)

    # the live gates score every trap: the harness must work first, or each trap would be refused
    # for the environment's fault (the pack's own traps are what the gates judge, so the self-test)
    require_scoring(None, sandbox_name)
    try:
        with lines.running():
            report = validate_pack(pack_spec, settings.home, get_sandbox(sandbox_name), workers, on_trap=progress)
    except PackError as exc:
        raise UsageError(str(exc)) from None
    data = report.to_json()
    if report.runnable:  # the digest `run PACK` carries
        record_validation(settings.home, data)
    if admitted is not None and report.refused and len(report.refused) < len(report.traps):
        try:
            write_admitted_pack(pack_spec, report, admitted)
            digest = open_pack(str(admitted), settings.home).digest  # finalized as its first run would
        except PackError as exc:
            raise UsageError(f"--admitted: {exc}") from None
        data["admitted_pack"] = {"directory": str(admitted), "pack_digest": digest}
        record_validation(settings.home, data, digest)
        console.print(f"admitted pack: {admitted} ({len(report.traps) - len(report.refused)} traps, digest "
                      f"{digest[:12]}); run it to have this funnel in its reports", highlight=False, markup=False,
                      soft_wrap=True)
    elif admitted is not None:
        why = "no trap was admitted" if report.refused else "every trap was admitted: PACK is its own admitted pack"
        console.print(f"--admitted: nothing written ({why})", highlight=False, markup=False, soft_wrap=True)
    elif not report.runnable:
        console.print("note: a trap's secret placeholders are broken, so `membench run` refuses this pack and no "
                      "run set will carry the digest checked here; --admitted DIR writes the pack of its admitted "
                      "traps and records this funnel for it", highlight=False, markup=False, soft_wrap=True)
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(report.to_markdown())
    if data["admitted"] < data["authored"]:
        raise SystemExit(1)


def record_validation(home: Path, data: dict, digest: str | None = None) -> None:
    """The funnel, kept as MEMBENCH_HOME/validations/<digest>.json (default: the validated pack's) so
    that the reports of run sets of that (finalized) pack show it (membench/pipeline/report_inputs.py); written
    to a temporary name and renamed."""
    from membench.pipeline.report_inputs import validation_path

    path = validation_path(home, digest or data["pack_digest"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
