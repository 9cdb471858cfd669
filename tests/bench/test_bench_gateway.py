"""`membench bench gateway` on loopback with tiny counts: the figures' structure, never their size."""

from __future__ import annotations

import json
from http.client import HTTPConnection
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from membench.bench.gateway import (APIS, PATHS, GatewayBench, UnixHTTPConnection, bench_gateway, long_script,
                                    percentile, request_body, scripted_upstream, sse_events)


def _check(result: GatewayBench, calls: int, chunks: int, chunk_calls: int, warmup: int) -> None:
    assert [(r.api, r.streamed) for r in result.per_call] == [(a, s) for a in APIS for s in (False, True)]
    for row in result.per_call:
        assert row.direct.n == row.via.n == calls
        for lat in (row.direct, row.via):
            assert 0 < lat.p50_ms <= lat.p95_ms
        assert row.added_p50_ms == pytest.approx(row.via.p50_ms - row.direct.p50_ms)
        assert row.added_p95_ms == pytest.approx(row.via.p95_ms - row.direct.p95_ms)
        assert (row.events > 0) == row.streamed
    assert [c.api for c in result.per_chunk] == list(APIS)
    for c in result.per_chunk:
        assert c.chunks == chunks
        for lat in (c.direct_short, c.via_short, c.direct_long, c.via_long):
            assert lat.n == chunk_calls and 0 < lat.p50_ms <= lat.p95_ms
        # the long answer is the short one with its text split into `chunks` deltas
        assert c.events_long - c.events_short == (chunks if c.api == "chat_completions" else chunks - 1)
        assert c.per_chunk_ms == pytest.approx((c.added_long_ms - c.added_short_ms) / (c.events_long - c.events_short))
        assert c.per_chunk_amortized_ms == pytest.approx(c.added_long_ms / c.events_long)
    # every call through the gateway became one ModelCall, all ok, with the chunks the client read
    per_series = 2 * len(APIS) * (warmup + calls) + 2 * len(APIS) * (max(1, warmup // 4) + chunk_calls)
    assert result.gateway_calls == result.model_calls == per_series
    assert result.statuses == {"ok": result.model_calls}
    assert result.chunk_counts_match
    assert set(result.targets) == {"call_p95_le_5ms", "chunk_le_1ms"}
    json.dumps(result.to_dict())


def test_bench_gateway_in_own_processes():
    result = bench_gateway(calls=4, chunks=12, chunk_calls=3, warmup=2)
    assert result.isolate and result.keepalive
    _check(result, calls=4, chunks=12, chunk_calls=3, warmup=2)


def test_bench_gateway_in_process_fresh_connections_large_prompt():
    result = bench_gateway(calls=3, chunks=5, chunk_calls=2, warmup=1, keepalive=False, isolate=False,
                           prompt_bytes=4096)
    assert not result.isolate and not result.keepalive and result.prompt_bytes == 4096
    _check(result, calls=3, chunks=5, chunk_calls=2, warmup=1)


def test_long_script_splits_into_exactly_the_chunks_asked():
    with scripted_upstream(long_script(7)) as upstream:
        upstream.chunks = 7
        url = urlsplit(upstream.base_url)
        for api, framing in (("chat_completions", 3), ("responses", 4), ("messages", 5)):
            connection = HTTPConnection(url.hostname, url.port, timeout=10)
            connection.request("POST", PATHS[api], body=request_body(api, True, long_answer=True),
                               headers={"Content-Type": "application/json"})
            data = connection.getresponse().read()
            connection.close()
            assert sse_events(data) == 7 + framing


def test_percentile_is_linear_between_ranks():
    assert percentile([1.0], 95) == 1.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(map(float, range(101))), 95) == 95.0
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_unix_connection_reports_a_missing_socket(tmp_path):
    connection = UnixHTTPConnection(str(tmp_path / "absent.sock"), timeout=1)
    with pytest.raises(OSError):
        connection.request("POST", "/v1/responses", body=b"{}")


def test_cli_gateway_json():
    from membench.commands.bench import bench

    out = CliRunner().invoke(bench, ["gateway", "--calls", "2", "--chunks", "4", "--chunk-calls", "2",
                                     "--warmup", "1", "--one-process", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output[out.output.index("{"):])
    assert doc["calls"] == 2 and doc["statuses"] == {"ok": doc["model_calls"]}
    assert {"nproc", "cpu_model"} <= set(doc["machine"])
