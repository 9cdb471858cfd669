"""Model calls recorded beside a run set, and answered again from there (`--model-replay RUN_SET`).

Recording: with `--model-record`, the gateway stores each call's request body and response body
(as the agent received it: a JSON document, or the whole server-sent-event stream) in the run
set's blob store, `runs/<run set>/blobs/<sha256>`, and its ModelCall event names both digests.
The log is the index: nothing else is written.

Replay: a `Recording` is read from the recorded run set's log. A request is answered by the
response recorded for an identical request — identical after `wire.normalize_request` (ids, cache
keys, metadata, dates and UUIDs masked) — of the same unit (suite/task/condition/seed) first, else
of any unit; identical requests of one session get the recorded responses in their recorded order
(the last one repeats). Failing both, the divergence rule: a request of the same unit whose
`wire.loose_digest` equals a recorded one's (it differs at most in digits, day and month names and
spacing inside tool outputs — what `ls -la`, `id`, `ps`, `date` print about uids, pids and clocks)
gets that call's answer. Only calls an upstream answered (`ok`, `client_error`) are replayed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from membench.bus.blobs import get_blob
from membench.gateway.wire_apis import loose_digest, match_digest

# answers the agent received as the upstream sent them: a request's own failure (`request_failed`,
# a 429 or 5xx its probe did not reproduce) replays as the same failure
REPLAYABLE = ("ok", "client_error", "request_failed")


@dataclass(frozen=True)
class RecordedAnswer:
    http_status: int
    streamed: bool
    response_digest: str


def _match(blob_dir: Path, call: dict) -> tuple[str, str | None]:
    """The replay keys (exact, loose) of a recorded call, computed again from its stored request (so
    a recording made before a change of `normalize_request` still matches); the event's own exact
    key, and no loose one, otherwise."""
    body = get_blob(blob_dir, call["request_digest"])
    if body is None:
        return call["match_digest"], None
    try:
        request = json.loads(body)
    except ValueError:
        return call["match_digest"], None
    return match_digest(call["api"], request), loose_digest(call["api"], request)


class RecordingError(ValueError):
    """A recording that cannot be used (no such run set, nothing recorded)."""


class Recording:
    def __init__(self, blob_dir: Path, answers: dict[tuple[str, str], list[RecordedAnswer]], source: str,
                 loose: dict[tuple[str, str], list[RecordedAnswer]] | None = None):
        self.blob_dir = Path(blob_dir)
        self.source = source
        self._by_unit = answers
        self._loose = loose or {}  # (unit, loose key) -> answers: the divergence rule, same unit only
        self._any: dict[str, list[RecordedAnswer]] = defaultdict(list)
        for (_, match), found in answers.items():
            self._any[match] += found

    @classmethod
    def from_log(cls, log_path: Path, blob_dir: Path, run_set: str) -> "Recording":
        from membench.bus.attempts import read_log

        if not Path(log_path).exists():
            raise RecordingError(f"--model-replay: run set '{run_set}' has no log ({log_path})")
        return cls.from_events((event for event, _ in read_log(Path(log_path))), blob_dir, run_set)

    @classmethod
    def from_events(cls, events, blob_dir: Path, run_set: str) -> "Recording":
        """The recording of a run set's events (its log file's, or a Kafka run set's read from the
        trajectory topic, its blobs fetched from the blobs topic). A call whose response is not in
        the blob store is left out (an abandoned attempt on a runner killed before its blobs were
        acknowledged): the same request of the attempt that completed answers instead."""
        answers: dict[tuple[str, str], list[RecordedAnswer]] = defaultdict(list)
        loose: dict[tuple[str, str], list[RecordedAnswer]] = defaultdict(list)
        for event in events:
            p = event.payload
            if event.kind == "ModelCall" and p.get("recorded") and p["status"] in REPLAYABLE and p["response_digest"]:
                if not (Path(blob_dir) / p["response_digest"]).is_file():
                    continue
                exact, relaxed = _match(blob_dir, p)
                answer = RecordedAnswer(p["http_status"], p["streamed"], p["response_digest"])
                answers[(event.unit_id, exact)].append(answer)
                if relaxed is not None:
                    loose[(event.unit_id, relaxed)].append(answer)
        if not answers:
            raise RecordingError(f"--model-replay: run set '{run_set}' recorded no model calls "
                                 "(record one with --model-record)")
        return cls(blob_dir, dict(answers), run_set, dict(loose))

    def cursor(self, unit_id: str) -> "ReplayCursor":
        return ReplayCursor(self, unit_id)


class ReplayCursor:
    """One session's view of a recording: repeated identical requests advance through the answers."""

    def __init__(self, recording: Recording, unit_id: str):
        self._recording = recording
        self._unit_id = unit_id
        self._used: dict[str, int] = defaultdict(int)

    def answer(self, match: str, loose: str | None = None) -> tuple[RecordedAnswer, bytes] | None:
        """The recorded answer to a request with replay key `match`: of the same unit, else of any
        unit; failing both, under the divergence rule, of the same unit with loose key `loose`."""
        found = self._recording._by_unit.get((self._unit_id, match)) or self._recording._any.get(match)
        if not found and loose is not None:
            found = self._recording._loose.get((self._unit_id, loose))
            match = "loose:" + loose
        if not found:
            return None
        at = min(self._used[match], len(found) - 1)
        self._used[match] += 1
        body = get_blob(self._recording.blob_dir, found[at].response_digest)
        return None if body is None else (found[at], body)
