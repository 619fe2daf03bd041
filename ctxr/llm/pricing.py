"""What tokens cost: a price table shipped as data (`pricing.json`), overridable by a user file.

Prices are data, not code, because they change more often than ctxr is released: a user fixes a
stale price or adds a local model (price 0) with a JSON file, without waiting for a release.
The estimate and the usage ledger both price through `PriceTable.cost`, so a dry run and a real
run can never disagree about arithmetic.

User file shape (CTXR_PRICES_FILE), dollars per million tokens; an entry for a known model may
give only the fields it changes, a new model needs at least `input` and `output`::

    {"models": {"my-model": {"provider": "openai", "input": 0.2, "cache_read": 0.05,
                             "output": 0.8, "batch_discount": 0}}}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ctxr.errors import ConfigError
from ctxr.llm.base import Usage

PER_MILLION = 1_000_000
PRICES_ENV = "CTXR_PRICES_FILE"
_FIELDS = ("input", "cache_write", "cache_write_1h", "cache_read", "output", "batch_discount")
_EXAMPLE = (
    '{"models": {"MODEL": {"provider": "openai", "input": 0.15, "cache_read": 0.075, '
    '"output": 0.6, "batch_discount": 0.5}}}'
)
# Snapshot and alias suffixes that bill like the base model: Anthropic's -20251001, -latest and
# -0 (claude-sonnet-4-0), OpenAI's -2024-07-18.
_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest|0)$")


def canonical_model(model: str) -> str:
    """The model name without its snapshot date or alias suffix: the key prices are kept under."""
    return _SUFFIX.sub("", model.strip())


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Dollars per million tokens of each kind; `batch_discount` is the share the Batch API
    takes off every line item (0.5 = half price; 0 = no batch API). `cache_write_1h` is
    Anthropic's 1-hour cache write (2x input); None where the provider has no such TTL."""

    provider: str
    input: float
    cache_write: float
    cache_read: float
    output: float
    batch_discount: float = 0.0
    cache_write_1h: float | None = None

    def cost(self, usage: Usage, batch: bool = False) -> float:
        hour = self.cache_write if self.cache_write_1h is None else self.cache_write_1h
        dollars = (
            usage.input_tokens * self.input
            + usage.cache_write_tokens * self.cache_write
            + usage.cache_write_1h_tokens * hour
            + usage.cache_read_tokens * self.cache_read
            + usage.output_tokens * self.output
        ) / PER_MILLION
        return dollars * (1.0 - self.batch_discount) if batch else dollars


@dataclass(frozen=True, slots=True)
class PriceTable:
    prices: Mapping[str, ModelPrice]
    prices_read: str
    sources: Mapping[str, str] = field(default_factory=dict)
    user_file: Path | None = None

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self._find(model) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.prices)

    def _find(self, model: str) -> ModelPrice | None:
        return self.prices.get(model.strip()) or self.prices.get(canonical_model(model))

    def get(self, model: str) -> ModelPrice:
        """The price of `model` (a dated snapshot falls back to its base name)."""
        price = self._find(model)
        if price is None:
            where = (
                f"the file {self.user_file}"
                if self.user_file
                else f"a JSON file named by {PRICES_ENV}"
            )
            raise ConfigError(
                f"no price for model {model!r}: add it to {where}, in dollars per million "
                f"tokens, for example {_EXAMPLE.replace('MODEL', model)} "
                f"(known models: {', '.join(sorted(self.prices))})"
            )
        return price

    def cost(self, model: str, usage: Usage, batch: bool = False) -> float:
        """Dollars for `usage` on `model`; `batch` applies the provider's Batch API discount."""
        return self.get(model).cost(usage, batch)

    def with_free(self, model: str, provider: str) -> PriceTable:
        """This table with `model` at $0 (a model served locally), unless it has a price."""
        if model in self:
            return self
        free = ModelPrice(provider, 0.0, 0.0, 0.0, 0.0)
        sources = {**self.sources, model: "served locally: $0"}
        return replace(self, prices={**self.prices, model: free}, sources=sources)


def _number(value: object, where: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: {name!r} must be a number, got {value!r}")
    if value < 0 or (name == "batch_discount" and value > 1):
        raise ConfigError(f"{where}: {name!r} is out of range ({value!r})")
    return float(value)


def _entry(raw: object, base: ModelPrice | None, where: str) -> ModelPrice:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object of prices, got {raw!r}")
    unknown = set(raw) - {"provider", *_FIELDS}
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: {_FIELDS}")
    values = {name: _number(raw[name], where, name) for name in _FIELDS if name in raw}
    provider = raw.get("provider", base.provider if base else "openai")
    if not isinstance(provider, str):
        raise ConfigError(f"{where}: 'provider' must be a string")
    if base is not None:
        return replace(base, provider=provider, **values)
    missing = [name for name in ("input", "output") if name not in values]
    if missing:
        raise ConfigError(f"{where}: a new model needs {missing}, e.g. {_EXAMPLE}")
    # A model without caching prices bills cached tokens like any other input.
    values.setdefault("cache_write", values["input"])
    values.setdefault("cache_read", values["input"])
    return ModelPrice(provider=provider, **values)


def _read_json(data: str, where: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc}); expected {_EXAMPLE}") from exc
    if not isinstance(parsed, dict) or not isinstance(parsed.get("models"), dict):
        raise ConfigError(f'{where}: expected a top-level "models" object, e.g. {_EXAMPLE}')
    return parsed


def _merge(
    prices: dict[str, ModelPrice], models: Mapping[str, object], where: str
) -> dict[str, ModelPrice]:
    merged = dict(prices)
    for name, raw in models.items():
        merged[name] = _entry(raw, merged.get(name), f"{where}: model {name!r}")
    return merged


def load_prices(user_file: Path | None = None) -> PriceTable:
    """The packaged table, with `user_file`'s entries overriding or extending it."""
    packaged = resources.files("ctxr.llm").joinpath("pricing.json").read_text("utf-8")
    base = _read_json(packaged, "ctxr/llm/pricing.json")
    prices = _merge({}, base["models"], "ctxr/llm/pricing.json")
    prices_read = str(base.get("prices_read", "unknown"))
    sources = {str(k): str(v) for k, v in dict(base.get("sources", {})).items()}
    if user_file is not None:
        try:
            text = Path(user_file).read_text("utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the price file {user_file} ({exc.strerror}); fix {PRICES_ENV}"
            ) from exc
        user = _read_json(text, str(user_file))
        prices = _merge(prices, user["models"], str(user_file))
        if "prices_read" in user:
            prices_read = f"{prices_read} (user file: {user['prices_read']})"
    return PriceTable(prices, prices_read, sources, user_file)
