"""The replay divergence rule (docs/gateway.md, "Record and replay"): a request whose tool outputs
differ from the recorded one only in what the sandbox cannot hold still — uids, pids, sizes, clock
times, day names, column padding — gets the recorded answer; any other difference, or a difference
in what the model or the harness wrote, is still a miss."""

from __future__ import annotations

import json

import pytest

from membench.bus.blobs import put_blob
from membench.gateway.recording import RecordedAnswer, Recording
from membench.gateway.wire_apis import loose_digest, match_digest

LS_1 = ("total 8\ndrwxr-xr-x 2 1727527128 1727527128 4096 Wed Dec  2 00:51 .\n"
        "-rw-r--r-- 1 1727527128 1727527128   12 Wed Dec  2 00:51 app.py\nuid=1727527128 gid=1727527128\n"
        "  PID TTY  TIME CMD\n    1 ?    00:00:00 bwrap\n   17 ?    00:00:00 python3\nHOSTNAME=membench-sandbox")
LS_2 = ("total 8\ndrwxr-xr-x 2 153088464 153088464 4096 Thu Dec 12 09:05 .\n"
        "-rw-r--r-- 1 153088464 153088464   12 Thu Dec 12 09:05 app.py\nuid=153088464 gid=153088464\n"
        "  PID TTY  TIME CMD\n    1 ?    00:00:00 bwrap\n  243 ?    00:00:00 python3\nHOSTNAME=membench-sandbox")


def chat(tool_output: str, assistant_args: str = '{"command": "ls -la; id; ps; date; env"}') -> dict:
    return {"model": "m", "messages": [
        {"role": "user", "content": "fix the bug"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_run", "type": "function", "function": {"name": "run", "arguments": assistant_args}}]},
        {"role": "tool", "tool_call_id": "call_run", "content": tool_output}]}


def test_tool_output_that_differs_in_uids_pids_and_clocks_matches_loosely_only():
    first, second = chat(LS_1), chat(LS_2)
    assert match_digest("chat_completions", first) != match_digest("chat_completions", second)  # exact: a miss
    assert loose_digest("chat_completions", first) == loose_digest("chat_completions", second)


@pytest.mark.parametrize("other", [
    chat(LS_1.replace("app.py", "other.py")),  # the agent wrote a different file: the listing says so
    chat(LS_1, '{"command": "ls -la; id; ps; date; env; rm -rf x"}'),  # the model's own call differs
    chat(LS_1, '{"command": "ls -la; id; ps; date; env", "n": 2}'),  # digits outside tool output count
])
def test_a_real_divergence_still_misses(other):
    assert loose_digest("chat_completions", other) != loose_digest("chat_completions", chat(LS_1))


def test_the_rule_reads_each_wire_apis_tool_outputs():
    responses = [{"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "exec", "arguments": "{}"},
                                          {"type": "function_call_output", "call_id": "c", "output": ls}]}
                 for ls in (LS_1, LS_2)]
    assert loose_digest("responses", responses[0]) == loose_digest("responses", responses[1])
    messages = [{"model": "m", "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ls}]}]}]} for ls in (LS_1, LS_2)]
    assert loose_digest("messages", messages[0]) == loose_digest("messages", messages[1])
    # the same digits in the user's own text are not masked
    said = [{"model": "m", "messages": [{"role": "user", "content": f"use port {n}"}]} for n in (8000, 9000)]
    assert loose_digest("messages", said[0]) != loose_digest("messages", said[1])


def test_a_recording_answers_a_loose_match_of_the_same_unit_only(tmp_path):
    blobs = tmp_path / "blobs"
    answer = RecordedAnswer(200, False, put_blob(blobs, b'{"ok": true}'))
    recorded = chat(LS_1)
    recording = Recording(blobs, {("u/1", match_digest("chat_completions", recorded)): [answer]}, "rs",
                          {("u/1", loose_digest("chat_completions", recorded)): [answer]})
    replayed = chat(LS_2)
    keys = (match_digest("chat_completions", replayed), loose_digest("chat_completions", replayed))
    assert recording.cursor("u/1").answer(keys[0]) is None  # control: exact matching alone misses
    assert recording.cursor("u/1").answer(*keys)[1] == b'{"ok": true}'
    assert recording.cursor("u/2").answer(*keys) is None  # another unit's recording is not loosened
    diverged = chat(LS_2.replace("app.py", "other.py"))
    assert recording.cursor("u/1").answer(match_digest("chat_completions", diverged),
                                          loose_digest("chat_completions", diverged)) is None
    assert json.loads(recording.cursor("u/1").answer(*keys)[1]) == {"ok": True}


def test_a_recording_from_events_leaves_out_a_call_whose_response_never_reached_the_store(tmp_path):
    """A runner killed between a call's event and its blobs leaves an abandoned attempt's call with no
    body on the blobs topic: the completed attempt's identical call answers, not a dead end."""
    from membench.schemas.events import Event

    blobs = tmp_path / "blobs"
    request = json.dumps(chat(LS_1)).encode()

    def call(seq: int, response: str) -> Event:
        return Event(f"e{seq}", "rs", f"r{seq}", "u/1", 1, seq, 0, "test", "ModelCall", "harness", "", {
            "recorded": True, "status": "ok", "http_status": 200, "streamed": False, "api": "chat_completions",
            "request_digest": put_blob(blobs, request), "response_digest": response,
            "match_digest": match_digest("chat_completions", chat(LS_1))})

    lost = "0" * 64  # never stored
    kept = put_blob(blobs, b'{"kept": true}')
    recording = Recording.from_events([call(1, lost), call(2, kept)], blobs, "rs")
    assert recording.cursor("u/1").answer(match_digest("chat_completions", chat(LS_1)))[1] == b'{"kept": true}'
    with pytest.raises(Exception, match="recorded no model calls"):  # control: only the lost call
        Recording.from_events([call(1, lost)], blobs, "rs")
