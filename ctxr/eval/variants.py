"""A trial's rows: ``NAME:KEY=VALUE,...`` specs, parsed and checked before any work.

Every trial has three rows, ``none``, ``outline`` and ``llm`` (the contexts it is about, each
searched hybrid), less those ``--without`` names; each ``--variant`` adds one, or replaces the
row of its name. Keys either
change what is indexed (``context``, ``chunk_tokens``, ``chunking``, ``model``, ``provider``:
rows that agree on all of them share one index) or only how it is searched (``mode``,
``fusion``, ``candidates``). A variant's context is ``llm`` unless it names another: a trial
is about LLM contexts. Kept apart from the trial so that `ctxr trial --help` needs none of the
indexing stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import get_args

from ctxr.config import FUSIONS, Chunking
from ctxr.errors import ConfigError
from ctxr.llm.registry import PROVIDERS

CONTEXTS = ("none", "outline", "llm")
MODES = ("hybrid", "dense", "bm25")
# Variant key -> the setting it sets (flat names, as `load_settings` takes them).
INDEX_KEYS: Mapping[str, str] = {
    "context": "context",
    "chunk_tokens": "chunk_tokens",
    "chunking": "chunking",
    "model": "llm_model",
    "provider": "llm_provider",
}
SEARCH_KEYS = ("mode", "fusion", "candidates")
KEYS = (*INDEX_KEYS, *SEARCH_KEYS)
DEFAULT_VARIANTS = ("none:context=none", "outline:context=outline", "llm:context=llm")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_FORM = "NAME:KEY=VALUE[,KEY=VALUE...]"


@dataclass(frozen=True, slots=True)
class Variant:
    """One row: what it indexes (`index`, settings by their flat names) and how it searches."""

    name: str
    context: str
    mode: str = "hybrid"
    fusion: str | None = None  # hybrid only; None: the configured fusion
    candidates: int | None = None  # None: the configured candidates
    index: Mapping[str, object] = field(default_factory=dict)  # settings besides the context
    spec: str = ""  # as given, for messages and the report

    @property
    def index_key(self) -> tuple[tuple[str, str], ...]:
        """Rows with equal keys share one index."""
        items = {"context": self.context, **{k: str(v) for k, v in self.index.items()}}
        return tuple(sorted((k, str(v)) for k, v in items.items()))

    def settings(self) -> dict[str, object]:
        """The settings this row's index is built with, by their flat names."""
        return {"context": self.context, **self.index}

    def to_json(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "context": self.context,
            "mode": self.mode,
            "fusion": self.fusion,
            "candidates": self.candidates,
            **{k: v for k, v in self.index.items()},
        }


def _bad(spec: str, why: str) -> ConfigError:
    return ConfigError(
        f"--variant {spec!r}: {why}; use {_FORM} with KEY one of {', '.join(KEYS)}, e.g. "
        "--variant big:chunk_tokens=400 or --variant rrf:context=llm,fusion=rrf"
    )


def _positive(spec: str, key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _bad(spec, f"{key} must be a whole number, got {value!r}") from None
    if number < 1:
        raise _bad(spec, f"{key} must be at least 1, got {number}")
    return number


def parse_variant(spec: str) -> Variant:
    """``"big:chunk_tokens=400,fusion=rrf"`` -> a row named "big" (context llm)."""
    name, colon, rest = spec.strip().partition(":")
    if not _NAME.fullmatch(name):
        raise _bad(spec, "the name must be letters, digits, '_', '.', '+' or '-'")
    if not colon or not rest.strip():
        raise _bad(spec, "no KEY=VALUE after the name")
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, equals, value = item.partition("=")
        key, value = key.strip().replace("-", "_"), value.strip()
        if not equals or not value:
            raise _bad(spec, f"{item!r} is not KEY=VALUE")
        if key not in KEYS:
            raise _bad(spec, f"unknown key {key!r}")
        if key in values:
            raise _bad(spec, f"{key} given twice")
        values[key] = value
    context = values.pop("context", "llm")
    if context not in CONTEXTS:
        raise _bad(spec, f"context must be one of {', '.join(CONTEXTS)}, got {context!r}")
    mode = values.pop("mode", "hybrid")
    if mode not in MODES:
        raise _bad(spec, f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    fusion = values.pop("fusion", None)
    if fusion is not None and (fusion not in FUSIONS or mode != "hybrid"):
        raise _bad(spec, f"fusion (hybrid rows only) must be one of {', '.join(FUSIONS)}")
    candidates = values.pop("candidates", None)
    for key, allowed in (("chunking", get_args(Chunking)), ("provider", PROVIDERS)):
        if key in values and values[key] not in allowed:
            raise _bad(spec, f"{key} must be one of {', '.join(allowed)}, got {values[key]!r}")
    index: dict[str, object] = {}
    for key, value in values.items():
        index[INDEX_KEYS[key]] = _positive(spec, key, value) if key == "chunk_tokens" else value
    if context != "llm" and ("llm_model" in index or "llm_provider" in index):
        raise _bad(spec, "model and provider apply to context=llm rows only")
    number = None if candidates is None else _positive(spec, "candidates", candidates)
    return Variant(name, context, mode, fusion, number, index, spec.strip())


def trial_variants(extra: Iterable[str] = (), without: Iterable[str] = ()) -> list[Variant]:
    """The three default rows less those `without` names, then each of `extra`; one named
    like a default replaces it."""
    rows = {v.name: v for v in map(parse_variant, DEFAULT_VARIANTS)}
    for name in without:
        if name not in rows:
            raise ConfigError(f"--without {name!r}: use one of {', '.join(rows)}")
        del rows[name]
    given: set[str] = set()
    for spec in extra:
        variant = parse_variant(spec)
        if variant.name in given:
            raise ConfigError(f"--variant: two rows are named {variant.name!r}; name each once")
        given.add(variant.name)
        rows[variant.name] = variant
    if not rows:
        raise ConfigError("--without leaves no row to measure; keep one or add a --variant")
    return list(rows.values())
