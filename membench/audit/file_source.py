"""Replay's log-file source: the events of an Avro container log as written, whole or the share of
one `replay --jobs N` worker (`owns`)."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

from membench.audit.findings import Finding, Logged
from membench.schemas.events import Event


def owns(run_id: str, part: tuple[int, int] | None) -> bool:
    """Whether worker k of n (`part`) replays this run: by CRC-32 of the run id, stable across
    processes and machines (Python's `hash` of a string is salted per process)."""
    return part is None or zlib.crc32(run_id.encode()) % part[1] == part[0]


def events_from_file(path: Path, findings: list[Finding], part: tuple[int, int] | None = None) -> Iterator[Logged]:
    """(event, writer schema, datum) of an Avro container log (`membench.audit.logscan`), the datum the
    exact bytes written. With `part` = (k, n) only the events of the runs worker k owns (`owns`),
    each with a fourth element, its position in the whole log; the others are walked over without
    being decoded.

    A block that does not decode (or whose sync marker is wrong) is a finding naming its byte offset
    and the last event of the block before it; nothing from it on is trusted. Blocks are decoded
    whole before their events are used, so every worker names the same last good event."""
    from membench.audit.logscan import BlockError, LogFile, run_and_seq, run_of

    last: tuple[str, int | None] = ("?", None)
    position = 0  # events before this block, every worker's included: the run sets' order of appearance
    try:
        log = LogFile(path)
        schema = log.schema
        for offset, count, data in log.blocks():
            if part is None:
                decoded = log.decode_block(offset, count, data)
                for record, datum in decoded:
                    yield Event.from_record(record), schema, datum
                if decoded:
                    last = (decoded[-1][0]["run_id"], decoded[-1][0]["seq"])
                continue
            bounds = log.datum_bounds(offset, count, data)
            mine = []
            for index, (start, end) in enumerate(bounds):
                if owns(run_of(data, start), part):
                    try:
                        mine.append((log.decode_one(data, start), data[start:end], position + index))
                    except Exception as exc:  # the skipper walked it, fastavro does not read it
                        raise BlockError(offset, f"{type(exc).__name__}: {exc}") from None
            for record, datum, at in mine:
                yield Event.from_record(record), schema, datum, at
            position += len(bounds)
            if bounds:
                last = run_and_seq(data, bounds[-1][0])
    except BlockError as exc:
        reason = str(exc) if exc.offset == 0 else f"{path}: undecodable data near byte {exc.offset} ({exc})"
        findings.append(Finding(last[0], last[1], f"{reason} (after this event)" if last[1] is not None else reason))
