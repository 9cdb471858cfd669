"""`membench doctor`: which sandbox backends work on this machine, and why not."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help='print {"backends": {name: {"ok", "reason"}}, "agents": {name: {"ok", "reason"}}} as JSON')
def doctor(as_json: bool) -> None:
    """Probe each sandbox backend by running a real jailed command (bwrap; Docker API / podman), and
    each real agent CLI by starting it (`--version`) in the bwrap sandbox.

    Exits 0 when at least one backend works; a run on a backend that does not work records every
    unit as isolation_unavailable (excluded), never as an unjailed run. A missing agent CLI does not
    change the exit status (deploy/agents/install.sh installs them)."""
    from producers.agents.model_agents import MODEL_AGENTS
    from sandbox.registry import check_backends, get_sandbox

    backends = check_backends()
    agents = {}
    for name, cls in MODEL_AGENTS.items():
        ok, reason = cls(cls.default_model).check_in(get_sandbox("bwrap"))
        agents[name] = {"ok": ok, "reason": reason}
    if as_json:
        click.echo(json.dumps({"backends": backends, "agents": agents}, indent=2))
    else:
        table = Table(title="membench sandbox backends")
        table.add_column("backend")
        table.add_column("works")
        table.add_column("reason")
        for name, status in backends.items():
            table.add_row(name, "[green]yes[/]" if status["ok"] else "[red]no[/]", str(status["reason"]))
        Console().print(table)
        table = Table(title="membench agent CLIs (started in the bwrap sandbox)")
        for column in ("agent", "works", "reason"):
            table.add_column(column)
        for name, status in agents.items():
            table.add_row(name, "[green]yes[/]" if status["ok"] else "[red]no[/]", str(status["reason"]))
        Console().print(table)
    raise SystemExit(0 if any(status["ok"] for status in backends.values()) else 1)
