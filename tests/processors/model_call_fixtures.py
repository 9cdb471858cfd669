"""A ModelCall payload as the gateway records it, for tests that fold or store model calls."""

from __future__ import annotations


def model_call(call_id: str, *, purpose: str = "agent", tokens: int = 10, usd: float = 0.0,
               price: str | None = None) -> dict:
    return {"call_id": call_id, "provider": "openai", "api": "chat_completions", "model": "m", "mode": "forward",
            "status": "ok", "http_status": 200, "request_digest": "r", "match_digest": "", "response_digest": None,
            "recorded": False, "streamed": False, "chunks": 0, "input_tokens": tokens, "cached_tokens": 1,
            "output_tokens": 2 * tokens, "reasoning_tokens": 0, "latency_ms": 5, "first_byte_ms": 1,
            "cost_usd": usd, "price": price, "error": None, "purpose": purpose}
