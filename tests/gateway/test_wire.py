"""The gateway's reading of the three wire APIs: usage from JSON and from server-sent events (split
anywhere), and the replay key that ignores what changes between runs but nothing else."""

from __future__ import annotations

import json

import pytest

from membench.gateway.prices import PriceTable, PriceTableError
from membench.gateway.wire_apis import StreamUsage, Usage, api_of, match_digest, normalize_request, usage_of_body


def sse(*docs: dict) -> bytes:
    return b"".join(f"event: {d.get('type', 'x')}\ndata: {json.dumps(d)}\n\n".encode() for d in docs)


def test_paths_name_their_api_and_provider():
    assert api_of("/v1/chat/completions") == ("chat_completions", "openai")
    assert api_of("/v1/responses") == ("responses", "openai")
    assert api_of("/v1/messages?beta=true") == ("messages", "anthropic")
    assert api_of("/api/hello") is None and api_of("/v1/models") is None


def test_json_usage_of_each_api_in_one_convention():
    chat = {"usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 40},
                      "completion_tokens_details": {"reasoning_tokens": 5}}}
    assert usage_of_body("chat_completions", chat) == Usage(100, 40, 20, 5)
    responses = {"usage": {"input_tokens": 90, "input_tokens_details": {"cached_tokens": 30}, "output_tokens": 12,
                           "output_tokens_details": {"reasoning_tokens": 7}}}
    assert usage_of_body("responses", responses) == Usage(90, 30, 12, 7)
    # Anthropic reports cache reads and writes beside input_tokens: input is their sum
    messages = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 300,
                          "output_tokens": 9}}
    assert usage_of_body("messages", messages) == Usage(510, 300, 9, 0)
    assert usage_of_body("messages", {"usage": {"input_tokens": True}}) == Usage()  # not a count


STREAMS = {
    "responses": (sse({"type": "response.created", "response": {"usage": None}},
                      {"type": "response.output_text.delta", "delta": "hi"},
                      {"type": "response.completed", "response": {"usage": {
                          "input_tokens": 50, "input_tokens_details": {"cached_tokens": 10}, "output_tokens": 8,
                          "output_tokens_details": {"reasoning_tokens": 3}}}}), Usage(50, 10, 8, 3), 3),
    "messages": (sse({"type": "message_start", "message": {"usage": {"input_tokens": 5, "cache_read_input_tokens": 20,
                                                                     "output_tokens": 1}}},
                     {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}},
                     {"type": "message_delta", "usage": {"output_tokens": 4}},
                     {"type": "message_delta", "usage": {"output_tokens": 11}},
                     {"type": "message_stop"}), Usage(25, 20, 11, 0), 5),
    "chat_completions": (b"data: " + json.dumps({"choices": [{"delta": {"content": "a"}}]}).encode() + b"\n\n"
                         + b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 7,
                                                                             "completion_tokens": 2}}).encode()
                         + b"\r\n\r\ndata: [DONE]\n\n", Usage(7, 0, 2, 0), 3),
}


@pytest.mark.parametrize("api", sorted(STREAMS))
@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
def test_stream_usage_does_not_depend_on_where_the_bytes_split(api, piece):
    data, expected, events = STREAMS[api]
    tracker = StreamUsage(api)
    for at in range(0, len(data), piece):
        tracker.feed(data[at:at + piece])
    tracker.close()
    assert tracker.usage == expected and tracker.events == events


def test_the_replay_key_ignores_ids_dates_and_timings_but_not_content():
    one = {"model": "m", "prompt_cache_key": "019a-...", "metadata": {"user_id": "device 1"},
           "input": [{"type": "message", "id": "msg_01a23009-b77b-75b0-873d-3628edbe55c8", "role": "user",
                      "content": [{"type": "input_text", "text": "<current_date>2026-12-01</current_date> fix it"}]},
                     {"type": "function_call_output", "call_id": "call_1",
                      "output": "Chunk ID: 679bbb\nWall time: 0.0012 seconds\n3 passed in 0.05s"}]}
    two = json.loads(json.dumps(one))
    two["prompt_cache_key"], two["metadata"] = "other", {"user_id": "device 2"}
    two["input"][0]["id"] = "msg_0000aaaa-b77b-75b0-873d-3628edbe55c8"
    two["input"][0]["content"][0]["text"] = "<current_date>2027-01-31</current_date> fix it"
    two["input"][1]["output"] = "Chunk ID: b7cee0\nWall time: 0.2000 seconds\n3 passed in 1.75s"
    assert match_digest("responses", one) == match_digest("responses", two)
    changed = json.loads(json.dumps(one))
    changed["input"][0]["content"][0]["text"] = "<current_date>2026-12-01</current_date> fix it now"
    assert match_digest("responses", one) != match_digest("responses", changed)
    assert match_digest("responses", one) != match_digest("chat_completions", one)
    assert normalize_request({"call_id": "call_1"}) == {"call_id": "call_1"}  # links between calls stay


def test_cost_uses_the_longest_matching_price_and_counts_cached_tokens_apart(tmp_path):
    table = PriceTable({"gpt-5*": {"input": 1.0, "cached_input": 0.1, "output": 10.0},
                        "gpt-5-mini*": {"input": 0.5, "cached_input": 0.05, "output": 2.0}})
    usage = Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000)
    assert table.cost("gpt-5-mini-2025", usage) == (pytest.approx(0.6 * 0.5 + 0.4 * 0.05 + 0.1 * 2.0), "gpt-5-mini*")
    assert table.cost("gpt-5", usage) == (pytest.approx(0.6 + 0.04 + 1.0), "gpt-5*")
    assert table.cost("unknown-model", usage) == (0.0, None)
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"models": {"m": {"input": 1, "cached_input": -1, "output": 2}}}))
    with pytest.raises(PriceTableError, match=r"prices.json: models.m.cached_input"):
        PriceTable.load(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"models": {"local-*": {"input": 0, "cached_input": 0, "output": 0.5}}}))
    assert PriceTable.load(good).cost("local-llama", Usage(0, 0, 2_000_000)) == (1.0, "local-*")
