"""`membench doctor`: which sandbox backends work on this machine, and why not."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table


@click.command()
@click.option("--json", "as_json", is_flag=True,
              help='print {"backends": {name: {"ok", "reason", "preflight"}}, "agents": {name: {"ok", "reason"}}, '
                   '"mcp_servers": {name: {"ok", "reason"}}} as JSON')
def doctor(as_json: bool) -> None:
    """Run the scoring pre-flight in each sandbox backend (bwrap; Docker API / podman) — the same check
    `run`, `score`, `transfer` and `validate` make first: the backend's probe (a real jailed
    interpreter importing pytest) and the built-in smoke pack's reference solution passing and
    untouched base failing its oracle — start each real agent CLI (`--version`) in the bwrap
    sandbox, and say whether each MCP memory server (MCP-KG, MCP-BASIC, a user's) can start here.

    Exits 0 when at least one backend works; a command on a backend that does not work stops before
    anything runs (exit 2). A missing agent CLI or MCP server does not change the exit status
    (deploy/agents/install.sh and deploy/mcp-memory/install.sh install them)."""
    from membench.agents.model_agents import MODEL_AGENTS
    from membench.memory_systems.mcp_servers import MCP_SERVERS
    from membench.packs.finalize import finalize_pack
    from membench.packs.pack_resolver import BUILTIN_DIR
    from membench.runner.scoring_preflight import scoring_preflight
    from membench.sandbox.registry import BACKENDS, get_sandbox
    from membench.formats.pack_format import load_pack

    backends: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="membench-doctor-") as tmp:  # doctor writes nothing of its own
        finalize_pack(BUILTIN_DIR / "smoke", Path(tmp) / "smoke")
        smoke = load_pack(Path(tmp) / "smoke")
        for name in BACKENDS:
            result = scoring_preflight(smoke, name)
            backends[name] = {"ok": result.ok, "reason": result.reason if not result.ok else result.probe.reason,
                              "preflight": result.to_json()}
    agents = {}
    for name, cls in MODEL_AGENTS.items():
        ok, reason = cls(cls.default_model).check_in(get_sandbox("bwrap"))
        agents[name] = {"ok": ok, "reason": reason}
    servers = {}
    for name, spec in MCP_SERVERS.items():  # what `memory check` and a run under it would start
        ok, reason = spec.check()
        servers[name] = {"ok": ok, "reason": reason}
    if as_json:
        click.echo(json.dumps({"backends": backends, "agents": agents, "mcp_servers": servers}, indent=2))
    else:
        table = Table(title="membench sandbox backends")
        table.add_column("backend")
        table.add_column("works")
        table.add_column("reason")
        table.add_column("scoring pre-flight (smoke)")
        for name, status in backends.items():
            preflight = status["preflight"]
            checks = ", ".join(f"{c['repo']}: reference {c['reference']}, base {c['base']}"
                               for c in preflight["checks"])
            pytest_version = preflight["probe"]["pytest"]
            table.add_row(name, "[green]yes[/]" if status["ok"] else "[red]no[/]", str(status["reason"]),
                          checks + (f" (pytest {pytest_version})" if pytest_version else ""))
        Console().print(table)
        Console().print(_status_table("membench agent CLIs (started in the bwrap sandbox)", ("agent", "works"), agents))
        Console().print(_status_table("membench MCP memory servers (started on the host)", ("condition", "installed"),
                                      servers))
    raise SystemExit(0 if any(status["ok"] for status in backends.values()) else 1)


def _status_table(title: str, columns: tuple[str, str], statuses: dict[str, dict[str, Any]]) -> Table:
    """NAME, whether it works (yes/no) and why, one row each."""
    table = Table(title=title)
    for column in (*columns, "reason"):
        table.add_column(column)
    for name, status in statuses.items():
        table.add_row(name, "[green]yes[/]" if status["ok"] else "[red]no[/]", str(status["reason"]))
    return table
