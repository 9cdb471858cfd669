"""`membench export otel RUN_SET`: a run set as OpenTelemetry GenAI traces, sent to an OTLP/HTTP
endpoint (`--endpoint`) and/or written as OTLP JSON lines (`--file`). The mapping is
`membench/exports/otel.py`'s; docs/exports/otel.md describes it."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from membench.commands.cli_helpers import connect_for_reading, dsn_options, validate_run_set_id
from membench.errors import UsageError
from membench.pipeline.settings import Settings


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option}: expected KEY=VALUE, got '{value}'")
        out[key.strip()] = val
    return out


@click.command("otel")
@click.argument("run_set")
@click.option("--endpoint", metavar="URL", default=None,
              help="an OTLP/HTTP receiver: the traces URL (http://host:4318/v1/traces), or its base URL, to which "
                   "/v1/traces is added")
@click.option("--file", "out_file", metavar="PATH", default=None,
              help="write OTLP JSON: one ExportTraceServiceRequest per line, one line per run ('-': stdout)")
@click.option("--include-content", is_flag=True,
              help="also export text: memory queries and records, turns, tool output, diffs (off by default: they "
                   "may hold secrets of the pack and whatever the agent saw)")
@click.option("--include-harness", is_flag=True,
              help="also export the harness-only events this export does not map (OracleLabel: the gold labels) "
                   "as span events with their payload")
@click.option("--header", "headers", metavar="KEY=VALUE", multiple=True, help="an HTTP header for --endpoint "
              "(repeatable), e.g. an API key the receiver wants")
@click.option("--resource", "resource_attrs", metavar="KEY=VALUE", multiple=True,
              help="a resource attribute added to every span (repeatable), e.g. openinference.project.name=NAME")
@click.option("--timeout", "timeout_s", type=float, default=10.0, show_default=True,
              help="seconds for each request to --endpoint, retries included")
@dsn_options
def otel(run_set: str, endpoint: str | None, out_file: str | None, include_content: bool, include_harness: bool,
         headers: tuple[str, ...], resource_attrs: tuple[str, ...], timeout_s: float, settings: Settings) -> None:
    """Export RUN_SET as OpenTelemetry traces following the GenAI semantic conventions: one trace per
    run, an invoke_agent span per session, chat spans for model calls, execute_tool spans for tool
    calls, search_memory / update_memory spans for memory reads and writes. Needs --endpoint, --file,
    or both. An unknown run set exits 2; an endpoint that cannot take the spans exits 1."""
    from membench.exports.otel import ExportOptions, OtelExportError, Sender, batches, default_resource, otlp_json, \
        run_set_spans, traces_endpoint
    from membench.warehouse.client import WarehouseError

    validate_run_set_id(run_set, "RUN_SET")
    if not endpoint and not out_file:
        raise UsageError("export otel: give --endpoint URL, --file PATH, or both")
    if timeout_s <= 0:
        raise UsageError("--timeout: must be positive")
    header_map = _pairs(headers, "--header")
    resource = default_resource(run_set, _pairs(resource_attrs, "--resource"))
    if endpoint:
        try:
            traces_endpoint(endpoint)
        except OtelExportError as exc:
            raise UsageError(str(exc)) from None
    try:
        warehouse = connect_for_reading(settings, [run_set])
    except WarehouseError as exc:
        raise UsageError(str(exc)) from None

    options = ExportOptions(include_content=include_content, include_harness=include_harness)
    sender = Sender(endpoint, header_map, timeout_s) if endpoint else None
    out, tmp_path = None, None
    runs = spans_total = 0
    try:
        try:
            per_run = run_set_spans(warehouse, run_set, options, resource)
            first = next(per_run)  # an unknown run set fails here, before a file is opened
        except OtelExportError as exc:
            raise UsageError(str(exc)) from None
        if out_file == "-":
            out = sys.stdout
        elif out_file:
            target = Path(out_file)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_path = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent))
            out = os.fdopen(fd, "w", encoding="utf-8")

        def counted():
            nonlocal runs, spans_total
            import itertools
            import json

            for spans in itertools.chain([first], per_run):
                runs += 1
                spans_total += len(spans)
                if out is not None and spans:
                    out.write(json.dumps(otlp_json(spans), ensure_ascii=False, separators=(",", ":")) + "\n")
                yield spans

        try:
            if sender is not None:
                for batch in batches(counted()):
                    sender.send(batch)
            else:
                for _ in counted():
                    pass
        except OtelExportError as exc:
            raise click.ClickException(str(exc)) from None
        if out is not None and out is not sys.stdout:
            out.close()
            assert tmp_path is not None and out_file is not None  # a file is written only where --file names one
            os.replace(tmp_path, out_file)
            tmp_path = None
    finally:
        warehouse.close()
        if sender is not None:
            sender.close()
        if tmp_path is not None:
            if out is not None and not out.closed:
                out.close()
            os.unlink(tmp_path)
    where = " and ".join(w for w in (sender.endpoint if sender else None,
                                     out_file if out_file and out_file != "-" else None) if w)
    click.echo(f"exported {spans_total} spans in {runs} traces (one per run) of run set {run_set}"
               + (f" to {where}" if where else ""), err=True)
