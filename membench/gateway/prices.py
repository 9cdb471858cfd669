"""What a model call cost, from a price table the user can replace (`--model-prices FILE`).

A table is JSON: `{"models": {"<model or prefix*>": {"input": USD, "cached_input": USD,
"output": USD}}}`, prices per million tokens. A model matches an exact key first, then the longest
`prefix*` key. cost = (input - cached) x input + cached x cached_input + output x output
(reasoning tokens are output tokens). Anthropic's cache writes are priced as plain input (the
gateway does not tell them apart). A model with no entry costs 0 and its `price` is null, so an
unpriced run is visible rather than cheap.

DEFAULT_PRICES are list prices published by the providers for a few common models (USD per
million tokens, as of 2025); they go stale — pass your own table for a paper.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from membench.gateway.wire_apis import Usage

DEFAULT_PRICES: dict[str, dict[str, float]] = {
    "gpt-5*": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
    "gpt-5-mini*": {"input": 0.25, "cached_input": 0.025, "output": 2.0},
    "gpt-5-nano*": {"input": 0.05, "cached_input": 0.005, "output": 0.4},
    "gpt-4.1*": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
    "gpt-4o*": {"input": 2.5, "cached_input": 1.25, "output": 10.0},
    "claude-sonnet-4*": {"input": 3.0, "cached_input": 0.3, "output": 15.0},
    "claude-opus-4*": {"input": 15.0, "cached_input": 1.5, "output": 75.0},
    "claude-haiku-4*": {"input": 1.0, "cached_input": 0.1, "output": 5.0},
    # embeddings (the memory libraries' embedders): input only
    "text-embedding-3-small*": {"input": 0.02, "cached_input": 0.02, "output": 0.0},
    "text-embedding-3-large*": {"input": 0.13, "cached_input": 0.13, "output": 0.0},
}
FIELDS = ("input", "cached_input", "output")


class PriceTableError(ValueError):
    """A price table that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class PriceTable:
    models: dict[str, dict[str, float]]

    @classmethod
    def default(cls) -> "PriceTable":
        return cls(dict(DEFAULT_PRICES))

    @classmethod
    def load(cls, path: Path) -> "PriceTable":
        try:
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise PriceTableError(f"{path}: {exc}") from None
        models = doc.get("models") if isinstance(doc, dict) else None
        if not isinstance(models, dict):
            raise PriceTableError(f"{path}: expected an object with a \"models\" object")
        table: dict[str, dict[str, float]] = {}
        for name, entry in models.items():
            if not isinstance(entry, dict):
                raise PriceTableError(f"{path}: models.{name}: expected an object with {', '.join(FIELDS)}")
            for key in FIELDS:
                value = entry.get(key)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise PriceTableError(f"{path}: models.{name}.{key}: expected a number >= 0 (USD per million tokens)")
            table[name] = {key: float(entry[key]) for key in FIELDS}
        return cls(table)

    def entry(self, model: str) -> str | None:
        if model in self.models:
            return model
        prefixes = [k for k in self.models if k.endswith("*") and model.startswith(k[:-1])]
        return max(prefixes, key=len) if prefixes else None

    def cost(self, model: str, usage: Usage) -> tuple[float, str | None]:
        """(USD, the entry used) for one call."""
        key = self.entry(model)
        if key is None:
            return 0.0, None
        price = self.models[key]
        uncached = max(usage.input_tokens - usage.cached_tokens, 0)
        usd = (uncached * price["input"] + usage.cached_tokens * price["cached_input"]
               + usage.output_tokens * price["output"]) / 1_000_000
        return round(usd, 8), key
