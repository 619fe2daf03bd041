"""`LLMReranker`: the configured LLM provider scores every candidate in one prompt.

The provider is the one that writes contexts (`CTXR_LLM_PROVIDER`, else detected from the
ANTHROPIC_* / OPENAI_* variables), with the same model setting. The answer must be a JSON list
of ``{"id": n, "score": 0-10}`` naming every passage exactly once; anything else is not
guessed at: the fused order comes back, flagged "rerank: unparseable answer".

The provider is the same `ctxr.llm` adapter that writes contexts, made for sync use, with the
SDK's retries off: a reranker has a time budget (`CTXR_RERANK_TIMEOUT`), and falling back to
the fused order is better than waiting.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Final

from ctxr.config import LLMSettings
from ctxr.errors import ConfigError, ProviderError, RerankError
from ctxr.llm import registry
from ctxr.llm.base import CompletionRequest
from ctxr.prompts import load_template
from ctxr.retrieve.rerank.base import RerankResult, rerank_with
from ctxr.types import Hit

UNPARSEABLE: Final = "rerank: unparseable answer"
MAX_SCORE: Final = 10.0
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)
# Slots are filled in one pass, so a query or passage containing "{{PASSAGES}}" stays verbatim.
_SLOTS = re.compile(r"\{\{(QUERY|PASSAGES|COUNT)\}\}")
_REASONING = re.compile(r"^(o\d|gpt-5)")


def rerank_prompt(query: str, passages: Sequence[str]) -> str:
    """The one prompt: the query and the numbered passages, asking for a JSON list."""
    numbered = "\n".join(
        f'<passage id="{i}">\n{text}\n</passage>' for i, text in enumerate(passages, start=1)
    )
    values = {"QUERY": query, "PASSAGES": numbered, "COUNT": str(len(passages))}
    return _SLOTS.sub(lambda m: values[m.group(1)], load_template("rerank").body)


def parse_scores(answer: str, count: int) -> list[float]:
    """Scores in passage order from the model's answer; `RerankError(UNPARSEABLE)` unless it is
    a JSON list giving every id 1..count exactly once a number from 0 to 10."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError:
        raise RerankError(UNPARSEABLE) from None
    if not isinstance(data, list) or len(data) != count:
        raise RerankError(UNPARSEABLE)
    scores: dict[int, float] = {}
    for item in data:
        if not isinstance(item, dict):
            raise RerankError(UNPARSEABLE)
        key, score = item.get("id"), item.get("score")
        if isinstance(key, bool) or not isinstance(key, int) or not 1 <= key <= count:
            raise RerankError(UNPARSEABLE)
        if key in scores or isinstance(score, bool) or not isinstance(score, int | float):
            raise RerankError(UNPARSEABLE)
        if not (math.isfinite(score) and 0.0 <= score <= MAX_SCORE):
            raise RerankError(UNPARSEABLE)
        scores[key] = float(score)
    return [scores[i] for i in range(1, count + 1)]


class LLMReranker:
    """Satisfies `ctxr.retrieve.rerank.base.Reranker` structurally."""

    def __init__(
        self,
        provider: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if provider not in registry.PROVIDERS:
            raise ConfigError(
                f"unknown LLM provider {provider!r}; use one of {', '.join(registry.PROVIDERS)}"
            )
        self.provider = provider
        self.model = model or registry.DEFAULT_MODELS[provider]
        # The same adapter that writes contexts, made for sync use: a search runs in a worker
        # thread, where a sync client needs no event loop of its own.
        self._llm = registry.make_sync_llm(
            provider, self.model, api_key=api_key, base_url=base_url, timeout=timeout
        )

    @classmethod
    def from_settings(cls, llm: LLMSettings, timeout: float) -> LLMReranker:
        provider = registry.choose_provider(llm.llm_provider)
        if provider is None:
            raise ConfigError(
                "the llm reranker needs an LLM provider: set ANTHROPIC_API_KEY or "
                "OPENAI_API_KEY (or ANTHROPIC_BASE_URL / OPENAI_BASE_URL for a local server), "
                "or CTXR_LLM_PROVIDER"
            )
        return cls(provider, llm.llm_model, timeout=timeout)

    @property
    def name(self) -> str:
        return "llm"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> RerankResult:
        return rerank_with(self.score, query, hits, top_n)

    def score(self, query: str, passages: list[str]) -> list[float]:
        return parse_scores(
            self.complete(rerank_prompt(query, passages), len(passages)), len(passages)
        )

    def complete(self, prompt: str, count: int) -> str:
        """The model's answer to `prompt`; `RerankError` on any failure of the call."""
        budget = 16 * count + 64  # about 12 tokens per {"id": n, "score": s} entry
        request = CompletionRequest(prompt, cache=False, max_output_tokens=budget)
        try:
            return self._llm.complete_sync(request).text
        except ProviderError as exc:
            raise RerankError(_flag(exc)) from None

    def close(self) -> None:
        self._llm.close()


def _flag(exc: ProviderError) -> str:
    """A short flag for a failed call: timeout, HTTP status, or connection failure."""
    if exc.timed_out:
        return "rerank failed: timeout"
    if exc.status is not None:
        return f"rerank failed: HTTP {exc.status}"
    if exc.connection:
        return "rerank failed: connection failed"
    return "rerank: unparseable answer" if "malformed" in str(exc) else f"rerank failed: {exc}"
